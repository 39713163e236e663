"""``audit --ray``: the production audit's exact lane on a local Ray cluster (2 CPU workers), judged in the driver.

The same audit as one process (every verdict, metric and check of audit.json, JUnit and the report
but for the time they were made) on a capture of several row groups cut in shards across them; the
negative controls still fail, the same way (a capture served by another model, a NaN in a served
output); a broken law stops the audit before any worker starts; a worker SIGKILLed mid-shard is
retried by Ray with the same result; a shard whose model refuses its input fails the job once, in
one line, with no audit written. The no-Ray line is tested with the other commands (tests/test_ray.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import harness.capture.schema as capture_schema
from examples.capture_simulated_engine import one_short_packer
from harness.base.errors import HarnessError
from harness.capture import CapturedRequest, CaptureReader
from harness.capture.capture_laws import Survey
from harness.corpus.shards import request_ranges
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.audit import AuditFile, GoldenModel
from harness.data.schemas.config_file import ModelSection
from harness.pipeline.audit import audit_capture
from harness.pipeline.backends import make_backend
from harness.pipeline.capture import serve_and_capture
from harness.pipeline.distributed import RayOptions
from harness.pipeline.ray_audit import RayRerun, audit_on_ray, write_exact
from harness.pipeline.shard_worker import WorkerSpec
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model
from tests.test_audit import rewrite

# The 'ray' extra: without it this module skips whole, saying why (tests.test_ray imports ray).
pytest.importorskip("ray", reason="the audit --ray tests need the 'ray' extra (pip install -e '.[ray]')")
from tests.test_ray import REPO, kill_the_held_worker, local_cluster  # noqa: E402

NUMERICS = NumericSettings(threads=1)  # two workers on two cores
CFG = release_config(model=ModelSection(spec="small"), numerics=NUMERICS)
TIMESTAMPED = ("created", "digest")  # the digest seals the creation time too


def comparable(result: dict | AuditFile) -> dict:
    """The audit file's JSON (a typed audit dumped as it is written) without what the clock sets."""
    data = result.model_dump(mode="json") if isinstance(result, AuditFile) else result
    return {k: v for k, v in data.items() if k not in TIMESTAMPED}


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, Path]:
    """Captures of 12 blocks (9 requests) written 2 requests per row group: shards straddle row groups."""
    root = tmp_path_factory.mktemp("ray-captures")
    golden = InProcessBackend(load_model("small"), NUMERICS)
    blocks = synth_corpus(golden.geometry, 12).blocks
    paths = {name: root / f"{name}.parquet" for name in ("good", "other-model", "off-by-one")}

    def nan(request: CapturedRequest) -> CapturedRequest:
        if request.request_id != "r000003":
            return request
        output = request.output.copy()
        output[11, 7, 2] = np.nan
        return dataclasses.replace(request, output=output)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(capture_schema, "GROUP_REQUESTS", 2)
        serve_and_capture(paths["good"], blocks, golden, 4)
        serve_and_capture(paths["other-model"], blocks, InProcessBackend(load_model("small", seed=1), NUMERICS), 4)
        full = [b for b in synth_corpus(golden.geometry, 24).blocks if (b.valid > 0).all()][:4]
        serve_and_capture(paths["off-by-one"], full, golden, 2, one_short_packer)
        paths["nan"] = rewrite(paths["good"], root / "nan.parquet", nan)
    return paths


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("hold")) as hold:
        yield hold


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, captures) -> dict:
    """The plain audit of every capture: what each Ray audit must equal."""
    root = tmp_path_factory.mktemp("one-process")
    return {name: audit_capture(path, root / name, CFG, lambda: make_backend(CFG)) for name, path in captures.items()}


def test_the_capture_reader_reads_a_shard_and_counts_blocks_without_the_tensors(captures):
    reader = CaptureReader(captures["good"])
    every = list(reader.requests())
    assert reader.file.metadata.num_row_groups == 5
    assert reader.block_counts().tolist() == [sum(not s.padding for s in r.packed.segments) for r in every]
    for rows in (range(0, 9), range(1, 4), range(3, 4), range(4, 9), range(8, 9)):
        part = list(reader.requests(rows))
        assert [(r.request_id, r.row) for r in part] == [(r.request_id, r.row) for r in every[rows.start : rows.stop]]
        assert all(np.array_equal(a.output, b.output) for a, b in zip(part, every[rows.start : rows.stop], strict=True))


