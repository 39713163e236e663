"""A new metric is added in one place (its judge) and every view shows it: the score, the CLI's lines,
the sign-off report's tables, JUnit, and promotion's re-derivation of the verdict."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import pytest

import harness.judging.judges as judges
from harness.data.judge_limits import SegmentationLimits
from harness.data.numeric_settings import NumericSettings
from harness.data.tolerances import Tolerances
from harness.judging.judges import SegmentationJudge, VoiceprintJudge
from harness.judging.judges.judge_base import Check, CheckDetails, OpVerdict
from harness.ledger.score_check import check_self_consistent
from harness.pipeline.score import score_run
from reports import write_junit, write_report
from tests.pipeline import config_for, record, run_shapes

TOY_LIMIT = 1e-3


class ToyLimits(SegmentationLimits):
    """The judge's limits with the new one (the judge's typed limits, one field more)."""

    toy_max_mean_abs_per_mille: float


class ToySegmentationJudge(SegmentationJudge):
    """The whole change a new OP 0 metric needs: its limit among the judge's limits, its value computed
    from the evidence, and its check handed to the verdict."""

    def limits(self, tol, floor, sample_bound=True):
        plain = super().limits(tol, floor, sample_bound)
        return ToyLimits(**plain.model_dump(), toy_max_mean_abs_per_mille=TOY_LIMIT)

    def evidence(self, op, geometry, limits, mode):
        evidence = super().evidence(op, geometry, limits, mode)
        plain = evidence.verdict

        def verdict(shape):
            v = plain(shape)
            observed = v.metrics["mean_abs"] * 1000.0
            allowed = limits.toy_max_mean_abs_per_mille
            toy_check = Check.gate(
                0,
                "toy_mean_abs_per_mille",
                observed,
                "<=",
                allowed,
                CheckDetails(limit="toy_max_mean_abs_per_mille", note="a toy metric added by a test"),
            )
            # a verdict is frozen: the judge builds it with every check (passed and reasons follow from them)
            return OpVerdict.of(v.op, v.shape, [*v.checks, toy_check], v.metrics, v.limits, v.failing, v.distribution)

        evidence.verdict = verdict
        return evidence


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(judges, "JUDGES", (ToySegmentationJudge(), VoiceprintJudge()))


def test_a_new_metric_reaches_every_view(toy, tmp_path):
    cfg = config_for(numerics=NumericSettings(threads=1))
    backend, _, golden = record("small", tmp_path, blocks=6, numerics=cfg.numerics, config=cfg)
    run = run_shapes(backend, golden, tmp_path, (2,), cfg)
    score = score_run(golden, run, Tolerances())
    checks = score.shapes["2"].ops["0"].checks
    toy_check = next(c for c in checks if c.metric == "toy_mean_abs_per_mille")
    assert toy_check.ok is True and toy_check.allowed == TOY_LIMIT
    check_self_consistent(score, "score")  # promotion re-derives it like any other check
    paths = write_report(tmp_path / "report", score)
    assert "toy_mean_abs_per_mille" in paths["md"].read_text() and "toy_mean_abs_per_mille" in paths["html"].read_text()
    facts = json.loads(paths["json"].read_text())
    assert any(c["metric"] == "toy_mean_abs_per_mille" for c in facts["shapes"]["2"]["ops"]["0"]["checks"])
    junit = write_junit(tmp_path / "junit.xml", score, None)
    case = ET.parse(junit).getroot().find(".//testcase[@classname='shape_k2'][@name='op0']")
    names = {p.get("name") for p in case.iterfind("properties/property")}
    assert {"toy_mean_abs_per_mille", "toy_mean_abs_per_mille_allowed"} <= names
    assert "toy_mean_abs_per_mille" in case.find("system-out").text


def test_a_failing_new_metric_fails_the_shape_with_its_own_line(toy, tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "TOY_LIMIT", -1.0)  # nothing can be <= -1: the check must fail
    cfg = config_for(numerics=NumericSettings(threads=1))
    backend, _, golden = record("small", tmp_path, blocks=6, numerics=cfg.numerics, config=cfg)
    score = score_run(golden, run_shapes(backend, golden, tmp_path, (2,), cfg), Tolerances())
    assert score.shapes["2"].verdict == "fail"
    assert any(r.startswith("OP 0 toy_mean_abs_per_mille: ") and "> -1 allowed" in r for r in score.shapes["2"].reasons)
