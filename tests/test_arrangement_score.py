"""``--arrangements N`` end to end on the small model: a slot-dependent model that one arrangement passes is
refused in bitwise and noise-floor mode, naming the slot, and promoted with a warning in tolerance mode; a
duplicate-dependent one likewise, naming the duplicates; the reference passes."""

from __future__ import annotations

import pytest

from harness.base.errors import LedgerError
from harness.data.schemas.config_file import EvidenceSection
from harness.data.schemas.results import Score
from harness.data.tolerances import Tolerances
from harness.ledger.score_check import check_self_consistent
from harness.pipeline.score import score_run
from tests.pipeline import config_for, record, run_shapes

SHAPES = (4,)
BLOCKS = 8


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    """``judge(spec, N, mode)``: the score of a run with N arrangements in tolerance ``mode`` (default bitwise); one
    golden per model and one run per (model, N): the modes score the same run (the tests share them)."""
    goldens: dict[str, tuple] = {}
    runs: dict[tuple[str, int], object] = {}
    scores: dict[tuple[str, int, str], Score] = {}

    def judged(spec: str, arrangements: int, mode: str = "bitwise") -> Score:
        if (spec, arrangements, mode) not in scores:
            if (spec, arrangements) not in runs:
                tmp = tmp_path_factory.mktemp("arrangements")
                evidence = EvidenceSection(arrangements=arrangements, neighbours=False, canaries=False)
                cfg = config_for(spec, evidence=evidence)
                if spec not in goldens:
                    goldens[spec] = record(spec, tmp, BLOCKS, config=cfg)
                backend, _, golden = goldens[spec]
                runs[spec, arrangements] = run_shapes(backend, golden, tmp, SHAPES, cfg)
            golden = goldens[spec][2]
            score = score_run(golden, runs[spec, arrangements], Tolerances().with_mode(mode))
            check_self_consistent(score, "score")  # promotion re-derives every verdict, the arrangements' included
            scores[spec, arrangements, mode] = score
        return scores[spec, arrangements, mode]

    return judged


def test_the_reference_passes_every_arrangement(judge):
    score = judge("small", 3, "tolerance")
    shape = score.shapes["4"]
    assert shape.verdict == "pass", shape.reasons
    ev = shape.arrangements
    assert ev is not None and ev.passed and sorted(ev.lanes) == ["k4.a1", "k4.d", "k4.d2"]
    assert score.evidence is not None and score.evidence.arrangements == 3
    assert set(ev.slots["0"]) == {"0", "1", "2", "3"}  # every block seen in several slots
    assert sum(s.placements for s in ev.slots["0"].values()) == 4 * BLOCKS  # plain, a1, and both copies
    assert [s.metric for s in ev.spread["0"]] == ["max_abs", "max_ulp", "flips"]
    assert set(ev.spread["0"][0].values) == {"k4", "k4.a1", "k4.d", "k4.d2"}


def test_one_arrangement_passes_the_slot_dependent_model_and_three_refuse_it_naming_the_slot(judge):
    """The negative control of the arrangements: 1 ULP on the last slot's last window is inside every
    tolerance, so one arrangement promotes it in tolerance mode; moved to other slots, the block answers otherwise,
    which bitwise mode refuses, its cause the slot."""
    one = judge("lanes.controls:slot_dependent", 1, "tolerance")
    assert one.shapes["4"].verdict == "pass" and one.shapes["4"].arrangements is None and one.evidence is None
    three = judge("lanes.controls:slot_dependent", 3)
    shape = three.shapes["4"]
    assert shape.verdict == "fail" and three.verdict == "fail"
    assert shape.cause is not None and shape.cause.kind == "depends on slot / neighbours / duplicates"
    ev = shape.arrangements
    assert ev is not None and not ev.passed
    assert not ev.lanes["k4.a1"].same_as_plain["0"].passed
    assert ev.duplicates is not None and not ev.duplicates["0"].passed  # the last pair's copies differ too
    assert ev.worst_slot["0"] == "3"  # the last slot is the one off the golden
    line = next(r for r in shape.reasons if "arrangement 1" in r and "does not give its answer" in r)
    assert line.startswith("k=4 arrangement 1 (k4.a1) slot ") and "slot 3 (last)" in line, line
    assert "in arrangement 0 (k4)" in line and "a block's answer must not depend on its slot" in line
    assert "OP 0" in line and "allowed" in line


