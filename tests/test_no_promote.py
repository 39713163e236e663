"""Trying an option must not change what the engine obeys, and a nightly must not
silently replace last night's output.

- ``--no-promote``: score, report, JUnit and summary, but the ledger and promoted-shapes manifest are not
  touched (not created, not locked) and the report and summary say so;
- every ledger event records the tolerance mode and every override it was judged under
  (``harness.ledger.promotion.judging_overrides``), and the report says when a night ran under overrides;
- a format-3 ledger written before that field still reads ("not recorded");
- ``--out`` holding a previous nightly's output is refused before any work unless ``--force``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.base.errors import EXIT_PASS, HarnessError
from harness.base.jsonio import seal
from harness.data.schemas import Ledger, validate
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, ModelSection
from harness.data.schemas.records import JudgedUnder, Override
from harness.data.tolerances import Tolerances
from harness.ledger.ledger_store import read_consistent
from harness.ledger.promotion import overrides_of
from harness.pipeline.nightly import NOT_PROMOTED, nightly
from harness.pipeline.nightly_job import NightlyJob, refuse_previous_output
from harness.release_config import release_config
from tests.cli_run import harness_cli


def config(**kw) -> ConfigFile:
    kw.setdefault(
        "evidence", EvidenceSection(arrangements=1, neighbours=False, canaries=False)
    )  # CI time: the subject is the ledger, not evidence
    return release_config(name="night", model=ModelSection(spec="small"), candidates=(2,), **kw)


def loose() -> Tolerances:
    """Limits every healthy small-model shape meets (so the night passes and promotes whatever the kernels)."""
    t = Tolerances()
    return Tolerances(
        op0=t.op0.model_copy(update={"max_abs": 1e-2}),
        op1=t.op1.model_copy(update={"max_abs": 1e-2, "min_cosine": 0.99}),
        op2=t.op2.model_copy(update={"max_abs": 1e-2, "min_cosine": 0.99}),
    )


def ledger_files(golden: Path) -> list[str]:
    """Every file beside the golden's folder that the ledger's commit could create (ledger, manifest, lock, journal)."""
    return sorted(p.name for p in golden.parent.iterdir() if p.name != golden.name)


def test_no_promote_scores_and_reports_but_never_creates_the_ledger(tmp_path, golden_copy, backend):
    """The issue's case: --tolerance bitwise tried on a golden with no ledger yet: nothing is created beside the
    golden (no ledger, manifest, lock or journal); the summary and both report pages say it was not promoted and
    name the overrides; the exit status is still the verdict."""
    cfg = config(tolerances=Tolerances().with_mode("bitwise"))
    outcome = nightly(
        NightlyJob(cfg, golden_copy, tmp_path / "out", progress=False, localise=False, no_promote=True), backend
    )
    assert ledger_files(golden_copy) == [], "--no-promote created files beside the golden"
    assert "ledger" not in outcome.paths and "promoted" not in outcome.paths and outcome.transitions is None
    assert outcome.exit_code == (EXIT_PASS if outcome.score.verdict == "pass" else 1)
    assert outcome.summary.endswith(NOT_PROMOTED) and " promoted (k=" not in outcome.summary
    assert (tmp_path / "out" / "summary.txt").read_text().strip() == outcome.summary
    assert (tmp_path / "out" / "junit.xml").is_file() and (tmp_path / "out" / "score.json").is_file()
    for page in ("report.md", "report.html"):
        text = (tmp_path / "out" / "report" / page).read_text()
        assert "Not promoted (--no-promote): the ledger was not changed." in text, page
        assert (
            f"The engine reads {golden_copy.parent / 'promoted-shapes.json'}, not changed by this night; it does "
            "not exist yet"
        ) in text, page
        assert "Judged under overrides: tolerances.op0.mode = bitwise (default tolerance)" in text, page
    facts = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert {o["key"] for o in facts["overrides"]} == {f"tolerances.op{op}.mode" for op in (0, 1, 2)}
    # negative control: the same night without --no-promote does create them
    nightly(NightlyJob(cfg, golden_copy, tmp_path / "out2", progress=False, localise=False), backend)
    assert {"ledger.json", "promoted-shapes.json"} <= set(ledger_files(golden_copy))


def test_no_promote_leaves_an_existing_ledger_byte_for_byte(tmp_path, golden_copy, backend):
    """A promoted ledger, then a --no-promote night under other tolerances: both files are unchanged; the same
    night promoting (the negative control) adds a commit."""
    first = nightly(
        NightlyJob(config(tolerances=loose()), golden_copy, tmp_path / "a", progress=False, localise=False), backend
    )
    ledger, manifest = first.paths["ledger"], first.paths["promoted"]
    before = (ledger.read_bytes(), manifest.read_bytes(), ledger_files(golden_copy))
    tried = config(tolerances=Tolerances().with_mode("bitwise"))
    nightly(NightlyJob(tried, golden_copy, tmp_path / "b", progress=False, localise=False, no_promote=True), backend)
    assert (ledger.read_bytes(), manifest.read_bytes(), ledger_files(golden_copy)) == before
    page = (tmp_path / "b" / "report" / "report.md").read_text()
    assert "Not promoted (--no-promote)" in page
    # the headline says what the engine's manifest (unchanged) allows, not tonight's verdicts as its rule
    assert first.score is not None and first.score.shapes["2"].verdict == "pass"  # the loose night promoted k=2
    allows = f"The engine reads {manifest}, not changed by this night; it allows k = 1, 2 for this model"
    html = (tmp_path / "b" / "report" / "report.html").read_text()
    for text in (page, html):
        assert allows in text and "this night's verdicts only" in text
    assert "may NOT use" not in page and "may NOT use" not in html and "This night (not promoted): passed k = " in page
    facts = json.loads((tmp_path / "b" / "report" / "report.json").read_text())
    assert facts["engine"] == {"manifest": str(manifest), "exists": True, "allows": {op: [1, 2] for op in "012"}}
    promoted = (tmp_path / "a" / "report" / "report.md").read_text()  # control: a night that promoted
    assert "**May use: k = 1, 2." in promoted and f"The engine reads {manifest}; it allows k = 1, 2" in promoted
    nightly(NightlyJob(tried, golden_copy, tmp_path / "c", progress=False, localise=False), backend)
    assert json.loads(ledger.read_text())["seq"] == json.loads(before[0])["seq"] + 1


def test_every_ledger_event_records_its_tolerance_mode_and_overrides(tmp_path, golden_copy, backend):
    """Defaults: mode 'tolerance', no override, no report line. Loose limits: each differing key is recorded
    with its value and default, and the report names them."""
    plain = nightly(NightlyJob(config(), golden_copy, tmp_path / "a", progress=False, localise=False), backend)
    book, _ = read_consistent(plain.paths["ledger"], plain.paths["promoted"])
    (entry,) = book.entries.values()
    assert entry.history[-1].judged_under == JudgedUnder(
        tolerance_mode="tolerance", voiceprint_inputs="isolated", overrides=[]
    )
    assert "Judged under overrides" not in (tmp_path / "a" / "report" / "report.md").read_text()
    tried = nightly(
        NightlyJob(config(tolerances=loose()), golden_copy, tmp_path / "b", progress=False, localise=False), backend
    )
    book, _ = read_consistent(tried.paths["ledger"], tried.paths["promoted"])
    (entry,) = book.entries.values()
    judged = entry.history[-1].judged_under
    assert judged is not None and judged.tolerance_mode == "tolerance"
    assert {(o.key, o.value, o.default) for o in judged.overrides} == {
        ("tolerances.op0.max_abs", 1e-2, 1e-4),
        ("tolerances.op1.max_abs", 1e-2, 1e-4),
        ("tolerances.op2.max_abs", 1e-2, 1e-4),
        ("tolerances.op1.min_cosine", 0.99, 0.99999),
        ("tolerances.op2.min_cosine", 0.99, 0.99999),
    }
    first = entry.history[0].judged_under
    assert first is not None and first.overrides == []
    assert "tolerances.op0.max_abs = 0.01 (default 0.0001)" in (tmp_path / "b" / "report" / "report.md").read_text()


def test_a_format_3_ledger_without_judged_under_still_reads(tmp_path, golden_copy, backend):
    """Ledgers written before the field are kept: the event reads as 'not recorded' (None)."""
    out = nightly(NightlyJob(config(), golden_copy, tmp_path / "a", progress=False, localise=False), backend)
    book = json.loads(out.paths["ledger"].read_text())
    for entry in book["entries"].values():
        for event in entry["history"]:
            del event["judged_under"]
    old = seal({k: v for k, v in book.items() if k != "ledger_sha256"}, "ledger_sha256")
    parsed = validate(Ledger, old, "old ledger")
    assert all(e.judged_under is None for entry in parsed.entries.values() for e in entry.history)


def test_judged_under_is_validated():
    ok = {"key": "tolerances.op0.mode", "value": "bitwise", "default": "tolerance"}
    assert Override.model_validate(ok).value == "bitwise"
    with pytest.raises(ValueError, match="is its default: not an override"):
        Override.model_validate({**ok, "value": "tolerance"})
    with pytest.raises(ValueError):
        Override.model_validate({**ok, "key": "tolerances.op9.mode"})
    with pytest.raises(ValueError, match="disagrees with the overrides"):
        JudgedUnder.model_validate({"tolerance_mode": "tolerance", "voiceprint_inputs": "chained", "overrides": []})
    with pytest.raises(ValueError, match="listed twice"):
        JudgedUnder.model_validate(
            {"tolerance_mode": "bitwise", "voiceprint_inputs": "isolated", "overrides": [ok, ok]}
        )


def test_overrides_are_what_differs_from_the_built_in_defaults():
    assert overrides_of(Tolerances(), "isolated") == []
    found = overrides_of(Tolerances().with_mode("noise-floor"), "chained")
    assert [o.key for o in found] == [
        "tolerances.op0.mode",
        "tolerances.op1.mode",
        "tolerances.op2.mode",
        "lanes.voiceprint_inputs",
    ]
    assert found[-1] == Override(key="lanes.voiceprint_inputs", value="chained", default="isolated")


def test_an_out_holding_a_previous_nightly_is_refused_unless_forced(tmp_path):
    """An empty folder, a missing one or one with runs only is fine; a score.json (or a published set) is
    refused naming its time; --force lets it through."""
    refuse_previous_output(tmp_path / "missing", False)
    (tmp_path / "empty").mkdir()
    refuse_previous_output(tmp_path / "empty", False)
    (tmp_path / "runs-only" / "runs").mkdir(parents=True)
    refuse_previous_output(tmp_path / "runs-only", False)
    prev = tmp_path / "prev"
    prev.mkdir()
    (prev / "score.json").write_text('{"created": "2026-11-30T01:00:00+00:00"}')
    with pytest.raises(
        HarnessError,
        match=r"already holds a nightly's output \(score\.json of "
        r"2026-11-30T01:00:00\+00:00\); pass --force to replace it",
    ):
        refuse_previous_output(prev, False)
    refuse_previous_output(prev, True)
    (prev / "score.json").write_text("not json")
    with pytest.raises(HarnessError, match="an unreadable score"):
        refuse_previous_output(prev, False)


def test_cli_nightly_twice_into_one_out_is_refused_then_forced(tmp_path, golden_copy, capsys, monkeypatch):
    """The second nightly into the same --out exits 2 with one line before any work (no second run); with --force
    it replaces the set (a new score, the old run kept under runs/). --no-promote on the CLI leaves no ledger."""
    out = tmp_path / "n"
    args = (
        "nightly",
        "--golden",
        str(golden_copy),
        "--out",
        str(out),
        "--model",
        "small",
        "--shapes",
        "2",
        "--no-progress",
        "--no-localise",
        "--no-promote",
    )
    code, stdout, _ = harness_cli(capsys, monkeypatch, *args)
    assert code in (0, 1) and stdout.strip().splitlines()[-1].endswith(NOT_PROMOTED)
    assert ledger_files(golden_copy) == []
    first = json.loads((out / "score.json").read_text())
    code, stdout, err = harness_cli(capsys, monkeypatch, *args)
    assert code == 2 and stdout == ""
    (line,) = err.strip().splitlines()
    assert line == (
        f"harness: error: --out {out}: already holds a nightly's output (score.json of "
        f"{first['created']}); pass --force to replace it, or choose another folder"
    )
    assert len(list((out / "runs").iterdir())) == 1, "the refused nightly ran"
    code, _, err = harness_cli(capsys, monkeypatch, *args, "--force")
    assert code in (0, 1), err
    assert json.loads((out / "score.json").read_text())["run"]["id"] != first["run"]["id"]
    assert ledger_files(golden_copy) == []
