"""One rule for every kind of evidence, and what a refusal is.

Every pair the harness compares (a lane against the golden, a slot against another, a block's two copies,
a repeat against the first run) is judged with the limits of the mode the user chose: a model whose
answers move by one ULP with the slot is promoted with warnings in tolerance mode and refused in bitwise and
noise-floor mode; a defect beyond the tolerances is refused in every mode (tests/test_arrangement_score.py has
the reference-model controls). A refused shape names one cause, the most fundamental that applies; the
summary shows the evidence that decided it; a failed check says the least limit that would have passed it.
Everything end to end here runs the null model's controls (table look-ups): seconds.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import LedgerError
from harness.base.figures import holds, passing_limit
from harness.data.schemas.config_file import EvidenceSection
from harness.data.schemas.refusals import (
    CAUSES,
    DEPENDS,
    GOLDEN,
    LAWS,
    LEAK,
    NON_FINITE,
    NOT_REPRODUCIBLE,
    NUMERICS,
    SIZE,
)
from harness.data.schemas.results import CheckModel, OpVerdictModel, RequestEvidence, Score, ShapeScore
from harness.data.schemas.verdicts import CheckDetails
from harness.data.tolerances import Tolerances
from harness.evidence.refusal import ScoreFacts, refusal_cause
from harness.ledger.score_check import check_self_consistent
from harness.pipeline.score import score_run
from reports.junit import summary_line
from tests.cli_run import harness_cli
from tests.pipeline import config_for, record, run_shapes

ULP = "lanes.controls.ulp_controls:small"
RANDOM = "lanes.controls.noisy_control:one_in_three"
MODES = ("tolerance", "bitwise", "noise-floor")
BLOCKS = 8
FAST_LAWS = "3"


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    """One golden per control (the exact lane: single-block calls, bitwise), recorded once for the module."""
    out = {}
    for spec in (ULP, RANDOM):
        tmp = tmp_path_factory.mktemp("golden")
        out[spec] = record(spec, tmp, BLOCKS, config=config_for(spec))[2].path
    return out


def _nightly(
    capsys, monkeypatch, golden: Path, out: Path, spec: str, mode: str, *extra: str
) -> tuple[int, list[str], dict, ET.Element]:
    code, stdout, stderr = harness_cli(
        capsys,
        monkeypatch,
        "nightly",
        "--golden",
        str(golden),
        "--out",
        str(out),
        "--model",
        spec,
        "--shapes",
        "4",
        "--arrangements",
        "3",
        "--tolerance",
        mode,
        "--set",
        f"packer.laws_examples={FAST_LAWS}",
        "--no-promote",
        "--no-progress",
        "--no-localise",
        *extra,
    )
    assert code in (0, 1), stderr
    score = json.loads((out / "score.json").read_text())
    return code, stdout.strip().splitlines(), score, ET.parse(out / "junit.xml").getroot()


def _suite_properties(junit: ET.Element) -> dict[str, str]:
    suite = next(junit.iter("testsuite"))
    props = suite.find("properties")
    assert props is not None
    return {p.get("name", ""): p.get("value", "") for p in props}


@pytest.mark.parametrize("mode", MODES)
def test_a_model_off_by_one_ulp_in_later_slots_and_copies_in_each_mode(goldens, tmp_path, capsys, monkeypatch, mode):
    """The honest-numerics class: promoted with a warning per (OP, kind) in tolerance mode, refused in bitwise and
    noise-floor mode (the golden is bitwise), its cause the slot; the neighbour evidence showed the backend answering
    alike twice, so the line does not suggest run-to-run noise."""
    code, lines, score, junit = _nightly(capsys, monkeypatch, goldens[ULP], tmp_path / "n", ULP, mode)
    shape = score["shapes"]["4"]
    if mode == "tolerance":
        assert code == 0 and lines[-1].startswith("PASS: 1 shape passed (k=4)"), lines
        warned = [line for line in lines if line.startswith("warning: ")]
        assert warned and lines.index(warned[-1]) == len(lines) - 2  # the warnings, then the summary last
        assert any(w.startswith("warning: k=4 OP 0 slots: ") for w in warned), warned
        assert any(w.startswith("warning: k=4 OP 0 duplicates: ") for w in warned), warned
        assert all("reported, not refused" in w and "max_ulp 1" in w for w in warned)
        kinds = {(w["op"], w["kind"]) for w in shape["warnings"]}
        assert (0, "slots") in kinds and (0, "duplicates") in kinds and "cause" not in shape
        props = _suite_properties(junit)
        assert props["evidence_warning_k4_op0_slots"].startswith("k=4 OP 0 slots: ")
        report = json.loads((tmp_path / "n" / "report" / "report.json").read_text())
        assert len(report["warnings"]) == len(shape["warnings"]) and report["warnings"][0]["shape"] == 4
        assert "## Evidence warnings" in (tmp_path / "n" / "report" / "report.md").read_text()
        return
    assert code == 1, lines
    assert lines[-1].startswith(
        "FAIL: shape k=4 refused (depends on slot / neighbours / duplicates): arrangement 1 "
        "(k4.a1) against arrangement 0 (k4): OP 0 differing_elements: "
    ), lines[-1]
    # the neighbour evidence answered every block alike in two requests: the backend repeats itself, so the line does
    # not suggest that a slot difference could be run-to-run noise
    assert "--repeats" not in lines[-1] and shape["neighbours"]["ops"]["0"]["outcome"] == "bitwise"
    assert shape["cause"]["kind"] == DEPENDS and shape["cause"]["evidence"].removeprefix("k=4 ") in lines[-1]
    cases = {(c.get("classname"), c.get("name")): c for c in junit.iter("testcase")}
    failure = cases["shape_k4", "op0"].find("failure")
    assert failure is not None and failure.get("message", "").startswith(f"{DEPENDS}: OP 0 differing_elements")
    props = {p.get("name"): p.get("value") for p in cases["shape_k4", "op1"].iter("property")}
    assert props["cause"] == DEPENDS and props["failed_row_rate_upper95_would_pass_at"]  # the least passing limit
    md = (tmp_path / "n" / "report" / "report.md").read_text()
    assert f"refused ({DEPENDS})" in md and "(would pass at " in md


def test_fail_on_warning_fails_a_nightly_whose_verdicts_held(goldens, tmp_path, capsys, monkeypatch):
    code, lines, _, _ = _nightly(
        capsys, monkeypatch, goldens[ULP], tmp_path / "n", ULP, "tolerance", "--set", "history.fail_on_warning=true"
    )
    assert code == 1 and lines[-1].startswith("FAIL: the verdicts held (1 shape passed (k=4)"), lines
    assert (
        lines[-1].endswith(
            "warnings failed the nightly (history.fail_on_warning = true); "
            "not promoted (--no-promote): the ledger was not changed"
        )
        or "warnings failed the nightly (history.fail_on_warning = true)" in lines[-1]
    ), lines[-1]


@pytest.mark.parametrize("mode", MODES)
def test_a_lane_that_moves_at_random_is_not_reproducible_not_slot_dependent(
    goldens, tmp_path, capsys, monkeypatch, mode
):
    """+1e-6 on one packed call in three: within the tolerances (warnings); beyond bitwise, where its slots and
    copies differ too, but the repeats show the lane differs from itself: that is the cause."""
    code, lines, score, _ = _nightly(
        capsys, monkeypatch, goldens[RANDOM], tmp_path / "n", RANDOM, mode, "--repeats", "4"
    )
    shape = score["shapes"]["4"]
    if mode == "tolerance":
        assert code == 0 and lines[-1].startswith("PASS"), lines
        assert any(w["kind"] == "repeats" for w in shape["warnings"])
        return
    assert code == 1 and shape["cause"]["kind"] == NOT_REPRODUCIBLE, shape.get("cause")
    assert lines[-1].startswith(f"FAIL: shape k=4 refused ({NOT_REPRODUCIBLE}): run "), lines[-1]
    assert "slot" not in lines[-1].split(";")[0]


def test_without_repeats_the_neighbour_controls_show_the_lane_differs_from_itself(
    goldens, tmp_path, capsys, monkeypatch
):
    """No --repeats: the neighbour lane's moved answers are sent again as before, and they are not answered alike:
    the cause is the lane's own noise, never a leak (and not a slot either)."""
    code, lines, score, _ = _nightly(capsys, monkeypatch, goldens[RANDOM], tmp_path / "n", RANDOM, "bitwise")
    cause = score["shapes"]["4"]["cause"]
    assert code == 1 and cause["kind"] == NOT_REPRODUCIBLE, cause
    assert "the same request sent again" in cause["evidence"] and LEAK not in lines[-1]


