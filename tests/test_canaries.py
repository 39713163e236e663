"""Canaries: every night plants known defects through the model and backend, and fails when its gate misses one.

On the small reference model in process (the Triton lane's test checks the same through a server): the four
canaries are planted and each is refused with its expected cause; the report and JUnit list them; a pipeline
broken on purpose (the packed lane scored against itself) passes every real shape, and the canaries fail the
night (exit 1, the line naming the canary) and it promotes nothing; ``harness promote`` refuses such a score; a
hand-edited canary cause is refused; ``[evidence] canaries = false`` is recorded, and plants nothing.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from harness.base.errors import EXIT_FAIL, EXIT_PASS, LedgerError
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, ModelSection
from harness.data.schemas.refusals import LEAK, NUMERICS
from harness.data.schemas.results import Score
from harness.evidence.canary_verdicts import EXPECTED
from harness.judging.lane_scoring import LaneScorer
from harness.ledger.score_check import check_self_consistent
from harness.pipeline.nightly import nightly
from harness.pipeline.nightly_job import NightlyJob
from harness.pipeline.promote import promote_file
from harness.release_config import release_config


def config(**evidence) -> ConfigFile:
    ev = EvidenceSection(arrangements=1, **evidence)  # CI time: the neighbours and canaries are the subject
    return release_config(name="night", model=ModelSection(spec="small"), candidates=(2,), evidence=ev)


def test_every_canary_is_planted_and_refused_with_its_cause(tmp_path, golden_copy, backend):
    outcome = nightly(NightlyJob(config(), golden_copy, tmp_path / "out", progress=False, localise=False), backend)
    assert outcome.exit_code == EXIT_PASS, outcome.summary
    run = outcome.score.canaries
    assert run is not None and run.planted and run.seen and run.k == 2
    assert [c.name for c in run.canaries] == ["leak", "rebasing", "exchange", "shift"]
    for c in run.canaries:
        assert c.seen and c.shape.cause is not None and c.shape.cause.kind == EXPECTED[c.name] == c.expected
    assert {c.expected for c in run.canaries} == {LEAK, NUMERICS}
    assert run.calls == 6 and 0 < run.seconds < run.network_seconds  # type: ignore[operator]
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    section = next(s for s in report["evidence_sections"] if s["kind"] == "canaries")
    assert [r[0] for r in section["rows"]] == ["leak", "rebasing", "exchange", "shift"]
    assert all(r[-1] == "seen" for r in section["rows"]) and "the gate can see" in section["lines"][0]
    assert any(s["kind"] == "sensitivity" for s in report["evidence_sections"])
    cases = ET.parse(tmp_path / "out" / "junit.xml").getroot().findall(".//testcase[@classname='canaries']")
    assert [c.get("name") for c in cases] == ["leak", "rebasing", "exchange", "shift"]
    assert all(c.find("failure") is None for c in cases)


def test_a_pipeline_that_scores_the_lane_against_itself_fails_on_the_canaries(
    tmp_path, golden_copy, backend, monkeypatch
):
    """Broken on purpose: every packed lane judged against itself instead of the golden passes every real shape
    (the negative control of the whole gate); the canaries see it, and the night promotes nothing."""
    original = LaneScorer.add
    monkeypatch.setattr(LaneScorer, "add", lambda self, golden, lane: original(self, lane, lane))
    outcome = nightly(NightlyJob(config(), golden_copy, tmp_path / "out", progress=False, localise=False), backend)
    score = outcome.score
    assert all(s.verdict == "pass" for s in score.shapes.values())  # the broken gate passes the real lanes
    assert score.canaries is not None and not score.canaries.seen
    missed = [c.name for c in score.canaries.canaries if not c.seen]
    assert "shift" in missed  # a numerics defect needs the golden to be seen
    assert outcome.exit_code == EXIT_FAIL
    assert outcome.summary.splitlines()[-1].startswith("FAIL: the gate did not see a planted defect: ")
    assert "nothing was promoted" in outcome.summary
    assert "ledger" not in outcome.paths and outcome.transitions is None
    assert not (golden_copy.parent / "ledger.json").exists()
    junit = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    failed = [
        c.get("name") for c in junit.findall(".//testcase[@classname='canaries']") if c.find("failure") is not None
    ]
    assert set(failed) == set(missed)
    monkeypatch.undo()
    with pytest.raises(LedgerError, match="the gate did not see a planted defect"):
        promote_file(
            tmp_path / "out" / "score.json", config(), golden_copy.parent / "l.json", golden_copy.parent / "m.json"
        )


def test_a_hand_edited_canary_cause_is_refused(tmp_path, golden_copy, backend):
    outcome = nightly(
        NightlyJob(config(), golden_copy, tmp_path / "out", progress=False, localise=False, no_promote=True), backend
    )
    body = outcome.score.model_dump(mode="json")
    body["canaries"]["canaries"][3]["shape"]["cause"]["kind"] = LEAK  # the shift "refused as a leak"
    body["canaries"]["canaries"][3]["seen"] = False
    body["canaries"]["seen"] = False
    with pytest.raises(LedgerError, match="canary shift"):
        check_self_consistent(Score.model_validate(body), "score")


def test_canaries_off_is_recorded_and_plants_nothing(tmp_path, golden_copy, backend):
    outcome = nightly(
        NightlyJob(config(canaries=False), golden_copy, tmp_path / "out", progress=False, localise=False), backend
    )
    run = outcome.score.canaries
    assert run is not None and not run.planted and run.why == "[evidence] canaries = false" and run.calls == 0
    assert outcome.exit_code == EXIT_PASS