@given(sizes=st.lists(st.integers(0, 40), min_size=1, max_size=60), count=st.integers(1, 20))
def test_request_ranges_cut_the_capture_in_whole_requests_in_order(sizes, count):
    shards = request_ranges(sizes, count)
    assert len(shards) == min(count, len(sizes)) and [(s.index, s.count) for s in shards] == [
        (i + 1, len(shards)) for i in range(len(shards))
    ]
    assert [r for s in shards for r in s.rows] == list(range(len(sizes)))  # every request once, in order, none empty
    assert all(s.first < s.stop and s.blocks == sum(sizes[s.first : s.stop]) for s in shards)
    if len(shards) > 1 and min(sizes) > 0:  # as even as whole requests allow: no shard over its share + a request
        assert max(s.blocks for s in shards) <= sum(sizes) / len(shards) + max(sizes)


def test_cli_audit_ray_local_with_two_workers_is_the_one_process_audit(tmp_path, captures, one_process):
    """`harness audit --ray local --set ray.workers=2` (its own local Ray instance) against the plain audit."""
    env = {
        **os.environ,
        "HARNESS_PROGRESS_SECONDS": "3600",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    out = tmp_path / "ray"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "audit",
            str(captures["good"]),
            "--golden-model",
            "small",
            "--set",
            "numerics.threads=1",
            "--out",
            str(out),
            "--ray",
            "local",
            "--set",
            "ray.workers=2",
            "--set",
            "ray.shards=3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    one = one_process["good"]
    assert done.stdout.splitlines()[:-1] == one.lines[:-1]  # every line but where it wrote
    assert "audit on Ray: 3 shards, 2 workers: 3 shards, done" in done.stderr  # progress: shards done / total
    result = json.loads((out / "audit.json").read_text())
    assert result["verdict"] == "pass" and comparable(result) == comparable(one.result)
    for name in ("report.html", "report.md"):
        assert (out / name).read_text() == one.paths[name.replace("report.", "")].read_text()
    stamp = (f'timestamp="{result["created"]}"', f'timestamp="{one.result.created}"')
    assert (out / "junit.xml").read_text().replace(*stamp) == one.paths["junit"].read_text()
    facts = json.loads((out / "ray.json").read_text())
    assert facts["job"] == "audit" and facts["workers"] == 2
    assert [(s["shard"], s["blocks"]) for s in facts["shards"]] == [("1/3", 12), ("2/3", 12), ("3/3", 12)]
    assert all(len(s["attempts"]) == 1 for s in facts["shards"]) and len({s["pid"] for s in facts["shards"]}) == 2
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "audit.json",
        "junit.xml",
        "ray.json",
        "report.html",
        "report.md",
    ]  # the shards' outputs removed


@pytest.mark.parametrize("name", ["other-model", "nan"])
def test_the_negative_controls_still_fail_on_ray(tmp_path, cluster, captures, one_process, name):
    one = one_process[name]
    outcome = audit_on_ray(
        CFG, captures[name], tmp_path / name, RayOptions("local", workers=2, shards=2), progress=False
    )
    assert not outcome.passed and outcome.result.verdict == "fail"
    assert comparable(outcome.result) == comparable(one.result) and outcome.lines[:-1] == one.lines[:-1]
    if name == "other-model":
        assert outcome.lines[0].startswith("MODEL DIFFERS") and outcome.result.fingerprint_matches is False
    else:
        verdict = outcome.result.ops["0"].verdict
        assert verdict is not None
        check = next(c for c in verdict.checks if c.metric == "non_finite")
        assert check.ok is False and check.observed == 1


def test_a_broken_law_stops_the_audit_before_any_worker_starts(tmp_path, cluster, captures, one_process):
    outcome = audit_on_ray(
        CFG, captures["off-by-one"], tmp_path / "out", RayOptions("local", workers=2), progress=False
    )
    assert not outcome.passed and outcome.result.golden_model is None
    assert comparable(outcome.result) == comparable(one_process["off-by-one"].result)
    assert "ray" not in outcome.paths and not (tmp_path / "out" / "shards").exists()


def test_a_capture_cut_for_another_geometry_is_refused_before_any_worker_starts(tmp_path, cluster, captures):
    full = CFG.with_overrides(model=ModelSection(spec="full"))
    with pytest.raises(
        HarnessError,
        match=r"cut for another geometry than the golden model 'full' declares: "
        r"window_samples 16000 \(capture\) vs 160000",
    ):
        audit_on_ray(full, captures["good"], tmp_path / "out", RayOptions("local", workers=2), progress=False)
    assert not (tmp_path / "out" / "shards").exists() and not (tmp_path / "out" / "audit.json").exists()