# ---------------------------------------------------------------------------------------------
# the cause: a law of precedence, re-derived by promotion


@pytest.fixture(scope="module")
def evidence_score(tmp_path_factory) -> Score:
    """A null-model score with every kind of evidence (3 arrangements, 2 repeats), every check passing."""
    tmp = tmp_path_factory.mktemp("rich")
    cfg = config_for("lanes.models.null_model:small", evidence=EvidenceSection(arrangements=3, repeats=2))
    backend, _, golden = record("lanes.models.null_model:small", tmp, BLOCKS, config=cfg)
    score = score_run(golden, run_shapes(backend, golden, tmp, (4,), cfg), Tolerances().with_mode("bitwise"))
    assert score.shapes["4"].verdict == "pass"
    return score


def _failing(v: OpVerdictModel, check: CheckModel) -> OpVerdictModel:
    return v.model_copy(update={"checks": [*v.checks, check], "passed": False, "reasons": [*v.reasons, check.line()]})


REAL = CheckModel.gate(
    0, "max_abs", 0.5, "<=", 1e-4, CheckDetails(unit="windows", offending=3, total=64, limit="max_abs")
)
NAN = CheckModel.gate(0, "non_finite", 3, "==", 0, CheckDetails(unit="elements", offending=3, total=64))
LEAKED = CheckModel.gate(0, "neighbour_moved_windows", 5, "==", 0, CheckDetails(unit="windows", offending=5, total=64))
THIN = CheckModel.gate(
    0,
    "flip_rate_upper95",
    0.01,
    "<=",
    1e-3,
    CheckDetails(unit="audio frames", offending=0, total=300, limit="max_flip_rate"),
)
INJECTIONS = (
    "laws",
    "golden",
    "leak",
    "nan_plain",
    "nan_dup",
    "repeat",
    "load",
    "slots",
    "dup",
    "arranged",
    "plain",
    "requests",
    "thin",
)