def test_the_duplicate_dependent_model_is_refused_by_the_duplicates_alone(judge):
    three = judge("lanes.controls:duplicate_dependent", 3)
    ev = three.shapes["4"].arrangements
    assert ev is not None and ev.lanes["k4.a1"].same_as_plain["0"].passed  # no block twice: every shuffle agrees
    assert ev.duplicates is not None and not ev.duplicates["0"].passed
    assert three.shapes["4"].cause.kind == "depends on slot / neighbours / duplicates"
    assert "duplicates (k4.d, k4.d2)" in three.shapes["4"].cause.evidence
    line = next(r for r in three.shapes["4"].reasons if "duplicates" in r)
    assert "twice in one request (slot " in line and "gave two answers" in line, line
    assert three.shapes["4"].verdict == "fail"


def test_promotion_refuses_an_arrangement_check_edited_to_pass(judge):
    """Every verdict edited to pass, consistently, as a forger would: the figures still say otherwise."""
    score = judge("lanes.controls:slot_dependent", 3)
    data = score.model_dump(mode="json")
    shape = data["shapes"]["4"]
    ev = shape["arrangements"]
    verdicts = [*ev["duplicates"].values()] + [
        v for lane in ev["lanes"].values() for v in [*lane["ops"].values(), *lane["same_as_plain"].values()]
    ]
    for v in verdicts:
        for check in v["checks"]:
            if check["relation"] != "report":
                check["ok"] = True
        v["passed"], v["reasons"] = True, []
    for lane in ev["lanes"].values():
        lane["passed"] = True
    ev["passed"], ev["reasons"] = True, []
    shape["verdict"], shape["reasons"], data["verdict"] = "pass", [], "pass"
    # bitwise mode: the lane is off the golden too, so its check against the golden is the first one caught
    with pytest.raises(LedgerError, match=r"k=4: arrangement lane k4\.a1 (against k4, )?OP 0: check .* says ok=True"):
        check_self_consistent(Score.model_validate(data), "score")


def test_the_report_shows_the_spread_and_the_worst_slot_only_with_arrangements(judge, tmp_path):
    import json

    from reports.signoff import write_report

    paths = write_report(tmp_path / "three", judge("lanes.controls:slot_dependent", 3))
    facts = json.loads(paths["json"].read_text())["arrangements"]
    row = next(r for r in facts["rows"] if r["shape"] == 4 and r["op"] == 0)
    assert row["worst_slot_text"] == "3 (last)" and not row["same_in_every_slot"]
    assert [v["lane"] for v in row["values"]] == ["k4", "k4.a1", "k4.d", "k4.d2"] and row["min"] <= row["max"]
    assert any(s["worst"] and s["label"] == "3 (last)" for s in facts["slots"])
    html, md = paths["html"].read_text(), paths["md"].read_text()
    assert 'id="arrangements"' in html and "## Arrangements" in md and "3 (last)" in md
    plot = html[html.index('id="arrangement-plot-0"') :]
    assert plot.index("<svg") < plot.index("</svg>") and "k=4" in plot[: plot.index("</svg>")]
    plain = write_report(tmp_path / "one", judge("lanes.controls:slot_dependent", 1, "tolerance"))
    assert "arrangements" not in json.loads(plain["json"].read_text()) and "Arrangements" not in plain["md"].read_text()


@pytest.mark.parametrize(
    "spec, kinds",
    [
        ("lanes.controls:slot_dependent", {"golden", "slots", "duplicates"}),  # the last slot drifts from the golden
        ("lanes.controls:duplicate_dependent", {"duplicates"}),
    ],
)
def test_tolerance_mode_promotes_the_one_ulp_controls_with_a_warning_naming_the_slot(judge, spec, kinds):
    """The same runs as above: in tolerance mode their ULPs are what the user accepted, reported, not refused;
    noise-floor mode (a bitwise golden) refuses them as bitwise does."""
    score = judge(spec, 3, "tolerance")
    shape = score.shapes["4"]
    assert shape.verdict == "pass" and shape.cause is None, shape.reasons
    assert {w.kind for w in shape.warnings if w.op == 0} == kinds
    w = next(w for w in shape.warnings if w.op == 0 and w.kind == min(kinds - {"golden"}))
    assert w.tolerance_mode == "tolerance" and w.max_ulp >= 1 and w.blocks_differing > 0 and "slot" in (w.where or "")
    assert w.line.startswith(f"k=4 OP 0 {w.kind}: ") and "reported, not refused" in w.line
    assert judge(spec, 3, "noise-floor").shapes["4"].cause.kind == "depends on slot / neighbours / duplicates"


def test_a_control_beyond_the_tolerances_is_refused_in_every_mode(judge):
    """The negative control of the rule: a duplicated window answered +0.01 is no kernel's ULPs."""
    for mode in ("tolerance", "bitwise", "noise-floor"):
        shape = judge("lanes.controls:duplicate_shifted", 3, mode).shapes["4"]
        assert shape.verdict == "fail" and shape.cause.kind == "depends on slot / neighbours / duplicates", mode
        assert "OP 0" in shape.cause.evidence and "duplicates" in shape.cause.evidence
