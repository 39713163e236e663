"""A kind of evidence defined here alone, registered, and seen everywhere a kind goes.

The toy kind counts, per packed shape, the OP 0 windows of the plain lane whose log-probabilities differ in
any bit from the golden's, and allows ``limit`` of them. Registered in this file only (no other module
changes), it is scored beside the plain lane, stored in the score, re-derived at promotion (an edited and
re-sealed figure is refused), shown in the report and in JUnit; it refuses a shape with its cause and its
line, and passes honest numerics when its limit allows them. The model moves later slots by one ULP
(``lanes.controls.ulp_controls:small``): within every tolerance, never bitwise.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest

from harness.base.errors import HarnessError, LedgerError
from harness.data.judge_limits import LimitSet
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.refusals import NUMERICS
from harness.data.schemas.results import CheckModel, OpVerdictModel, Score, ShapeScore
from harness.data.schemas.verdicts import CheckDetails
from harness.data.shape import Shape, lane_name
from harness.evidence import kind_registry as registry
from harness.evidence.kind import (
    JudgedPair,
    KindDefaults,
    Recheck,
    ReportSection,
    ShapeEvidence,
    ShapeFinish,
    ShapeSetting,
    more_evidence,
    with_evidence,
)
from tests.cli_run import harness_cli
from tests.pipeline import config_for, record
from tests.tamper import edit_json

ULP = "lanes.controls.ulp_controls:small"
NAME = "toy_windows_moved"


def _verdict(k: int, moved: int, windows: int, limit: int) -> OpVerdictModel:
    check = CheckModel.gate(
        0,
        NAME,
        moved,
        "<=",
        limit,
        CheckDetails(unit="windows", offending=moved, total=windows, limit="toy_max_windows"),
    )
    return OpVerdictModel.of(0, f"k{k}.toy", [check], {NAME: moved}, ToyLimits(toy_max_windows=limit).document())


class ToyLimits(LimitSet):
    """The toy's own limits, typed as a judge's are: promotion re-derives them and compares their document."""

    toy_max_windows: int


class _Counter:
    def __init__(self, k: int, limit: int) -> None:
        self.k, self.limit, self.windows, self.moved = k, limit, 0, 0

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        a = gold.segmentation.logprobs
        b = lanes[lane_name(self.k)].segmentation.logprobs
        differs = np.ascontiguousarray(a).view(np.int32) != np.ascontiguousarray(b).view(np.int32)
        self.windows += a.shape[0] * a.shape[1]
        self.moved += int(differs.reshape(a.shape[0] * a.shape[1], -1).any(axis=1).sum())

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        verdict = _verdict(self.k, self.moved, self.windows, self.limit)
        result = {"windows": self.windows, "moved": self.moved, "verdict": verdict.model_dump(mode="json")}
        reasons = [f"k={self.k} toy: {r}" for r in verdict.reasons]
        return with_evidence(
            score, more_evidence(score, NAME, result), reasons_after=reasons, refused=not verdict.passed
        )


class ToyKind(KindDefaults):
    name = NAME

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        return _Counter(setting.k, self.limit) if Op.SEGMENTATION in setting.ops else None

    def _stored(self, shape: ShapeScore) -> tuple[dict, OpVerdictModel] | None:
        found = shape.more_evidence.get(NAME)
        return None if found is None else (found, OpVerdictModel.model_validate(found["verdict"]))

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        if (stored := self._stored(shape)) is not None:
            yield JudgedPair("plain", f"k={k} toy:", stored[1])

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        stored = self._stored(shape)
        if stored is None:
            return True
        result, verdict = stored
        recheck.check(verdict, ToyLimits(toy_max_windows=self.limit), f"{recheck.where}: toy")
        if verdict.checks[0].observed != result["moved"]:
            raise LedgerError(
                f"{recheck.where}: toy: {result['moved']} windows moved, its check says "
                f"{verdict.checks[0].observed}: the score disagrees with itself"
            )
        return verdict.passed

    def report(self, score: Score) -> ReportSection | None:
        rows = tuple(
            (k, str(s.more_evidence[NAME]["windows"]), str(s.more_evidence[NAME]["moved"]), str(self.limit))
            for k, s in sorted(score.shapes.items())
            if NAME in s.more_evidence
        )
        return (
            ReportSection(
                "Toy evidence: windows moved",
                ("k", "windows", "moved", "allowed"),
                rows,
                ("every window whose answer moved by any bit",),
            )
            if rows
            else None
        )

    def junit(self, k: Shape, shape: ShapeScore) -> list[tuple[str, str]]:
        found = shape.more_evidence.get(NAME)
        return [] if found is None else [("toy_moved", str(found["moved"]))]


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    return record(ULP, tmp_path_factory.mktemp("golden"), 8, config=config_for(ULP))[2].path


@pytest.fixture
def toy(request):
    kind = registry.register(ToyKind(request.param))
    yield kind
    registry.unregister(NAME)


def _nightly(capsys, monkeypatch, golden: Path, out: Path) -> tuple[int, list[str], dict, ET.Element]:
    code, stdout, err = harness_cli(
        capsys,
        monkeypatch,
        "nightly",
        "--golden",
        str(golden),
        "--out",
        str(out),
        "--model",
        ULP,
        "--shapes",
        "4",
        "--set",
        "packer.laws_examples=3",
        "--no-progress",
        "--no-localise",
    )
    assert code in (0, 1), err
    return (
        code,
        stdout.strip().splitlines(),
        json.loads((out / "score.json").read_text()),
        ET.parse(out / "junit.xml").getroot(),
    )


def _properties(junit: ET.Element, case: str) -> dict[str, str]:
    found = next(c for c in junit.iter("testcase") if c.get("name") == case)
    props = found.find("properties")
    assert props is not None
    return {p.get("name", ""): p.get("value", "") for p in props}


@pytest.mark.parametrize("toy", [0], indirect=True)
def test_a_kind_registered_here_refuses_is_reported_and_is_re_derived(golden, tmp_path, capsys, monkeypatch, toy):
    out = tmp_path / "night"
    code, lines, score, junit = _nightly(capsys, monkeypatch, golden, out)
    shape = score["shapes"]["4"]
    stored = shape["more_evidence"][NAME]
    assert code == 1 and 0 < stored["moved"] < stored["windows"], stored
    assert shape["cause"]["kind"] == NUMERICS and shape["cause"]["evidence"].startswith(f"k=4 toy: OP 0 {NAME}: ")
    assert lines[-1].startswith(f"FAIL: shape k=4 refused ({NUMERICS}): toy: OP 0 {NAME}: {stored['moved']}"), lines
    assert _properties(junit, "op0")["toy_moved"] == str(stored["moved"])
    report = (out / "report" / "report.md").read_text()
    assert (
        "## Toy evidence: windows moved" in report and f"| 4 | {stored['windows']} | {stored['moved']} | 0 |" in report
    )
    assert "evidence-toy_windows_moved" in (out / "report" / "report.html").read_text()

    # promotion re-derives it: the score as written is accepted (its refusal recorded), an edited figure is not
    monkeypatch.chdir(tmp_path)  # promote's ledger and manifest, where the harness puts them by default
    code, _, err = harness_cli(capsys, monkeypatch, "promote", "--score", str(out / "score.json"))
    assert code in (0, 1), err

    def hide(data: dict) -> None:
        data["shapes"]["4"]["more_evidence"][NAME]["moved"] = 0

    edit_json(out / "score.json", hide, field="digest")
    code, _, err = harness_cli(capsys, monkeypatch, "promote", "--score", str(out / "score.json"))
    assert code == 2 and "toy: 0 windows moved, its check says" in err, err


@pytest.mark.parametrize("toy", [10**9], indirect=True)
def test_a_kind_registered_here_passes_honest_numerics(golden, tmp_path, capsys, monkeypatch, toy):
    code, lines, score, junit = _nightly(capsys, monkeypatch, golden, tmp_path / "night")
    stored = score["shapes"]["4"]["more_evidence"][NAME]
    assert code == 0 and lines[-1].startswith("PASS: 1 shape"), lines
    assert stored["verdict"]["passed"] and stored["moved"] > 0  # honest numerics: moved, within its limit


def test_without_a_registered_kind_the_score_holds_none_of_it(golden, tmp_path, capsys, monkeypatch):
    """Negative control: the same night with the harness's own kinds only writes no trace of the toy kind."""
    code, _, score, junit = _nightly(capsys, monkeypatch, golden, tmp_path / "night")
    assert "more_evidence" not in score["shapes"]["4"] and "toy_moved" not in _properties(junit, "op0")
    sections = json.loads((tmp_path / "night" / "report" / "report.json").read_text()).get("evidence_sections", [])
    assert all(s["kind"] != ToyKind.name for s in sections)  # the harness's own generic sections only


def test_a_name_is_registered_once():
    with pytest.raises(HarnessError, match="taken"):
        registry.register(_Named("repeats"))


class _Named(KindDefaults):
    def __init__(self, name: str) -> None:
        self.name = name