def _inject(score: Score, chosen: set[str]) -> tuple[ShapeScore, ScoreFacts]:
    shape = score.shapes["4"]
    ev, rep, nb = shape.arrangements, shape.repeats, shape.neighbours
    assert ev is not None and rep is not None and ev.duplicates is not None and nb is not None
    if "leak" in chosen:  # a block's answer moved with its neighbours' audio, on a backend that repeats itself
        moved = nb.ops["0"].verdict
        nb = nb.model_copy(
            update={"ops": {**nb.ops, "0": nb.ops["0"].model_copy(update={"verdict": _failing(moved, LEAKED)})}}
        )
    ops = dict(shape.ops)
    if "plain" in chosen:
        ops["0"] = _failing(ops["0"], REAL)
    if "nan_plain" in chosen:
        ops["1"] = _failing(ops["1"], NAN)
    if "thin" in chosen:
        ops["0"] = _failing(ops["0"], THIN)
    lanes = dict(ev.lanes)
    a1 = lanes["k4.a1"]
    if "slots" in chosen:
        a1 = a1.model_copy(update={"same_as_plain": {"0": _failing(a1.same_as_plain["0"], REAL)}, "passed": False})
    if "arranged" in chosen:
        a1 = a1.model_copy(update={"ops": {**a1.ops, "0": _failing(a1.ops["0"], REAL)}, "passed": False})
    lanes["k4.a1"] = a1
    dup = dict(ev.duplicates)
    if "dup" in chosen:
        dup["0"] = _failing(dup["0"], REAL)
    if "nan_dup" in chosen:
        dup["2"] = _failing(dup["2"], NAN)
    rops = dict(rep.ops)
    if "repeat" in chosen:
        rops["0"] = rops["0"].model_copy(update={"pairs": [_failing(rops["0"].pairs[0], REAL)]})
    requests = shape.requests
    if "requests" in chosen:
        requests = RequestEvidence(full=0, full_blocks=0, partial=2, partial_blocks=BLOCKS, needed_blocks=4)
    failed = bool(chosen)
    shape = shape.model_copy(
        update={
            "ops": ops,
            "requests": requests,
            "verdict": "fail" if failed else "pass",
            "reasons": [f"reason {c}" for c in sorted(chosen)],
            "arrangements": ev.model_copy(update={"lanes": lanes, "duplicates": dup}),
            "repeats": rep.model_copy(update={"ops": rops}),
            "neighbours": nb,
        }
    )
    laws = score.laws.model_dump()
    if "laws" in chosen:
        laws = {**laws, "verdict": "broken", "broken": ["offsets_rebased"]}
    verification = score.verification
    if "golden" in chosen:
        verification = verification.model_copy(update={"passed": False, "summary": "golden x: NOT reproduced"})
    load = (
        {"4": [(NOT_REPRODUCIBLE, "k=4 is not accurate under load (concurrency 4 of the sweep [1, 4]): ...")]}
        if "load" in chosen
        else {}
    )
    return shape, ScoreFacts(laws, verification, load)


