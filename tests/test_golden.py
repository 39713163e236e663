"""The Parquet golden store: record, verify, plain readers, and every way a golden can be bad."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import get_args

import numpy as np
import pytest
from pydantic import BaseModel

from golden.manifest import MANIFEST
from golden.store import load_golden
from harness.base.errors import GoldenError, HarnessError
from harness.base.jsonio import canonical
from harness.data.schemas.base import Strict
from harness.data.schemas.files import GoldenManifest, RunManifest
from harness.pipeline.record import record_golden, verify_golden
from tests.tamper import edit_manifest, flip_byte, rehash_files


def test_recorded_golden_holds_everything_that_produced_it(recorded_golden, small_model, small_config):
    m = recorded_golden.manifest.model_dump(mode="json")  # the JSON it was read from
    assert m["model"]["fingerprint"] == small_model.fingerprint
    assert set(m["files"]) == {"corpus.parquet", "op0.parquet", "op1.parquet", "op2.parquet", "calls.parquet"}
    for entry in m["files"].values():
        assert len(entry["sha256"]) == 64 and entry["bytes"] > 0
    env = m["environment"]
    for key in ("harness", "torch", "numpy", "pyarrow", "python", "cpu", "device_name", "cuda", "cudnn", "driver"):
        assert key in env
    numerics = m["numerics"]["in_force"]
    for key in (
        "threads",
        "mkldnn",
        "cudnn_benchmark",
        "cudnn_deterministic",
        "deterministic_algorithms",
        "matmul_allow_tf32",
        "cudnn_allow_tf32",
        "matmul_precision",
    ):
        assert key in numerics
    assert m["numerics_profile"].startswith("np-")
    assert m["reproducibility"]["repeats"] == 2 and m["reproducibility"]["bitwise"] is True
    assert m["config"] == small_config.to_dict() and m["golden_id"].startswith("small-rel@")
    assert m["corpus"]["blocks"] == 12 and m["corpus"]["max_span_samples"] > 0


def test_verify_reproduces_bitwise(recorded_golden, backend, small_config):
    result = verify_golden(recorded_golden, backend, small_config)
    assert result.status == "bitwise" and result.passed and result.same_setup
    assert "reproduced bitwise" in result.summary


def test_verify_against_another_model_names_the_fingerprint_first(recorded_golden, small_config):
    from harness.data.numeric_settings import NumericSettings
    from lanes.backends.backend import InProcessBackend
    from lanes.models.diar_nn_g import DiarNNG

    other = InProcessBackend(DiarNNG("small", seed=1), NumericSettings(threads=1))
    result = verify_golden(recorded_golden, other, small_config)
    assert result.status == "drift" and not result.passed
    what = result.summary.split("what differs: ")[1]
    assert what.startswith("the model fingerprint differs") and "numerics.threads" in what


def test_parquet_files_open_with_pandas_and_duckdb(recorded_golden, geometry):
    import duckdb
    import pandas as pd

    op0 = pd.read_parquet(recorded_golden.path / "op0.parquet")
    assert list(op0.columns) == ["block_id", "window", "valid", "logprobs", "top_class", "top_margin"]
    assert len(op0) == 12 * 8
    first = np.asarray(op0["logprobs"].iloc[0]).reshape(geometry.frames_per_window, geometry.classes)
    batch = recorded_golden.outputs().select([op0["block_id"].iloc[0]])
    np.testing.assert_array_equal(first, batch.segmentation.logprobs[0, 0])
    op1 = pd.read_parquet(recorded_golden.path / "op1.parquet")
    assert {"block_id", "window", "speaker", "weights", "embedding"} <= set(op1.columns)

    con = duckdb.connect()
    path = str(recorded_golden.path / "op1.parquet")
    rows, dim = con.execute(f"select count(*), max(len(embedding)) from read_parquet('{path}')").fetchone()
    assert rows == recorded_golden.manifest.files["op1.parquet"].rows and dim == geometry.embedding_dim
    per_block = con.execute(
        f"select block_id, count(*) from read_parquet('{recorded_golden.path / 'op0.parquet'}') group by 1"
    ).fetchall()
    assert {n for _, n in per_block} == {8}


def test_a_flipped_byte_is_refused_naming_the_file(golden_copy):
    flip_byte(golden_copy / "op1.parquet")
    with pytest.raises(GoldenError, match=r"op1.parquet: sha256 .* does not match the manifest"):
        load_golden(golden_copy).outputs()


def test_a_flipped_byte_behind_a_forged_manifest_fails_its_page_checksum(golden_copy):
    """A forger who re-hashes the file and re-seals the manifest still meets Parquet's page CRCs."""
    path = golden_copy / "op0.parquet"
    flip_byte(path, at=path.stat().st_size // 3)
    edit_manifest(golden_copy, lambda m: rehash_files(m, golden_copy), reseal=True)
    with pytest.raises(GoldenError, match=r"op0.parquet.*(corrupt|not a readable)"):
        reader = load_golden(golden_copy).outputs()
        list(reader.batches())


def test_a_truncated_file_is_refused(golden_copy):
    path = golden_copy / "op0.parquet"
    path.write_bytes(path.read_bytes()[:-1000])
    with pytest.raises(GoldenError, match=r"op0.parquet: size .* \(truncated or replaced\)"):
        load_golden(golden_copy)


def test_a_missing_file_and_a_stray_file_are_refused(golden_copy):
    (golden_copy / "stray.parquet").write_bytes(b"x")
    with pytest.raises(GoldenError, match="stray.parquet: data file not listed"):
        load_golden(golden_copy)
    (golden_copy / "stray.parquet").unlink()
    (golden_copy / "op2.parquet").unlink()
    with pytest.raises(GoldenError, match="op2.parquet: listed in the manifest but missing"):
        load_golden(golden_copy)


def test_a_consistent_but_wrong_schema_is_refused(golden_copy):
    """Even with matching hashes and a re-sealed manifest, a file of another schema is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"block_id": ["a"], "x": [1]}), golden_copy / "op2.parquet")
    edit_manifest(golden_copy, lambda m: rehash_files(m, golden_copy), reseal=True)
    with pytest.raises(GoldenError, match="op2.parquet: golden .* OP 2 output file has schema"):
        load_golden(golden_copy).outputs()


def test_a_golden_of_another_model_is_refused(golden_copy):
    from lanes.models.diar_nn_g import DiarNNG

    other = DiarNNG("small", seed=1)
    with pytest.raises(GoldenError, match="golden of another model"):
        load_golden(golden_copy, expect_fingerprint=other.fingerprint)


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "golden manifest is not valid JSON"),
        ("[1, 2]", "not a golden manifest \\(a JSON list"),
        ("", "golden manifest is empty"),
        ('{"kind": "harness.golden", "format": 99}', "format: unknown format version"),
    ],
)
def test_a_corrupt_manifest_is_refused(golden_copy, content, message):
    (golden_copy / MANIFEST).write_text(content)
    with pytest.raises(HarnessError, match=message):
        load_golden(golden_copy)


def test_an_edited_noise_floor_breaks_the_seal(golden_copy):
    edit_manifest(golden_copy, lambda m: m["reproducibility"]["ops"]["0"].update(max_abs=1.0))
    with pytest.raises(GoldenError, match="edited after it was written"):
        load_golden(golden_copy)


def test_the_manifest_in_memory_is_the_json_on_disk(golden_copy):
    """A golden's manifest is a model in memory; dumped, it is the very JSON it was read from (what a merge,
    a score or `golden show` copies from it), with its optional module floors and without them."""
    on_disk = json.loads((golden_copy / MANIFEST).read_text())
    assert "module_floors" in on_disk
    assert canonical(load_golden(golden_copy).manifest.model_dump(mode="json")) == canonical(on_disk)
    without = edit_manifest(golden_copy, lambda m: m.pop("module_floors"), reseal=True)
    dumped = load_golden(golden_copy).manifest.model_dump(mode="json")
    assert "module_floors" not in dumped, "an absent optional key came back as null"
    assert canonical(dumped) == canonical(without)


def test_a_forged_golden_id_is_refused(golden_copy):
    def forge(m: dict) -> None:
        m["golden_id"] = "small-rel@000000000000"

    data = edit_manifest(golden_copy, forge)
    data.pop("manifest_sha256")
    from harness.base.jsonio import seal

    (golden_copy / MANIFEST).write_text(__import__("json").dumps(seal(data, "manifest_sha256")))
    with pytest.raises(GoldenError, match="is not the one its content derives"):
        load_golden(golden_copy)


def test_a_file_entry_outside_the_golden_is_refused(golden_copy):
    def escape(m: dict) -> None:
        m["files"]["../other/op0.parquet"] = m["files"].pop("op0.parquet")

    edit_manifest(golden_copy, escape, reseal=True)
    with pytest.raises(GoldenError, match=r"files\.\.\./other/op0.parquet.*not a plain relative path"):
        load_golden(golden_copy)


def test_nothing_is_overwritten_and_regen_lands_beside(tmp_path, small_corpus, backend, small_config):
    part = small_corpus.subset([0, 1, 2, 3, 4, 5])
    golden, _ = record_golden(tmp_path, "rel", part.rows(), backend, small_config)
    with pytest.raises(GoldenError, match="exists; record with --regen"):
        record_golden(tmp_path, "rel", part.rows(), backend, small_config)
    new, changes = record_golden(tmp_path, "rel", part.rows(), backend, small_config, regen=True)
    assert new.path != golden.path and new.path.name.startswith("rel.regen-")
    assert changes.ops["0"]["bitwise"] is True and changes.fingerprint_changed is False
    assert load_golden(golden.path).golden_id == golden.golden_id  # the old one is untouched


def test_recording_refuses_non_finite_outputs(tmp_path, small_corpus, small_config):
    from harness.data.numeric_settings import NumericSettings
    from lanes.backends.backend import InProcessBackend
    from lanes.controls.defects import NanWindowModel

    class NanAlways(NanWindowModel):
        WINDOW = 3

    be = InProcessBackend(NanAlways("small"), NumericSettings())
    with pytest.raises(GoldenError, match=r"refusing to record a golden: OP 0 output of block .* window 3 holds NaN"):
        record_golden(tmp_path, "nan", small_corpus.subset([0, 1]).rows(), be, small_config)
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_while_writing_leaves_no_golden(tmp_path, small_corpus, backend, small_config, monkeypatch):
    monkeypatch.setenv("HARNESS_FAULT", "enospc:parquet:calls.parquet")
    with pytest.raises(HarnessError, match="calls.parquet: cannot write \\(No space left on device\\)"):
        record_golden(tmp_path, "crash", small_corpus.subset([0, 1]).rows(), backend, small_config)
    assert list(tmp_path.iterdir()) == []


def test_a_recording_killed_midway_leaves_no_golden(tmp_path):
    """SIGKILL a real `harness golden record` while it runs: no golden directory is left looking complete."""
    # the `slow` control sleeps 1 s per call: the recording (4 blocks x 2 x 3 calls) lasts ~30 s
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HARNESS_SLOW_SECONDS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "golden",
        "record",
        "--model",
        "lanes.controls:slow",
        "--goldens",
        str(tmp_path / "goldens"),
        "--release",
        "killed",
        "--no-progress",
        "--config",
        str(tmp_path / "h.toml"),
    ]
    (tmp_path / "h.toml").write_text("[corpus]\nblocks = 4\n")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    # kill once the write has begun (its temporary folder exists), however slow the machine is to get there:
    # the recording then has at least ~20 s of 1-s calls left, so the kill lands mid-write
    deadline = time.monotonic() + 600
    while not list((tmp_path / "goldens").glob(".killed.tmp-*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read().decode()
        time.sleep(0.05)
    assert proc.poll() is None, proc.stdout.read().decode()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    final = tmp_path / "goldens" / "killed"
    assert not final.exists()
    with pytest.raises(GoldenError, match="no such golden directory"):
        load_golden(final)
    leftovers = list((tmp_path / "goldens").glob(".killed.tmp-*"))
    assert leftovers, "the kill left no temporary folder: the test did not interrupt the write"
    for leftover in leftovers:
        with pytest.raises(GoldenError, match="an unfinished golden"):
            load_golden(leftover)


def test_stored_decisions_match_the_log_probabilities(recorded_golden):
    for batch in recorded_golden.outputs().batches():
        seg = batch.segmentation
        argmax, margin = seg.decisions()
        flat = seg.logprobs.reshape(-1, seg.logprobs.shape[-1])
        np.testing.assert_array_equal(argmax, flat.argmax(axis=1))
        top = np.sort(flat, axis=1)
        np.testing.assert_array_equal(margin, top[:, -1] - top[:, -2])


def _models_in(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in get_args(annotation):
        yield from _models_in(arg)


def _defaults_not_optional(model: type[BaseModel], seen: set[type]) -> Iterator[str]:
    """Every field of ``model`` and the models inside it that has a default but is not one of its model's
    ``optional_keys``: dumped, such a field adds a key the file did not hold (and changes its digest)."""
    if model in seen:
        return
    seen.add(model)
    optional = getattr(model, "optional_keys", frozenset())
    for name, info in model.model_fields.items():
        if not info.is_required() and name not in optional:
            yield f"{model.__name__}.{name}"
        for inner in _models_in(info.annotation):
            yield from _defaults_not_optional(inner, seen)


def test_every_defaulted_key_of_a_manifest_is_left_out_when_absent():
    """The law behind the round trip above, for every key: a field of a manifest's model (or of a model inside
    it) with a default is an optional key, so a file without it dumps without it."""
    for model in (GoldenManifest, RunManifest):
        assert list(_defaults_not_optional(model, set())) == [], model.__name__

    class Careless(Strict):  # the negative control: a default that is not an optional key is found
        kept: int = 0

    class Holder(Strict):
        inner: dict[str, Careless]

    assert list(_defaults_not_optional(Holder, set())) == ["Careless.kept"]
