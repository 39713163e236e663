"""``--repeats N``: a packed lane's own noise, measured like the release's floor, refused or flagged by mode.

The negative control is ``lanes.controls.noisy_control:small`` (the null model, batch-invariant, whose packed
answers carry fresh seeded noise from the third time a request is seen): one run per shape (the old
evidence) promotes it even in bitwise mode; three runs refuse it in bitwise and noise-floor mode (cause
"not reproducible") and flag it in tolerance mode, where its 1e-6 noise is within the limits. The null
model itself is deterministic: as reproducible as the release. Everything here runs the null model
(table look-ups) on 12 blocks: seconds.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from harness.base.errors import LedgerError
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import ALL_OPS
from harness.data.outputs import LaneOutputs
from harness.data.schemas.config_file import EvidenceSection
from harness.data.schemas.files import RunEvidence
from harness.data.tolerances import Tolerances
from harness.evidence.repeat_evidence import RepeatScorer, repeat_lanes
from harness.ledger.score_check import check_self_consistent
from harness.pipeline.score import score_run
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model
from lanes.running.run_plan import RunPlan
from lanes.running.runner import run_lanes
from lanes.running.variants import FastVariant, consecutive
from reports.junit import write_junit
from reports.signoff import write_report
from tests.pipeline import config_for, record, run_shapes

NOISY = "lanes.controls.noisy_control:small"
NULL = "lanes.models.null_model:small"
BITWISE_FLOORS = {
    0: {"bitwise": True, "max_abs": 0.0, "max_ulp": 0, "argmax_flips": 0},
    **{op: {"bitwise": True, "max_abs": 0.0, "max_ulp": 0, "min_cosine": 1.0, "max_rel_l2": 0.0} for op in (1, 2)},
}


def _config(repeats: int):
    return config_for(
        NULL,
        evidence=EvidenceSection(arrangements=1, repeats=repeats, neighbours=False, canaries=False),
        candidates=(4,),
    )


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """The control's golden (bitwise: single-block calls are never touched), a run with --repeats 3 and one with
    --repeats 1 (the old evidence); the model keeps what it has seen, so each run gets its own model."""
    tmp = tmp_path_factory.mktemp("noisy")
    backend, _, golden = record(NOISY, tmp, blocks=12, config=_config(1))
    runs = {}
    for repeats in (3, 1):
        fresh = InProcessBackend(load_model(NOISY), NumericSettings())
        runs[repeats] = run_shapes(fresh, golden, tmp / f"r{repeats}", (4,), _config(repeats))
    return golden, runs


def _lanes_of(model_spec: str, blocks: int = 8, repeats: int = 3) -> dict[str, LaneOutputs]:
    model = load_model(model_spec)
    from harness.corpus.synth import synth_corpus

    plan = RunPlan(
        shapes=(4,), variants=tuple(FastVariant(4, (f"k4.r{j}",), consecutive) for j in range(2, repeats + 1))
    )
    got: dict[str, list[LaneOutputs]] = {}
    run_lanes(
        list(synth_corpus(model.geometry, blocks).blocks),
        InProcessBackend(model, NumericSettings()),
        plan,
        lambda lane, out: got.setdefault(lane, []).append(out),
    )
    return {lane: LaneOutputs.concat(parts) for lane, parts in got.items()}


def _scorer(geometry, mode: str, repeats: int = 3) -> RepeatScorer:
    lanes = ["k4", *(f"k4.r{j}" for j in range(2, repeats + 1))]
    return RepeatScorer(4, lanes, list(ALL_OPS), geometry, "isolated", Tolerances().with_mode(mode), BITWISE_FLOORS)


def test_one_flipped_bit_between_repeats_is_counted_and_named():
    """The measure itself: one ULP in one window of one block, one voiceprint row lost, against a lane that is
    otherwise bit-identical to itself."""
    lanes = _lanes_of(NULL, repeats=2)
    again = lanes["k4.r2"]
    assert again.segmentation.logprobs.tobytes() == lanes["k4"].segmentation.logprobs.tobytes()  # deterministic
    seg = again.segmentation.logprobs.copy()
    seg[5, 3, 0, 0] = np.nextafter(seg[5, 3, 0, 0], np.float32(0))
    vp = again.voiceprint[ALL_OPS[1]]
    keep = np.ones(vp.rows, dtype=bool)
    keep[0] = False
    from dataclasses import replace

    changed = replace(
        again,
        segmentation=replace(again.segmentation, logprobs=seg),
        voiceprint={
            **again.voiceprint,
            ALL_OPS[1]: replace(
                vp,
                block_ids=vp.block_ids[keep],
                row=vp.row[keep],
                window=vp.window[keep],
                speaker=vp.speaker[keep],
                weights=vp.weights[keep],
                embedding=vp.embedding[keep],
            ),
        },
    )
    scorer = _scorer(load_model(NULL).geometry, "tolerance", 2)
    scorer.add(lanes["k4"], [changed])
    ev = scorer.evidence()
    op0, op1, op2 = ev.ops["0"], ev.ops["1"], ev.ops["2"]
    ids = lanes["k4"].segmentation.block_ids
    assert (op0.blocks, op0.blocks_differing, op0.units_differing, op0.first_differing_block) == (8, 1, 1, ids[5])
    assert op0.noise.max_ulp == 1 and not op0.noise.bitwise and not op0.as_reproducible_as_release
    assert (op1.blocks_differing, op1.units_differing, op1.first_differing_block) == (1, 1, str(vp.block_ids[0]))
    assert op2.noise.bitwise and op2.blocks_differing == 0 and op2.as_reproducible_as_release
    # tolerance mode: the ULP is within its limits (flagged); a row on one side only is beyond them in every mode
    assert not ev.reproducible and len(ev.warnings) == 1 and ev.warnings[0].startswith("k=4 OP 0 repeats: ")
    reasons = scorer.reasons(ev)
    assert len(reasons) == 1 and reasons[0].startswith("k=4 is not reproducible (tolerance mode): OP 1 missing_rows")


def test_a_deterministic_lane_is_as_reproducible_as_the_release():
    lanes = _lanes_of(NULL)
    scorer = _scorer(load_model(NULL).geometry, "noise-floor")
    scorer.add(lanes["k4"], [lanes["k4.r2"], lanes["k4.r3"]])
    ev = scorer.evidence()
    assert ev.reproducible and ev.warnings == [] and scorer.reasons(ev) == []
    for o in ev.ops.values():
        assert o.as_reproducible_as_release and o.noise.bitwise and o.blocks_differing == 0
        assert len(o.pairs) == 2 and all(p.passed for p in o.pairs)


def test_the_run_manifest_names_the_repeat_lanes():
    evidence = RunEvidence.model_validate(
        {
            "arrangements": 2,
            "repeats": 3,
            "seed": 0,
            "variants": {
                "k4.r3": {"k": 4, "kind": "repeat", "index": 3},
                "k4.a1": {"k": 4, "kind": "arrangement", "index": 1},
                "k4.r2": {"k": 4, "kind": "repeat", "index": 2},
            },
        }
    )
    assert repeat_lanes(evidence) == {4: ["k4.r2", "k4.r3"]}
    assert repeat_lanes(None) == {}  # a run before evidence.repeats


def test_the_old_evidence_promotes_a_lane_that_is_not_reproducible(noisy):
    golden, runs = noisy
    score = score_run(golden, runs[1], Tolerances().with_mode("bitwise"))
    shape = score.shapes["4"]
    assert shape.verdict == "pass" and shape.repeats is None
    assert "repeats" not in score.model_dump(mode="json")["shapes"]["4"]  # a score without repeats: as before


@pytest.mark.parametrize("mode", ["noise-floor", "bitwise"])
def test_repeats_refuse_a_lane_that_is_not_reproducible(noisy, mode, tmp_path):
    golden, runs = noisy
    score = score_run(golden, runs[3], Tolerances().with_mode(mode))
    shape = score.shapes["4"]
    assert shape.verdict == "fail" and shape.repeats is not None and shape.repeats.repeats == 3
    assert all(v.passed for v in shape.ops.values())  # against the golden it holds: only the repeats refuse
    line = next(r for r in shape.reasons if r.startswith("k=4 is not reproducible"))
    assert f"({mode} mode): OP 0 differing_elements:" in line and "!= 0 allowed" in line
    assert "(k4.r" in line and "against the first (k4)" in line and "of 12 blocks" in line and "first block '" in line
    assert "--tolerance tolerance" in line  # what to do next
    for o in shape.repeats.ops.values():
        assert o.gated and not o.as_reproducible_as_release and o.blocks_differing > 0 and len(o.pairs) == 2
    assert shape.cause is not None and shape.cause.kind == "not reproducible"
    # the first repeat that differs: on a CPU the packed shapes are not warmed up, so the plain lane is the
    # request's first sight, k4.r2 its second (still exact) and k4.r3 the first with noise
    assert re.match(
        r"k=4 run [23] of 3 \(k4\.r[23]\) against the first \(k4\): OP 0 differing_elements", shape.cause.evidence
    ), shape.cause.evidence
    check_self_consistent(score, "score")  # promotion re-derives the refusal (and its cause) from the repeat checks
    junit = ET.parse(write_junit(tmp_path / "junit.xml", score, None)).getroot()
    case = next(c for c in junit.iter("testcase") if c.get("name") == "evidence")  # no OP failed: the shape's case
    failure = case.find("failure")
    assert case.get("classname") == "shape_k4" and failure.get("type") == "not reproducible"
    assert failure.get("message") == shape.cause.line(4) and shape.reasons[0] in failure.text


def test_repeats_flag_a_lane_in_tolerance_mode_without_refusing_it(noisy):
    golden, runs = noisy
    score = score_run(golden, runs[3], Tolerances())
    shape = score.shapes["4"]
    assert shape.verdict == "pass" and shape.repeats is not None
    assert not any("reproducible" in r for r in shape.reasons)
    assert len(shape.repeats.warnings) == 3 and shape.repeats.warnings[0].startswith("k=4 OP 0 repeats: ")
    assert "beyond the release's own floor (bitwise): max_abs " in shape.repeats.warnings[0]
    assert "within the limits of tolerance mode" in shape.repeats.warnings[0]
    assert [w.line for w in shape.warnings if w.kind == "repeats"] == shape.repeats.warnings  # the summary's lines
    # judged in tolerance mode too (every mode gates the repeats): its noise holds the limits
    assert all(o.gated and len(o.pairs) == 2 and all(p.passed for p in o.pairs) for o in shape.repeats.ops.values())
    check_self_consistent(score, "score")


def test_promotion_refuses_a_score_whose_repeats_disagree_with_themselves(noisy):
    """A refused shape edited to 'pass' (reasons gone) is caught: its repeat checks still fail."""
    golden, runs = noisy
    score = score_run(golden, runs[3], Tolerances().with_mode("noise-floor"))
    shape = score.shapes["4"]
    forged = score.model_copy(
        update={"verdict": "pass", "shapes": {"4": shape.model_copy(update={"verdict": "pass", "reasons": []})}}
    )
    with pytest.raises(LedgerError, match="shape k=4: verdict 'pass' disagrees"):
        check_self_consistent(forged, "score")
    pairs = shape.repeats.ops["0"].pairs
    at = next(i for i, p in enumerate(pairs) if not p.passed)  # the first repeat that differs
    pair = pairs[at]
    check = next(c for c in pair.checks if c.ok is False)
    lenient = [c.model_copy(update={"ok": True}) if c is check else c for c in pair.checks]
    edited = shape.repeats.ops["0"].model_copy(
        update={"pairs": [*pairs[:at], pair.model_copy(update={"checks": lenient}), *pairs[at + 1 :]]}
    )
    repeats = shape.repeats.model_copy(update={"ops": {**shape.repeats.ops, "0": edited}})
    forged = score.model_copy(update={"shapes": {"4": shape.model_copy(update={"repeats": repeats})}})
    with pytest.raises(LedgerError, match=r"repeats OP 0: k4\.r[23] check differing_elements .* does not follow"):
        check_self_consistent(forged, "score")


def test_the_report_shows_each_shape_s_noise_beside_the_release_floor(noisy, tmp_path):
    golden, runs = noisy
    paths = write_report(tmp_path / "with", score_run(golden, runs[3], Tolerances()))
    facts = json.loads(paths["json"].read_text())
    rows = facts["repeats"]["rows"]
    assert [(r["shape"], r["op"], r["repeats"]) for r in rows] == [(4, 0, 3), (4, 1, 3), (4, 2, 3)]
    assert rows[0]["release_floor_text"] == "bitwise" and rows[0]["as_reproducible_as_release"] is False
    assert rows[0]["sentence"] == (
        "k=4 OP 0 is NOT as reproducible as the release: within the limits of tolerance mode: flagged, not refused"
    )
    md = paths["md"].read_text()
    assert "## Repeats: each shape's own noise" in md and "| 4 | 0 | 3 | tolerance |" in md
    assert 'id="repeat-noise"' in paths["html"].read_text()
    plain = json.loads(write_report(tmp_path / "without", score_run(golden, runs[1], Tolerances()))["json"].read_text())
    assert "repeats" not in plain  # no section without repeats: the report is the file it was


def test_a_deterministic_model_run_three_times_is_promoted_with_its_noise_recorded(tmp_path):
    backend, _, golden = record(NULL, tmp_path, blocks=12, config=_config(3))
    run = run_shapes(backend, golden, tmp_path, (4,), _config(3))
    score = score_run(golden, run, Tolerances().with_mode("bitwise"))
    shape = score.shapes["4"]
    assert shape.verdict == "pass" and shape.repeats is not None and shape.repeats.reproducible
    assert shape.repeats.lanes == ["k4", "k4.r2", "k4.r3"] and shape.repeats.warnings == []
    assert all(o.as_reproducible_as_release and o.blocks == 12 for o in shape.repeats.ops.values())
    check_self_consistent(score, "score")