def _expected(chosen: set[str]) -> str | None:
    """The law: the first cause of the closed list that applies."""
    if not chosen:
        return None
    applies = {
        LAWS: "laws" in chosen,
        GOLDEN: "golden" in chosen,
        LEAK: "leak" in chosen,
        NON_FINITE: bool({"nan_plain", "nan_dup"} & chosen),
        NOT_REPRODUCIBLE: bool({"repeat", "load"} & chosen),
        DEPENDS: bool({"slots", "dup"} & chosen) or ("arranged" in chosen and "plain" not in chosen),
        NUMERICS: bool({"plain", "arranged"} & chosen),
        SIZE: bool({"requests", "thin"} & chosen),
    }
    if not applies[LAWS] and not applies[GOLDEN] and "requests" in chosen:
        return SIZE  # not one request of k blocks: whatever its partial packs showed was not this batch shape
    return next(cause for cause in CAUSES if applies[cause])


@settings(max_examples=150, deadline=None)
@given(chosen=st.sets(st.sampled_from(INJECTIONS)))
def test_the_cause_is_the_first_of_the_closed_list_that_applies(evidence_score, chosen):
    shape, facts = _inject(evidence_score, chosen)
    cause = refusal_cause(4, shape, facts)
    assert (cause.kind if cause is not None else None) == _expected(chosen), sorted(chosen)
    if cause is None:
        return
    # the summary line shows the cause, then the evidence that decided it: never behind "+N more"
    line = summary_line(
        evidence_score.model_copy(
            update={"shapes": {"4": shape.model_copy(update={"cause": cause})}, "verification": facts.verification}
        ),
        facts.verification,
    )
    assert f"refused ({cause.kind}): " in line or not facts.verification.passed
    if facts.verification.passed:
        evidence = cause.evidence.removeprefix("k=4 ").removeprefix(f"{cause.kind}: ")
        assert evidence[:60] in line


def test_promotion_re_derives_the_cause_and_the_warnings(goldens, tmp_path):
    cfg = config_for(ULP, evidence=EvidenceSection(arrangements=3))
    backend, _, golden = record(ULP, tmp_path, BLOCKS, config=cfg)
    run = run_shapes(backend, golden, tmp_path, (4,), cfg)
    warned = score_run(golden, run, Tolerances())
    refused = score_run(golden, run, Tolerances().with_mode("bitwise"))
    check_self_consistent(warned, "score")
    check_self_consistent(refused, "score")
    shape = warned.shapes["4"]
    silenced = warned.model_copy(update={"shapes": {"4": shape.model_copy(update={"warnings": shape.warnings[1:]})}})
    with pytest.raises(LedgerError, match="shape k=4: its warnings .* are not the ones its own evidence gives"):
        check_self_consistent(silenced, "score")
    bad = refused.shapes["4"]
    assert bad.cause is not None
    blamed = bad.model_copy(update={"cause": bad.cause.model_copy(update={"kind": NUMERICS})})
    with pytest.raises(LedgerError, match="shape k=4: cause 'numerics at this batch shape .* \\(.depends on slot"):
        check_self_consistent(refused.model_copy(update={"shapes": {"4": blamed}}), "score")


