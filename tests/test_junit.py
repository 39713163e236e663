"""JUnit XML and the CI summary line, read back with junitparser, on real scores.

Made once per module with the small model (shapes 2 and 4), all real:

- ``passing``: default tolerances, every OP of every shape passes;
- ``mixed``: the same run scored with an OP 0 flip-rate allowance the corpus cannot bound,
  so OP 0 fails (3/n rule) while OP 1 and OP 2 pass: failures must land on op0 cases only;
- ``drift``: the golden verified with the ``count_dependent`` control (same weights, +1e-6
  on every output): golden reproduction fails.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from junitparser import Failure, JUnitXml, Skipped

from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import EvidenceSection
from harness.data.tolerances import SegmentationTolerance, Tolerances
from harness.pipeline.record import verify_golden
from harness.pipeline.score import score_run
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model
from reports import summary_line, write_junit
from tests.pipeline import record, run_shapes

SHAPES = (2, 4)
NUMERICS = NumericSettings(threads=1)  # reports, not numerics: stay fast on a shared 2-core runner
# one arrangement: these tests read the JUnit layout of the per-OP verdicts; the arrangements' own failure
# case ("evidence") is asserted in tests/test_repeats.py and tests/test_load_sweep.py
CONFIG = release_config(numerics=NUMERICS, evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False))


@pytest.fixture(scope="module")
def scores(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("junit")
    backend, _, golden = record("small", tmp, numerics=NUMERICS, config=CONFIG)
    run = run_shapes(backend, golden, tmp, SHAPES, CONFIG)
    control = InProcessBackend(load_model("lanes.controls:count_dependent"), NUMERICS)
    return {
        "passing": score_run(golden, run, Tolerances()),
        "mixed": score_run(golden, run, Tolerances(op0=SegmentationTolerance(max_flip_rate=1e-6))),
        "drift": verify_golden(golden, control, CONFIG),
    }


def _cases(path) -> dict[tuple[str, str], object]:
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert [s.name for s in suites] == ["harness.nightly"]
    return {(c.classname, c.name): c for c in suites[0]}


def _case_properties(path, classname: str, name: str) -> dict[str, str]:
    root = ET.parse(path).getroot()
    case = root.find(f".//testcase[@classname='{classname}'][@name='{name}']")
    return {p.get("name"): p.get("value") for p in case.iterfind("properties/property")}


def test_one_case_per_op_and_shape_plus_golden(tmp_path, scores):
    score = scores["mixed"]
    path = write_junit(tmp_path / "junit.xml", score, None)
    cases = _cases(path)
    expected = {(f"shape_k{k}", f"op{op}") for k, s in score.shapes.items() for op in s.ops}
    assert len(expected) == len(SHAPES) * 3
    assert set(cases) == expected | {("golden", "reproduction")}


def test_failures_exactly_where_the_score_fails(tmp_path, scores):
    score = scores["mixed"]
    path = write_junit(tmp_path / "junit.xml", score, None)
    cases = _cases(path)
    failed = set()
    for k, shape in score.shapes.items():
        assert shape.verdict == "fail"
        for op, verdict in shape.ops.items():
            case = cases[(f"shape_k{k}", f"op{op}")]
            failures = [r for r in case.result if isinstance(r, Failure)]
            if verdict.passed:
                assert case.is_passed and not failures
            else:
                failed.add((k, op))
                # the shape's cause first, then the failing checks' lines
                assert failures[0].message == f"{shape.cause.kind}: " + "; ".join(verdict.reasons)
                assert failures[0].text.splitlines()[: len(verdict.reasons)] == verdict.reasons
                assert "next: use a larger corpus" in failures[0].text  # what to do next
            # every check, gated or reported, is a property and a line of system-out
            props = _case_properties(path, f"shape_k{k}", f"op{op}")
            for c in verdict.checks:
                assert props[c.metric] == str(c.observed)
                if c.allowed is not None:
                    assert props[f"{c.metric}_allowed"] == str(c.allowed)
            assert len(case.system_out.splitlines()) == len(verdict.checks)
    assert failed == {(str(k), "0") for k in SHAPES}  # OP 0 only: OP 1/2 are within tolerance
    suite = next(iter(JUnitXml.fromfile(str(path))))
    counts = (suite.tests, suite.failures, suite.errors, suite.skipped)
    assert counts == (len(SHAPES) * 3 + 1, len(SHAPES), 0, 0)
    assert cases[("golden", "reproduction")].is_passed


def test_passing_score_has_no_failures(tmp_path, scores):
    score = scores["passing"]
    path = write_junit(tmp_path / "junit.xml", score, None)
    cases = _cases(path)
    assert all(case.is_passed for case in cases.values())
    golden = cases[("golden", "reproduction")]
    assert golden.system_out == score.verification.summary
    # time of an OP case is that lane's wall time for the OP (throughput: a dict of named figures)
    wall_s = score.throughput["2"]["ops"]["0"]["wall_s"]
    assert float(cases[("shape_k2", "op0")].time) == pytest.approx(wall_s, abs=1e-6)
    suite = next(iter(JUnitXml.fromfile(str(path))))
    props = {p.name: p.value for p in suite.properties()}
    assert props["summary"] == summary_line(score, None)
    assert props["run_id"] == score.run.id and props["verdict"] == "pass"


def test_golden_not_reproduced_fails_its_case(tmp_path, scores):
    drift = scores["drift"]
    assert (drift.status, drift.passed) == ("drift", False)
    path = write_junit(tmp_path / "junit.xml", scores["passing"], drift)
    cases = _cases(path)
    golden = cases[("golden", "reproduction")]
    failures = [r for r in golden.result if isinstance(r, Failure)]
    assert failures and failures[0].message == drift.summary
    assert failures[0].type == "drift"
    assert all(c.is_passed for key, c in cases.items() if key[0] != "golden")


def _unverified(score):
    """``score`` without its verification: a state a validated score cannot be in (``Score.verification`` is
    required), kept as the JUnit's and summary's fallback for a hand-made one (model_copy does not validate)."""
    return score.model_copy(update={"verification": None})


def test_no_verification_is_a_skipped_case_that_says_so(tmp_path, scores):
    score = _unverified(scores["passing"])
    path = write_junit(tmp_path / "junit.xml", score, None)
    golden = _cases(path)[("golden", "reproduction")]
    skipped = [r for r in golden.result if isinstance(r, Skipped)]
    assert golden.is_skipped and "no golden verification available" in skipped[0].message
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert (suite.skipped, suite.failures) == (1, 0)


def test_summary_line(scores):
    passing, mixed, drift = scores["passing"], scores["mixed"], scores["drift"]
    assert summary_line(passing, None) == "PASS: 2 shapes promoted (k=2,4), golden reproduced bitwise"

    line = summary_line(mixed, None)
    first = mixed.shapes["2"].reasons[0]
    assert first.startswith("OP 0 flip_rate_upper95") and mixed.shapes["2"].cause.kind == "not judged at its size"
    assert line.startswith(f"FAIL: shape k=2 refused (not judged at its size): {first}")  # the cause, its evidence
    assert line.endswith("2 of 2 shapes failed; golden reproduced bitwise")
    assert "\n" not in line

    line = summary_line(passing, drift)
    assert line.startswith(f"FAIL: {drift.summary}") and "0 of 2 shapes failed" in line

    assert summary_line(_unverified(passing), None).endswith("golden reproduction not checked")


def test_the_suite_is_stamped_with_the_score_it_reports_not_the_time_of_writing(scores, tmp_path):
    """Rewriting the JUnit of the same score gives the same file (a resumed or sharded job's output is
    compared byte for byte): the stamp is the score's ``created``, never the clock at write time."""
    score = scores["passing"].model_copy(update={"created": "2001-02-03T04:05:06+00:00"})
    first = write_junit(tmp_path / "a.xml", score, None).read_text()
    assert 'timestamp="2001-02-03T04:05:06+00:00"' in first
    assert write_junit(tmp_path / "b.xml", score, None).read_text() == first
