"""The load sweep's judging, budget pick, score hook, report section and refusals (no server needed).

The sweep against a real Triton server (figures, statistics, the racing negative control) is
tests/triton/test_load_sweep_server.py; here its evidence is hand-made, so each rule is shown to hold and
to fail on the defect it guards against.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.base.errors import ConfigError, HarnessError, LedgerError
from harness.base.jsonio import seal, seal_ok
from harness.data.schemas.load import ServerStats, ShapeLoad
from harness.data.schemas.results import Score
from harness.evidence.load_evidence import PointTraffic, budget_pick, load_point, load_refusals, nearest_rank
from harness.evidence.load_score import with_load
from harness.judging.judges.judge_base import OpVerdict
from harness.ledger.score_check import check_self_consistent
from harness.pipeline.load_sweep import check_sweep
from harness.release_config import Override, load_config, release_config
from lanes.backends.triton.stats import difference, parse_stats
from tests.pipeline import pipeline


def _verdict(op: int, passed: bool) -> OpVerdict:
    return OpVerdict.model_validate(
        {
            "op": op,
            "shape": 2,
            "passed": passed,
            "reasons": [] if passed else [f"OP {op} max_abs: 0.01 > 0.0001 allowed"],
            "checks": [],
            "metrics": {},
            "limits": {},
            "failing": [],
            "distribution": [],
        }
    )


def _point(c: int, p99_s: float, blocks_per_s: float, ok: bool = True):
    # wall chosen so that blocks / wall is the wanted throughput (8 blocks)
    return load_point(
        2, c, PointTraffic([p99_s / 2, p99_s], 8 / blocks_per_s, 8, 2, 2), [_verdict(0, ok), _verdict(1, True)], None
    )


def test_nearest_rank_is_an_observed_value():
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert nearest_rank(values, 50) == 3.0 and nearest_rank(values, 99) == 5.0 and nearest_rank(values, 1) == 1.0
    assert nearest_rank([], 99) == 0.0


def test_point_figures_and_per_request_server_times():
    stats = ServerStats(
        requests=4,
        queue_ns=8_000_000,
        compute_input_ns=1_000_000,
        compute_infer_ns=10_000_000,
        compute_output_ns=1_000_000,
    )
    p = load_point(4, 2, PointTraffic([0.010, 0.020, 0.030, 0.040], 2.0, 16, 4, 4), [_verdict(0, True)], stats)
    assert (p.p50_ms, p.p99_ms, p.blocks_per_s) == pytest.approx((20.0, 40.0, 8.0))
    assert (p.queue_ms, p.compute_ms) == pytest.approx((2.0, 3.0))
    assert p.accurate and p.reasons == []


def test_a_point_with_a_failing_op_or_an_unchecked_response_is_not_accurate():
    bad = load_point(2, 4, PointTraffic([0.01], 1.0, 8, 2, 2), [_verdict(0, False)], None)
    assert not bad.accurate and bad.reasons == ["k=2 at concurrency 4: OP 0 max_abs: 0.01 > 0.0001 allowed"]
    unchecked = load_point(2, 1, PointTraffic([0.01], 1.0, 8, 3, 2), [_verdict(0, True)], None)
    assert not unchecked.accurate and "2 of 3 responses were checked" in unchecked.reasons[0]


def test_budget_picks_the_fastest_accurate_point_of_a_passing_shape_within_it():
    shapes = {
        "2": ShapeLoad(
            shape=2, points=[_point(1, 0.010, 100), _point(2, 0.015, 180), _point(4, 0.030, 300)]
        ),  # over the budget
        "4": ShapeLoad(shape=4, points=[_point(1, 0.012, 150), _point(2, 0.018, 400, ok=False)]),  # not accurate
        "8": ShapeLoad(shape=8, points=[_point(1, 0.005, 900)]),
    }  # not eligible: its shape failed
    meets, best = budget_pick(shapes, 20.0, ["2", "4"])
    assert best is not None and (best.shape, best.concurrency) == (2, 2) and best.p99_ms == pytest.approx(15.0)
    assert {(m.shape, m.concurrency) for m in meets} == {(2, 1), (2, 2), (4, 1)}
    # negative controls: each excluded point wins once its exclusion is lifted
    assert budget_pick(shapes, 40.0, ["2", "4"])[1].concurrency == 4
    assert budget_pick(shapes, 20.0, ["2", "4", "8"])[1].shape == 8
    assert budget_pick(shapes, None, ["2"]) == ([], None)
    assert budget_pick(shapes, 1.0, ["2"]) == ([], None)


def test_stats_parse_and_difference():
    answer = {
        "model_stats": [
            {
                "name": "diar_nn_g",
                "version": "1",
                "inference_stats": {
                    "success": {"count": 7, "ns": 1},
                    "queue": {"count": 7, "ns": 70},
                    "compute_input": {"count": 7, "ns": 7},
                    "compute_infer": {"count": 7, "ns": 700},
                    "compute_output": {"count": 7, "ns": 14},
                },
            }
        ]
    }
    after = parse_stats(answer, "diar_nn_g", "here")
    before = ServerStats(requests=2, queue_ns=20, compute_input_ns=2, compute_infer_ns=200, compute_output_ns=4)
    assert difference(before, after, "here") == ServerStats(
        requests=5, queue_ns=50, compute_input_ns=5, compute_infer_ns=500, compute_output_ns=10
    )
    with pytest.raises(HarnessError, match="went down .*restarted"):
        difference(after, before, "here")
    with pytest.raises(HarnessError, match="no model 'other'"):
        parse_stats(answer, "other", "here")


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Score:
    """A real score (null model, 8 blocks: enough to bound the rates; k=2) that passes."""
    score = pipeline("lanes.models.null_model:small", tmp_path_factory.mktemp("load"), shapes=(2,), blocks=8).score
    assert score.verdict == "pass"
    return score


def test_with_load_refuses_an_inaccurate_shape_and_stays_self_consistent(scored: Score):
    shapes = {"2": ShapeLoad(shape=2, points=[_point(1, 0.01, 100), _point(2, 0.01, 200, ok=False)])}
    refused = with_load(scored, "http://127.0.0.1:1", "diar_nn_g", 4, [1, 2], shapes, 50.0)
    shape = refused.shapes["2"]
    assert shape.verdict == "fail" and refused.verdict == "fail"
    assert "k=2 is not accurate under load (concurrency 2 of the sweep [1, 2])" in shape.reasons[0]
    assert "OP 0 max_abs: 0.01 > 0.0001 allowed" in shape.reasons[0]
    assert all(op.passed for op in shape.ops.values())  # the old evidence passed it: the sweep alone refuses it
    assert refused.load is not None and refused.load.budget is None  # the refused shape is no candidate
    body = refused.model_dump(mode="json")
    assert seal_ok(body, "digest")
    check_self_consistent(refused, "score")
    # negative control: the same evidence with the verdict left at "pass" is caught by promotion's re-check
    body.update(verdict="pass")
    body["shapes"]["2"].update(verdict="pass", reasons=[])
    forged = Score.model_validate(seal({k: v for k, v in body.items() if k != "digest"}, "digest"))
    with pytest.raises(LedgerError, match="k=2: verdict 'pass' disagrees .*not accurate under load"):
        check_self_consistent(forged, "score")


def test_with_load_of_accurate_points_keeps_the_verdict_and_picks_the_budget(scored: Score):
    shapes = {"2": ShapeLoad(shape=2, points=[_point(1, 0.01, 100), _point(2, 0.01, 200)])}
    kept = with_load(scored, "http://127.0.0.1:1", "diar_nn_g", 4, [1, 2], shapes, 50.0)
    assert kept.verdict == "pass" and kept.shapes["2"] == scored.shapes["2"]
    assert kept.load is not None and kept.load.budget is not None and kept.load.budget.concurrency == 2
    assert load_refusals(kept.load, 2) == []
    again = Score.model_validate(json.loads(json.dumps(kept.model_dump(mode="json"))))
    assert again == kept  # the file reads back as the model
    assert "load" not in scored.model_dump(mode="json")  # a score without a sweep has no key: the same file


def test_report_section_only_with_a_sweep(scored: Score, tmp_path: Path):
    from reports.signoff import write_report

    shapes = {"2": ShapeLoad(shape=2, points=[_point(1, 0.01, 100), _point(2, 0.01, 200, ok=False)])}
    with_sweep = with_load(scored, "http://127.0.0.1:1", "diar_nn_g", 4, [1, 2], shapes, 50.0)
    plain = write_report(tmp_path / "plain", scored)
    swept = write_report(tmp_path / "swept", with_sweep)
    assert "Under load" not in plain["html"].read_text() and "load" not in json.loads(plain["json"].read_text())
    html, md = swept["html"].read_text(), swept["md"].read_text()
    assert 'id="load-frontier"' in html and "<svg" in html and "NOT accurate" in html
    assert "## Under load" in md and "no accurate point of a passing shape meets the p99 budget" in md
    facts = json.loads(swept["json"].read_text())["load"]
    assert [(p["concurrency"], p["accurate"]) for p in facts["points"]] == [(1, True), (2, False)]


def test_sweep_refused_before_any_work_off_triton_or_sharded(scored: Score):
    cfg = load_config(None, [Override("--set", "load.concurrency", [1, 2], "'load.concurrency=[1,2]'")])
    assert cfg.load.concurrency == [1, 2]

    class InProcess:
        name = "in-process"

    with pytest.raises(HarnessError, match="the load sweep runs on a Triton backend"):
        check_sweep(cfg, InProcess())
    with pytest.raises(HarnessError, match=r"with a shard \(nightly.shard\)"):
        check_sweep(cfg, None, shard="1/2")
    check_sweep(release_config(), InProcess())  # no [load] concurrency: nothing to refuse
    with pytest.raises(ConfigError, match="a concurrency is listed twice"):
        load_config(None, [Override("--set", "load.concurrency", [2, 2], "'load.concurrency=[2,2]'")])


def test_junit_and_summary_name_the_load_refusal(scored: Score, tmp_path: Path):
    from reports import summary_line, write_junit

    shapes = {"2": ShapeLoad(shape=2, points=[_point(1, 0.01, 100), _point(2, 0.01, 200, ok=False)])}
    refused = with_load(scored, "http://127.0.0.1:1", "diar_nn_g", 4, [1, 2], shapes, None)
    xml = write_junit(tmp_path / "junit.xml", refused, None).read_text()
    assert 'name="evidence"' in xml and "not accurate under load" in xml
    assert "shape k=2 refused (not reproducible): k=2 is not accurate under load" in summary_line(refused, None)
    assert 'name="evidence"' not in write_junit(tmp_path / "plain.xml", scored, None).read_text()
