"""The score is one frozen typed model: score_run returns it, the file is its dump, reading
the file gives it back, and the file stays byte-for-byte what the dict-built score wrote.

Byte identity: the score's parts copied from the golden's and the run's manifests (reproducibility,
numerics, model, ...) must come out of the model exactly as they went in; a model that filled in its
defaults (a noise floor's OP 0 has no ``min_cosine``; a shape not measured against the exact lane has
no ``vs_exact``) would add ``null`` keys, change the bytes and break the digest sealed over them.
"""

from __future__ import annotations

import json
import shutil

import pytest
from pydantic import ValidationError

from golden.runs import load_run
from harness.base.jsonio import canonical, digest, seal_ok
from harness.data.schemas.base import Strict
from harness.data.schemas.files import Floor
from harness.data.schemas.results import CheckModel, OpVerdictModel, RequestEvidence, Score, ShapeScore
from harness.ledger.score_check import check_self_consistent, read_score
from harness.pipeline.score import write_score
from tests.pipeline import pipeline
from tests.tamper import edit_manifest


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("score-model")
    p = pipeline("small", tmp, shapes=(2,), blocks=6)
    path = write_score(tmp / "score.json", p.score)
    return p, path


def test_the_run_manifest_in_memory_is_the_json_on_disk(scored, tmp_path):
    """A run's manifest is a model in memory that dumps to the very JSON it was read from; its optional keys
    (``evidence``, ``lanes_wall_s``) stay absent where the file has none."""
    p, _ = scored
    on_disk = json.loads((p.run.path / "manifest.json").read_text())
    assert canonical(load_run(p.run.path).manifest.model_dump(mode="json")) == canonical(on_disk)
    copy = tmp_path / "run"
    shutil.copytree(p.run.path, copy)
    without = edit_manifest(copy, lambda m: m.pop("lanes_wall_s"), reseal=True)
    dumped = load_run(copy).manifest.model_dump(mode="json")
    assert "lanes_wall_s" not in dumped and "evidence" not in dumped, "an absent optional key came back as null"
    assert canonical(dumped) == canonical(without)


def test_score_run_returns_a_frozen_score_whose_file_is_its_dump(scored):
    p, path = scored
    score = p.score
    assert isinstance(score, Score)
    with pytest.raises(ValidationError):
        score.verdict = "pass"  # frozen: a judged score cannot be changed in memory
    on_disk = json.loads(path.read_text())
    assert on_disk == score.model_dump(mode="json")
    assert path.read_text() == json.dumps(on_disk, indent=1, sort_keys=True) + "\n"  # the harness's one encoder
    assert seal_ok(on_disk, "digest") and score.digest == digest({k: v for k, v in on_disk.items() if k != "digest"})
    again = read_score(path)
    assert again == score and again.model_dump(mode="json") == on_disk  # read back: the same model, the same JSON
    check_self_consistent(again, str(path))


def test_the_parts_copied_from_the_manifests_are_written_as_they_were_read(scored):
    """The dict-built score copied these from the manifests verbatim: the model must not add keys."""
    p, path = scored
    on_disk = json.loads(path.read_text())
    golden, run = p.golden.manifest.model_dump(mode="json"), p.run.manifest.model_dump(mode="json")  # as on disk
    assert on_disk["reproducibility"] == golden["reproducibility"]
    assert "min_cosine" not in on_disk["reproducibility"]["ops"]["0"]  # OP 0's floor has no cosine
    assert on_disk["model"] == golden["model"] and on_disk["corpus"] == golden["corpus"]
    for key in ("numerics", "environment", "packer", "laws", "pad_to_fixed", "numerics_profile", "mode"):
        assert on_disk[key] == run[key], key
    assert on_disk["tolerances"] == p.config.tolerances.model_dump()
    shape = on_disk["shapes"]["2"]
    assert shape["vs_exact"]["ops"].keys() == shape["ops"].keys()  # measured: written
    assert set(shape["requests"]) == {"full", "full_blocks", "partial", "partial_blocks", "needed_blocks"}


def test_optional_keys_stay_out_of_the_dump_unless_given_and_a_plain_model_would_add_them():
    floor = {"bitwise": True, "max_abs": 0.0, "max_ulp": 0, "argmax_flips": 0}
    assert Floor.model_validate(floor).model_dump() == floor

    class FloorWithDefaults(Strict):  # negative control: the same fields, without OptionalKeys
        bitwise: bool
        max_abs: float
        max_ulp: int
        min_cosine: float | None = None
        max_rel_l2: float | None = None
        argmax_flips: int | None = None

    assert FloorWithDefaults.model_validate(floor).model_dump() != floor  # nulls added: other bytes, a broken digest


def test_a_document_is_read_by_attribute_only_and_absent_keys_stay_absent(scored):
    """A score is a model, not a dict: no string-key reads (they would be a second, unchecked way in),
    and a key a file holds only when given stays out of the dump when it was not."""
    shape = scored[0].score.shapes["2"]
    with pytest.raises(TypeError):
        shape["verdict"]  # type: ignore[index]
    assert not hasattr(shape, "get")
    bare = ShapeScore(
        shape=2,
        verdict="pass",
        reasons=[],
        ops={"0": shape.ops["0"]},
        requests=RequestEvidence(full=1, full_blocks=2, partial=0, partial_blocks=0, needed_blocks=2),
    )
    assert bare.vs_exact is None and "vs_exact" not in bare.model_dump() and "vs_exact" in shape.model_dump()
    assert "min_cosine" not in Floor.model_validate({"bitwise": True, "max_abs": 0.0, "max_ulp": 0}).model_dump()


def test_check_and_op_verdict_are_declared_once():
    from harness.judging.judges import Check as JudgesCheck
    from harness.judging.judges.judge_base import Check, CheckDetails, OpVerdict

    assert Check is CheckModel and JudgesCheck is CheckModel and OpVerdict is OpVerdictModel
    c = Check.gate(
        0, "max_abs", 0.5, "<=", 1e-4, CheckDetails(unit="windows", offending=3, total=4096, limit="max_abs")
    )
    v = OpVerdict.of(0, 4, [c], {"bitwise": False}, {"max_abs": 1e-4})
    assert not v.passed and v.reasons == [c.line()] and c.failed
    assert c.line().startswith("OP 0 max_abs: 0.5 > 0.0001 allowed (would pass at 0.5), 3 of 4,096 windows")
    assert OpVerdictModel.model_validate(v.model_dump(mode="json")) == v