# ---------------------------------------------------------------------------------------------
# "would pass at": the least limit that passes a failed check


finite = st.floats(min_value=1e-30, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(observed=finite, allowed=finite)
def test_would_pass_at_is_a_limit_that_passes_and_no_looser_than_its_digits(observed, allowed):
    for relation in ("<=", ">="):
        if holds(observed, relation, allowed):
            continue
        text = passing_limit(observed, relation)
        assert text is not None and holds(observed, relation, float(text)), (observed, relation, text)
        digits = 9 if 0.99 <= observed < 1 else 3
        step = 10.0 ** (math.floor(math.log10(float(text))) - (digits - 1)) if float(text) else 0.0
        tighter = float(text) - step if relation == "<=" else float(text) + step
        assert not holds(observed, relation, tighter) or tighter == float(text), (observed, relation, text, tighter)
        check = CheckModel.gate(0, "max_abs", observed, relation, allowed, CheckDetails(limit="max_abs"))
        assert check.would_pass_at == text and f"allowed (would pass at {text})" in check.line()


def test_would_pass_at_reads_as_the_issue_asks_and_not_where_no_limit_passes():
    c = CheckModel.gate(0, "max_abs", 2.1e-4, "<=", 1e-4, CheckDetails(limit="max_abs"))
    assert c.line() == "OP 0 max_abs: 0.00021 > 0.0001 allowed (would pass at 0.00021)"
    cosine = CheckModel.gate(1, "min_cosine", 0.9999876543, ">=", 0.99999, CheckDetails(limit="min_cosine"))
    assert cosine.would_pass_at == "0.999987654"
    nan = CheckModel.gate(0, "max_abs", float("nan"), "<=", 1e-4, CheckDetails(limit="max_abs"))
    assert nan.would_pass_at is None and "(no limit passes a non-finite value)" in nan.line()
    fixed = CheckModel.gate(0, "differing_elements", 12, "==", 0)
    assert fixed.would_pass_at is None and "would pass" not in fixed.line()
    assert CheckModel.gate(0, "max_abs", 1e-5, "<=", 1e-4).would_pass_at is None  # it passed


# ---------------------------------------------------------------------------------------------
# the golden says what it recorded to judge, and refuses an OP that can never be judged


def test_golden_record_refuses_an_op_without_voiceprint_rows_and_says_what_it_recorded(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = harness_cli(capsys, monkeypatch, "corpus", "synth", "c.parquet", "--model", "small", "--blocks", "4")
    assert code == 0, err
    code, out, err = harness_cli(
        capsys,
        monkeypatch,
        "golden",
        "record",
        "--model",
        "lanes.controls.silent_control:small",
        "--corpus",
        "c.parquet",
        "--no-progress",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "OP 1 recorded 0 voiceprint rows" in err and "[masks] min_active_fraction = 0.02" in err
    assert not (tmp_path / "goldens").exists() or not any((tmp_path / "goldens").iterdir())  # nothing left
    # the negative control: a segmentation that marks speakers records, saying how much per OP
    code, out, err = harness_cli(
        capsys,
        monkeypatch,
        "golden",
        "record",
        "--model",
        "lanes.models.null_model:small",
        "--corpus",
        "c.parquet",
        "--no-progress",
    )
    assert code == 0, err
    recorded = next(line for line in out.splitlines() if line.startswith("recorded per OP: "))
    assert "OP 0: 28 windows holding audio; OP 1: " in recorded and " voiceprint rows; OP 2: " in recorded
    assert any(line.startswith("warning: OP 1: ") and "fewer than the 60" in line for line in out.splitlines())
    golden = next(p for p in (tmp_path / "goldens").iterdir())
    code, out, err = harness_cli(capsys, monkeypatch, "golden", "show", str(golden))
    assert code == 0 and "  recorded to judge: OP 0: 28 windows holding audio; OP 1: " in out, err