def test_a_worker_killed_mid_shard_is_retried_and_the_audit_is_the_same(tmp_path, cluster, captures):
    held = CFG.with_overrides(model=ModelSection(spec="tests.ray_hold:small"))
    one = audit_capture(captures["good"], tmp_path / "one", held, lambda: make_backend(held))  # before arming
    killed: list[int] = []
    watcher = kill_the_held_worker(cluster, killed)
    outcome = audit_on_ray(
        held, captures["good"], tmp_path / "ray", RayOptions("local", workers=2, shards=3, retries=2), progress=False
    )
    watcher.join(timeout=5)
    assert len(killed) == 1, "no worker took the hold"
    assert outcome.passed and comparable(outcome.result) == comparable(one.result)
    facts = json.loads(outcome.paths["ray"].read_text())
    retried = [s for s in facts["shards"] if len(s["attempts"]) > 1]
    # started by the killed worker, finished by the one Ray restarted (attempt files sort by pid, which wraps)
    assert len(retried) == 1 and killed[0] in [a["pid"] for a in retried[0]["attempts"]]
    assert retried[0]["pid"] != killed[0]


def test_a_shard_whose_model_refuses_its_input_fails_the_audit_once_in_one_line(tmp_path, cluster, captures):
    refusing = CFG.with_overrides(model=ModelSection(spec="tests.ray_hold:refusing_small"))
    out = tmp_path / "out"
    with pytest.raises(HarnessError) as failure:
        audit_on_ray(
            refusing, captures["good"], out, RayOptions("local", workers=2, shards=3, retries=3), progress=False
        )
    message = str(failure.value)
    assert message.startswith("shard ") and "\n" not in message, message
    assert "exact lane k=1 OP 2 block" in message and "OP 2 request refused (the test's bad input)" in message
    assert all(len(list(d.glob("attempt-*.json"))) <= 1 for d in out.glob("shards/*/*-of-*"))  # never retried
    assert not (out / "audit.json").exists() and not (out / "ray.json").exists()


def test_shards_re_run_on_different_devices_or_missing_blocks_are_refused(tmp_path):
    """What a mixed cluster would give (shards re-run on two GPU kinds) is one audit re-run on two devices:
    refused, naming the difference, and so is one re-run on two software stacks (another torch); shards
    that do not hold every block of the capture are refused too."""
    model = GoldenModel(
        spec="full",
        fingerprint="f" * 64,
        name="diar_nn_g",
        device_kind="NVIDIA H100 80GB HBM3",
        numerics_in_force={"threads": 1},
    )
    env = {
        "torch": "2.13.0",
        "numpy": "2.4.6",
        "cuda": "12.8",
        "cudnn": 91000,
        "device_name": "NVIDIA H100 80GB HBM3",
        "cpu": "x86_64",
        "driver": "570.1",
    }
    block = np.zeros((8, 56, 7), np.float32)
    rerun = RayRerun(CFG, tmp_path, RayOptions("auto"), WorkerSpec(CFG), progress=False)
    rerun.files = [
        write_exact(tmp_path / "1.npz", ["r0/a"], [block], model, env),
        write_exact(
            tmp_path / "2.npz", ["r1/b"], [block], model.model_copy(update={"device_kind": "NVIDIA A100"}), env
        ),
    ]
    survey = dataclasses.replace(Survey(load_model("small").geometry), blocks=2)
    with pytest.raises(
        HarnessError,
        match=r"shard 2/2 re-ran its blocks with another device_kind than shard 1 "
        r"\(NVIDIA A100 vs NVIDIA H100 80GB HBM3\).*ray.accelerator",
    ):
        rerun.golden_model_of_shards(survey)
    rerun.files[1] = write_exact(tmp_path / "4.npz", ["r1/b"], [block], model, {**env, "torch": "2.12.0"})
    with pytest.raises(
        HarnessError,
        match=r"shard 2/2 re-ran its blocks with other software than shard 1: "
        r"environment torch differs \('2.12.0' vs '2.13.0'\)",
    ):
        rerun.golden_model_of_shards(survey)
    rerun.files[1] = write_exact(tmp_path / "3.npz", ["r1/b"], [block], model, env)
    assert rerun.golden_model_of_shards(survey) == model
    with pytest.raises(HarnessError, match=r"the shards re-ran 2 blocks, the capture holds 3"):
        rerun.golden_model_of_shards(dataclasses.replace(survey, blocks=3))
