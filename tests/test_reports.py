"""The release sign-off report, on scores made by the real pipeline with the small model.

Made once per module, all real:

- ``passing``: the small model, shapes 2 and 4, default tolerances: every shape passes;
- ``revoking``: a second run of the same model scored with a flip-rate allowance the corpus
  cannot bound (OP 0 fails by the 3/n rule, OP 1/2 pass), applied to a ledger where the
  first run promoted both shapes: both are revoked by the second run;
- ``bitwise``: the passing run scored in bitwise mode (passes: one thread is bitwise here);
- ``drift`` / ``not_bitwise``: the ``count_dependent`` control (same weights, +1e-6 x windows
  per call on every output): verifying the small golden with it fails golden reproduction,
  and its own packed shapes fail in bitwise mode;
- ``leaky``: the ``leaky`` negative control with its failing shape localised.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from markupsafe import escape

from golden.store import Golden
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import ConfigFile, EvidenceSection
from harness.data.schemas.results import Score
from harness.data.tolerances import SegmentationTolerance, Tolerances
from harness.ledger.promotion import apply_score, empty_ledger
from harness.pipeline.localise import localise_failures
from harness.pipeline.record import record_golden, verify_golden
from harness.pipeline.score import score_run
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model
from reports import ReportContext, write_report
from reports.plots import SpeedPoint, error_distribution_svg, speedup_svg
from reports.signoff import build_facts
from tests.pipeline import record, run_shapes

SHAPES = (2, 4)
# One thread: these tests are about reports, not numerics, and a 2-core CI runner shared with other
# jobs makes torch's default (one thread per core) spin-wait: 40x slower under load.
NUMERICS = NumericSettings(threads=1)
CONFIG = release_config(numerics=NUMERICS)
LEAN = CONFIG.with_overrides(
    evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False)
)  # CI time: the passing run alone has them
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RELEASE = {"0": [1], "1": [1], "2": [1]}


def _run(backend, golden: Golden, tmp: Path, config: ConfigFile = LEAN):
    return run_shapes(backend, golden, tmp, SHAPES, config)


def _apply(ledger, score: Score):
    return apply_score(ledger, score, score.run.created, RELEASE)


def _edited(score: Score, edit: Callable[[dict[str, Any]], object]) -> Score:
    """A copy of ``score`` changed by ``edit`` on its JSON, validated again (a frozen model is never edited in
    place; the digest is not re-sealed: reports do not check it)."""
    data = score.model_dump(mode="json")
    edit(data)
    return Score.model_validate(data)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict:
    """Passing and revoking scores of the small model, their ledgers and transitions, a drift."""
    tmp = tmp_path_factory.mktemp("small")
    backend, corpus, golden = record("small", tmp, numerics=NUMERICS, config=CONFIG)
    run = _run(backend, golden, tmp, CONFIG)  # the default arrangements: their report section and plot
    passing = score_run(golden, run, Tolerances())
    bitwise = score_run(golden, run, Tolerances().with_mode("bitwise"))
    strict = Tolerances(op0=SegmentationTolerance(max_flip_rate=1e-6))  # needs 3e6 frames at zero flips
    revoking = score_run(golden, _run(backend, golden, tmp), strict)
    promoted, _ = _apply(empty_ledger(), passing)
    ledger, transitions = _apply(promoted, revoking)
    control = InProcessBackend(load_model("lanes.controls:count_dependent"), NUMERICS)
    drift = verify_golden(golden, control, CONFIG)
    control_golden, _ = record_golden(tmp / "control-goldens", "rel", corpus.rows(), control, CONFIG)
    not_bitwise = score_run(control_golden, _run(control, control_golden, tmp), Tolerances().with_mode("bitwise"))
    # bitwise by construction on every CPU (the small model is not everywhere: MKL's small-M paths on AVX-512)
    invariant = InProcessBackend(load_model("lanes.controls:invariant"), NUMERICS)
    invariant_golden, _ = record_golden(tmp / "invariant-goldens", "rel", corpus.rows(), invariant, CONFIG)
    invariant_bitwise = score_run(
        invariant_golden, _run(invariant, invariant_golden, tmp), Tolerances().with_mode("bitwise")
    )
    return {
        "passing": passing,
        "bitwise": bitwise,
        "not_bitwise": not_bitwise,
        "revoking": revoking,
        "invariant_bitwise": invariant_bitwise,
        "promoted_ledger": promoted,
        "ledger": ledger,
        "transitions": transitions,
        "drift": drift,
    }


@pytest.fixture(scope="module")
def passing(small) -> dict:
    return small["passing"]


@pytest.fixture(scope="module")
def leaky(tmp_path_factory) -> tuple[dict, dict]:
    """The leaky control's score and the localisation of its failing shapes."""
    tmp = tmp_path_factory.mktemp("leaky")
    backend, corpus, golden = record("lanes.controls:leaky", tmp, numerics=NUMERICS, config=CONFIG)
    run = _run(backend, golden, tmp)
    score = score_run(golden, run, Tolerances())
    return score, localise_failures(score, golden, run, lambda: backend.model)


def _written(tmp_path: Path, score: dict, **kwargs) -> tuple[dict, str, str, dict]:
    paths = write_report(tmp_path / "report", score, ReportContext(**kwargs))
    assert set(paths) == {"html", "md", "json"}
    assert all(p.is_file() and p.parent == tmp_path / "report" for p in paths.values())
    return (json.loads(paths["json"].read_text()), paths["md"].read_text(), paths["html"].read_text(), paths)


@pytest.fixture(scope="module")
def passing_report(tmp_path_factory, passing) -> tuple[dict, str, str, dict]:
    """The passing score's report, written once: (facts, markdown, html, paths)."""
    return _written(tmp_path_factory.mktemp("passing-report"), passing)


@pytest.fixture(scope="module")
def leaky_report(tmp_path_factory, leaky) -> tuple[dict, str, str, dict]:
    score, localisation = leaky
    return _written(tmp_path_factory.mktemp("leaky-report"), score, localisation=localisation)


# ---------------------------------------------------------------------------------------------
# Files and facts


def test_writes_html_md_json_with_the_scores_verdicts(passing, passing_report):
    facts, md, page, paths = passing_report
    assert json.loads(json.dumps(facts)) == facts  # round-trips
    assert facts["kind"] == "harness.signoff"
    assert facts["release"] == passing.release and facts["fingerprint"] == passing.fingerprint
    assert set(facts["shapes"]) == set(passing.shapes)
    for k, shape in passing.shapes.items():
        got = facts["shapes"][k]
        assert got["verdict"] == shape.verdict == "pass"
        assert got["reasons"] == shape.reasons
        for op, verdict in shape.ops.items():
            assert got["ops"][op]["passed"] == verdict.passed
            # the gate's rows, rendered as they are
            assert got["ops"][op]["checks"] == [
                {**c.model_dump(mode="json"), "would_pass_at": c.would_pass_at} for c in verdict.checks
            ]
            assert got["ops"][op]["limits"] == verdict.limits
        assert got["speedup"] == passing.throughput[k]["speedup"]
    assert facts["decision"]["usable"] == [1, *SHAPES] and facts["decision"]["not_usable"] == []
    assert facts["environment"] == passing.environment.model_dump(mode="json")
    assert facts["numerics"] == passing.numerics.in_force
    assert facts["reproducibility"]["bitwise"] == passing.reproducibility.bitwise
    assert facts["golden_checks"][0]["passed"] is True
    assert page.startswith("<!DOCTYPE html>")


def test_the_page_opens_with_the_decision(passing_report):
    _, md, page, _ = passing_report
    body = page[page.index("<body") :]
    assert body.index('id="decision"') < body.index('id="summary"')
    decision = body[body.index('id="decision"') : body.index("</section>")]
    assert "may use" in decision and "k = 1, 2, 4" in decision
    first_text_line = next(line for line in md.splitlines()[1:] if line.strip())
    assert first_text_line == "**May use: k = 1, 2, 4. No candidate shape is refused.**"


def test_html_is_self_contained(passing, passing_report):
    _, _, page, _ = passing_report
    for forbidden in ("http://", "https://", "<script", "<link", "url(", "@import", "<iframe"):
        assert forbidden not in page, forbidden
    plots = re.findall(r'<svg class="plot"', page)
    spread = sum(not v.metrics["bitwise"] for s in passing.shapes.values() for v in s.ops.values())
    assert len(plots) == 1 + spread  # speedup + one distribution per OP and shape with a spread (bitwise: a line)
    assert "<img" not in page and "xmlns" not in page  # inline SVG: nothing to fetch, no namespace URL


def test_markdown_has_the_summary_table(passing, passing_report):
    _, md, _, _ = passing_report
    assert (
        "| k | verdict | may use | speedup | blocks/s | OP 0 max_abs | OP 1 min cosine | OP 2 min cosine "
        "| flips (near-tie / confident) | packing alone | ledger state |"
    ) in md
    for k in SHAPES:
        speedup = passing.throughput[str(k)]["speedup"]
        assert re.search(rf"^\| {k} \| PASS \| yes \| {speedup:.2f}×( \([^|]*\))? \|", md, re.MULTILINE), k
    assert re.search(r"^\| 1 \| release \| yes \| 1\.00× \|", md, re.MULTILINE)


def test_failing_score_shows_reasons_and_first_diverging_layer(leaky, leaky_report):
    leaky, localisation = leaky
    assert leaky.shapes["2"].verdict == "fail" and "2" in localisation
    facts, md, page, _ = leaky_report
    assert facts["verdict"] == "fail"
    assert facts["decision"]["usable"] == [1]
    failed = [int(k) for k, s in leaky.shapes.items() if s.verdict == "fail"]
    assert failed and facts["decision"]["not_usable"] == failed
    for k, shape in leaky.shapes.items():
        assert facts["shapes"][k]["verdict"] == shape.verdict
        for reason in shape.reasons:
            assert str(escape(reason)) in page
            assert reason.replace("|", "\\|") in md
    layers = {op: loc["first_diverging_layer"] for op, loc in localisation["2"].items() if loc.get("available")}
    assert layers and all(layers.values())
    for op, layer in layers.items():
        assert facts["shapes"]["2"]["localisation"][op]["first_diverging_layer"] == layer
        assert f'<code class="first-layer">{html.escape(layer)}</code>' in page
        assert f"- k = 2, OP {op}: first diverging layer `{layer}`" in md


def test_revoked_shapes_name_the_run_that_revoked_them(tmp_path, small):
    first, score = small["passing"], small["revoking"]
    ledger, transitions = small["ledger"], small["transitions"]
    assert [(t.before, t.after) for t in transitions] == [("promoted", "revoked")] * len(SHAPES)
    facts, md, page, _ = _written(tmp_path, score, ledger=ledger, transitions=transitions)
    run = score.run.id
    for k in SHAPES:
        s = facts["shapes"][str(k)]
        assert (s["ledger_state"], s["revoked_by"], s["usable"]) == ("revoked", run, False)
        assert s["why"].startswith(f"revoked by run {run}: refused (not judged at its size): OP 0 flip_rate")
        assert re.search(rf"^\| {k} \| FAIL \| no \| .* \| revoked \(by run `{run}`\) \|$", md, re.MULTILINE)
        transition_row = rf"^\| {k} \| promoted \| \*\*revoked\*\* \| `{run}` \| OP 0 flip_rate"
        assert re.search(transition_row, md, re.MULTILINE)
        row = next(r for r in facts["ledger"] if r["shape"] == k)
        assert (row["promoted_by"], row["revoked_by"]) == (first.run.id, run)
    assert facts["decision"]["usable"] == [1] and facts["decision"]["not_usable"] == list(SHAPES)
    assert f"revoked by run {run}" in page
    # OP 0 fails, OP 1/2 pass: the per-OP verdicts are the score's, not the shape's
    assert [facts["shapes"]["2"]["ops"][op]["passed"] for op in ("0", "1", "2")] == [False, True, True]


def _stampless(path: Path) -> str:
    """A page's text without the time it was generated (the one thing two renders of a score may differ in)."""
    return re.sub(r'generated[ ":]+[0-9T:+.-]+', "generated", path.read_text())


def test_a_score_read_back_renders_as_the_one_in_memory(tmp_path, small):
    """The pages and JUnit of a score are the same bytes whether the score comes from ``score_run`` (the
    nightly) or is read back from its score.json (``harness report``): the reports read one model, whose order
    is its own. Before: they read a dict, in the producer's key order in memory but in sorted order once read
    back, and the JUnit's request properties of every OP case came out in another order."""
    from harness.ledger.score_check import read_score
    from harness.pipeline.score import write_score
    from reports import write_junit

    score, ledger = small["passing"], small["promoted_ledger"]
    back = read_score(write_score(tmp_path / "score.json", score))
    for name, doc in (("memory", score), ("file", back)):
        write_report(tmp_path / name, doc, ReportContext(ledger=ledger))
        write_junit(tmp_path / name / "junit.xml", doc, None)
    for page in ("report.json", "report.md", "report.html", "junit.xml"):
        memory, file = _stampless(tmp_path / "memory" / page), _stampless(tmp_path / "file" / page)
        assert memory == file, f"{page}: differs when the score is read back from its file"
    assert "requests_needed_blocks" in memory


def test_ledger_promotions_from_earlier_runs_are_usable(tmp_path, small):
    """A shape promoted by an earlier run and not scored now stays usable, and says so."""
    score = _edited(small["passing"], lambda s: s["shapes"].pop("4"))
    facts = build_facts(score, small["promoted_ledger"])
    assert facts["decision"]["usable"] == [1, 2, 4]
    assert facts["shapes"]["4"]["verdict"] == "not scored"
    why = f"promoted by run {small['passing'].run.id}; not scored in this run"
    assert facts["shapes"]["4"]["why"] == why


def test_failed_golden_verification_blocks_every_shape(tmp_path, small):
    drift = small["drift"]
    assert (drift.status, drift.passed) == ("drift", False)
    facts, md, page, _ = _written(tmp_path, small["passing"], verification=drift)
    assert facts["decision"]["usable"] == [1] and facts["verdict"] == "fail"
    assert [g["passed"] for g in facts["golden_checks"]] == [True, False]
    summary = facts["golden_checks"][1]["summary"]
    assert summary == drift.summary and html.escape(summary) in page
    assert "no packed shape may be used" in facts["shapes"]["2"]["why"]
    # the golden's failure is the headline, first on the page and in the Markdown
    assert facts["headline"].startswith("The golden is NOT reproduced") and summary in facts["headline"]
    assert page.index('id="headline"') < page.index('id="decision"')
    assert md.split("\n")[2].startswith("> **The golden is NOT reproduced")


def test_checks_agree_with_the_gates_verdicts(small, leaky):
    """The ✔/✘ rows are derived here; they must never contradict the gate, in any mode."""
    assert small["not_bitwise"].verdict == "fail" and small["invariant_bitwise"].verdict == "pass"
    for name in ("passing", "bitwise", "invariant_bitwise", "not_bitwise", "revoking", "leaky"):
        score = leaky[0] if name == "leaky" else small[name]
        facts = build_facts(score)
        for k, shape in score.shapes.items():
            for op, verdict in shape.ops.items():
                checks = facts["shapes"][k]["ops"][op]["checks"]
                failed = [c["metric"] for c in checks if c["ok"] is False]
                assert bool(failed) != verdict.passed, (name, k, op, failed, verdict.reasons)
    modes = {c["metric"] for c in build_facts(small["bitwise"])["shapes"]["2"]["ops"]["1"]["checks"]}
    assert "differing_rows" in modes and "min_cosine" not in modes


def test_renders_a_single_shape_without_timing(tmp_path, passing):
    """No ledger, no timing, a single shape, no distribution sample."""

    def edit(score: dict[str, Any]) -> None:
        score["throughput"] = {}
        del score["shapes"]["4"]
        for verdict in score["shapes"]["2"]["ops"].values():
            verdict["distribution"] = []

    facts, md, page, _ = _written(tmp_path, _edited(passing, edit))
    assert list(facts["shapes"]) == ["2"] and facts["shapes"]["2"]["speedup"] is None
    assert "No timing in this score." in page
    assert "| 2 | PASS | yes | — | — |" in md


def test_report_json_has_no_distribution_dump(leaky, leaky_report):
    facts, _, _, paths = leaky_report
    dist = facts["shapes"]["2"]["ops"]["0"]["distribution"]
    values = [v for v in leaky[0].shapes["2"].ops["0"].distribution if v is not None]
    assert dist["n"] == len(values) and dist["zero"] == sum(v == 0.0 for v in values)
    assert dist["max"] == max(values)
    assert paths["json"].stat().st_size < 200_000


# ---------------------------------------------------------------------------------------------
# What to do next, and numbers that read as what they are


def _junit_next(tmp_path: Path, score: dict) -> dict[tuple[str, str], list[str]]:
    """The 'next: ...' lines of every failing OP case of the JUnit file of ``score``."""
    from reports import write_junit

    root = ET.parse(write_junit(tmp_path / "junit.xml", score, None)).getroot()
    out = {}
    for case in root.iter("testcase"):
        failure = case.find("failure")
        if case.get("name", "").startswith("op") and failure is not None:
            out[(case.get("classname")[len("shape_k") :], case.get("name")[2:])] = [
                line for line in (failure.text or "").splitlines() if line.startswith("next: ")
            ]
    return out


def test_failing_ops_carry_junits_next_step_on_both_pages(tmp_path, leaky):
    """Before: only JUnit said "next: localise ... or record a new golden"; the pages said nothing."""
    score, _ = leaky
    expected = _junit_next(tmp_path, score)
    assert expected and all(expected.values())
    facts, md, page, _ = _written(tmp_path, score)  # no localisation: the hints are the next step
    for (k, op), lines in expected.items():
        assert facts["shapes"][k]["ops"][op]["next"] == lines
        for line in lines:
            assert f"- OP {op} {line}".replace("|", "\\|") in md
            assert f"<li>{escape(line)}</li>" in page
        assert f'id="next-{k}-{op}"' in page
    passed = [(k, op) for k, s in score.shapes.items() for op, v in s.ops.items() if v.passed]
    assert all(not facts["shapes"][k]["ops"][op]["next"] for k, op in passed)


def test_localised_ops_say_what_localisation_found_instead(tmp_path, leaky, leaky_report):
    score, localisation = leaky
    facts, md, page, _ = leaky_report
    for (k, op), junit_lines in _junit_next(tmp_path, score).items():
        loc = localisation.get(k, {}).get(op)
        steps = facts["shapes"][k]["ops"][op]["next"]
        if not (loc and loc.get("available")):
            assert steps[: len(junit_lines)] == junit_lines
            continue
        assert any("localise the first diverging layer" in line for line in junit_lines)  # JUnit still says it
        assert not any("localise the first diverging layer" in line for line in steps), steps
        assert steps[0].startswith("next: localisation found")
        if "<input" in (loc["first_diverging_layer"] or ""):  # the leak: found at the network's input
            assert "packing or window-cutting bug, not numerics" in steps[0]
            assert loc["block"] in steps[0]
        assert str(escape(steps[0])) in page


def test_a_bitwise_op_is_one_line_not_a_histogram(small):
    """Before: a histogram of nothing but zeros for every bitwise OP (six on an all-bitwise page)."""
    facts, md, page, _ = _written_once(small["invariant_bitwise"])
    for k, shape in facts["shapes"].items():
        for op, o in shape["ops"].items():
            unit, n = ("windows", o["metrics"]["windows"]) if op == "0" else ("rows", o["metrics"]["judged_rows"])
            line = f"bitwise: {n:,} of {n:,} {unit} identical"
            assert o["bitwise_line"] == line and f'id="bitwise-{k}-{op}">{line}</p>' in page
            assert f"- OP {op} {line}" in md
    assert len(re.findall(r'<svg class="plot"', page)) == 1  # the speedup plot alone
    # where there is a spread the histogram stays: the call-size-dependent control (+1e-6 x windows), not the
    # small model's passing run, which is bitwise on some CPUs (an AVX2 EPYC) and not on others (AVX-512)
    facts, _, page, _ = _written_once(small["not_bitwise"])
    spread = [(k, op) for k, s in facts["shapes"].items() for op, o in s["ops"].items() if not o["metrics"]["bitwise"]]
    assert spread
    for k, op in spread:
        assert facts["shapes"][k]["ops"][op]["bitwise_line"] is None
        assert f'aria-label="OP {op} error distribution for k={k}"' in page


_WRITTEN: dict[int, tuple] = {}


def _written_once(score: dict) -> tuple[dict, str, str, dict]:
    if id(score) not in _WRITTEN:
        _WRITTEN[id(score)] = _written(Path(tempfile.mkdtemp(prefix="report-")), score)
    return _WRITTEN[id(score)]


def _section(page: str, section: str) -> str:
    start = page.index(f'<section id="{section}"')
    return page[start : page.index("</section>", start)]


def test_latencies_and_fractions_read_in_units(tmp_path, passing, leaky_report):
    """Before: '1.017e+04' ms, '0.000183' for a rate, '0.01278' for a fraction of values."""

    def edit(score: dict[str, Any]) -> None:
        lane = score["throughput"]["2"]
        lane["blocks_per_s"], lane["ops"]["1"]["p50_ms"], lane["ops"]["1"]["p99_ms"] = 12345.6, 10170.0, 36940.0
        lane["ops"]["0"]["p50_ms"] = 0.42

    facts, md, page, _ = _written(tmp_path, _edited(passing, edit))
    throughput = _section(page, "throughput")
    assert "10.2 s / 36.9 s" in throughput and "0.42 ms" in throughput and "12346" in throughput
    md_throughput = md[md.index("## Throughput") : md.index("## Golden")]
    assert "10.2 s / 36.9 s" in md_throughput
    scientific = re.compile(r"\d[eE][+-]?\d")
    assert not scientific.search(throughput) and not scientific.search(md_throughput)
    rate = next(c for c in passing.shapes["2"].ops["0"].checks if c.metric == "flip_rate_upper95")
    row = next(line for line in md.splitlines() if line.startswith("| 0 | flip_rate_upper95 |"))
    assert f"| {100 * rate.observed:.2g} % | <= {100 * rate.allowed:g} % |" in row, row
    _, md, page, _ = leaky_report  # the localisation's fraction of values that differ
    cells = re.findall(r'<td class="num">([^<]*)</td></tr>', _section(page, "localisation"))
    assert cells and all(c.endswith(" %") for c in cells), cells
    assert re.search(r"of values differ", md) and not re.search(r", 0\.\d+ of values differ", md)


def test_a_usable_shape_slower_than_k1_says_so(tmp_path, small):
    """Before: a promoted shape at 0.8x the speed of k=1 was shown green, without a word."""

    def edit(score: dict[str, Any]) -> None:
        score["throughput"]["4"].update(speedup=0.8, speedup_interval=[0.75, 0.85], within_noise=False, repetitions=12)
        score["throughput"]["2"].update(speedup=1.3, within_noise=False)  # measured speeds vary on a loaded runner

    facts, md, page, _ = _written(tmp_path, _edited(small["passing"], edit), ledger=small["promoted_ledger"])
    note = (
        "promoted: matches the golden, but 0.80× the speed of k=1 on this device (95 % interval 0.75×–0.85×, "
        "12 full 4-block requests): the engine gains nothing from it here"
    )
    assert facts["shapes"]["4"]["usable"] and facts["shapes"]["4"]["slow_note"] == note
    assert facts["shapes"]["2"]["slow_note"] is None  # faster than k=1: nothing to say
    decision = _section(page, "decision")
    assert f'<span class="slow-note" id="slow-4">{note}</span>' in decision and 'id="slow-2"' not in decision
    assert f"- k = 4: may use: promoted by run {small['passing'].run.id}. **{note}**" in md


def test_cosines_never_read_1_when_the_rows_differ(tmp_path, small):
    """docs/report.md: never a misleading 1. Before: an exact float64 1.0 over differing rows printed '1'."""

    def edit(score: dict[str, Any]) -> None:
        for op in ("1", "2"):
            metrics = score["shapes"]["2"]["ops"][op]["metrics"]
            assert metrics["differing_rows"] > 0
            metrics["min_cosine"] = 1.0  # what a 1-ULP change gives in float64
        score["shapes"]["2"]["vs_exact"]["ops"]["1"].update(bitwise=False, min_cosine=1.0)
        score["shapes"]["4"]["ops"]["1"]["metrics"]["min_cosine"] = 0.99999994

    facts, md, page, _ = _written(tmp_path, _edited(small["not_bitwise"], edit))
    row = next(line for line in md.splitlines() if line.startswith("| 2 | FAIL"))
    assert row.count("1 − <1e-16 (not bit-identical)") == 3, row  # OP 1, OP 2 and OP 1's packing alone
    assert not re.search(r"\| 1 \|", row)
    row4 = next(line for line in md.splitlines() if line.startswith("| 4 | FAIL"))
    assert "| 1 − 6e-8 |" in row4, row4
    summary = _section(page, "summary")
    assert '<td class="num">1</td>' not in summary.replace('<td class="num">1</td><td><span class="badge other">', "")
    # identical rows: exactly 1, said as 1
    facts, md, _, _ = _written_once(small["invariant_bitwise"])
    row = next(line for line in md.splitlines() if line.startswith("| 2 | PASS"))
    assert "| 1 | 1 |" in row, row


# ---------------------------------------------------------------------------------------------
# Plots


def _svg(markup: str) -> ET.Element:
    assert markup.startswith('<svg class="plot"') and "http" not in markup
    return ET.fromstring(markup)  # well-formed


def test_distribution_plot_shows_zeros_and_survives_edge_cases():
    cases = (
        ([0.0] * 50, 0.0, "50 of 50"),
        ([0.0, 1e-7, 3e-5, 2.0, None], 1e-4, "1 of 5"),
        ([], None, "0 of 0"),
        ([5e-9], None, "0 of 1"),
    )
    for values, limit, zeros in cases:
        svg = _svg(error_distribution_svg(values, 1, 4, limit))
        texts = [t.text for t in svg.iter("text")]
        assert zeros in texts and "= 0" in texts
    over = _svg(error_distribution_svg([0.0, 1e-7, 3e-5, 2.0, None], 1e-4, 4, 1e-4))
    fills = {r.get("fill") for r in over.iter("rect")}
    assert "#cf222e" in fills and "#0969da" in fills  # over the limit in red, within in blue
    assert any("1 non-finite" in (t.text or "") for t in over.iter("text"))


def test_speedup_plot_adds_the_exact_lane():
    for points in (
        [SpeedPoint(2, 1.7, "pass")],
        [SpeedPoint(1, 1.0, "exact"), SpeedPoint(8, 0.4, "fail"), SpeedPoint(16, None, "not scored")],
    ):
        svg = _svg(speedup_svg(points))
        texts = [t.text for t in svg.iter("text")]
        assert "1.00x" in texts  # the exact lane, added when missing


# ---------------------------------------------------------------------------------------------
# Headless browser


PROBE = """<script>
window.addEventListener('load', function () {
  var plots = Array.prototype.slice.call(document.querySelectorAll('svg.plot'));
  var drawn = plots.filter(function (p) { var b = p.getBBox(); return b.width > 100 && b.height > 100; });
  document.body.setAttribute('data-plots', String(plots.length));
  document.body.setAttribute('data-drawn', String(drawn.length));
  document.body.setAttribute('data-tables', String(document.querySelectorAll('table').length));
  document.body.setAttribute('data-probe', 'done');
});
</script>
"""


def _chromium() -> str:
    """$CHROMIUM, else chromium on PATH, else /usr/bin/chromium; FAILS (never skips) when absent."""
    if os.environ.get("HARNESS_SKIP_BROWSER") == "1":
        pytest.skip("HARNESS_SKIP_BROWSER=1: headless-browser check skipped on request")
    candidate = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not (Path(candidate).is_file() and os.access(candidate, os.X_OK)):
        pytest.fail(
            f"headless Chromium not found at {candidate!r} ($CHROMIUM, else 'chromium' on PATH, else "
            "/usr/bin/chromium): install it with `apt-get install -y chromium` (Debian/Ubuntu) "
            "or point $CHROMIUM at a Chrome/Chromium binary; set HARNESS_SKIP_BROWSER=1 to skip "
            "this check deliberately"
        )
    return candidate


def _browse(binary: str, page: Path, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            *args,
            page.as_uri(),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-2000:]}"
    return done


class _BodyAttrs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str] = {}
        self.tables = 0

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.body = {k: v or "" for k, v in attrs}
        elif tag == "table":
            self.tables += 1


@pytest.mark.browser
def test_report_renders_in_headless_chromium(tmp_path, leaky, leaky_report):
    binary = _chromium()
    _, _, page, paths = leaky_report
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")

    dom = _browse(binary, probe, "--dump-dom").stdout
    parsed = _BodyAttrs()
    parsed.feed(dom)
    attrs = parsed.body
    assert attrs.get("data-probe") == "done", f"probe did not run; body attributes: {attrs}"
    expected_plots = len(re.findall(r'<svg class="plot[" ]', page))  # "plot arrangement-plot" too: svg.plot
    assert expected_plots >= 1 + 3 * len(leaky[0].shapes)
    assert int(attrs["data-plots"]) == expected_plots
    assert int(attrs["data-drawn"]) == expected_plots, "some plots were not laid out"
    assert int(attrs["data-tables"]) == parsed.tables >= 8
    assert 'id="summary-table"' in dom and 'id="decision"' in dom

    shot = tmp_path / "report.png"
    _browse(binary, paths["html"], f"--screenshot={shot}", "--window-size=1280,2000")
    data = shot.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=np.float64) / 255.0
    assert pixels.std() > 0.05, "the screenshot is blank"
    colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50, "the screenshot holds almost no detail"


def test_cached_templates_render_the_same_pages_and_compile_nothing(tmp_path, monkeypatch, small):
    """The templates' compiled code is kept on disk (reports.template_cache: compiling them was
    ~1 s of every nightly's finish). Cold (compiling, writing the cache) and warm (loading it) pages are the
    same as with the cache off; warm, nothing is compiled. A cache file cut short is compiled again."""
    import jinja2

    from reports import signoff

    compiled: list[str | None] = []
    real = jinja2.Environment.compile

    def counting(self, source, name=None, filename=None, raw=False, defer_init=False):
        compiled.append(name)
        return real(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    score, ledger = small["passing"], small["promoted_ledger"]
    pages: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for name, where in (("off", "off"), ("cold", str(tmp_path / "cache")), ("warm", str(tmp_path / "cache"))):
        monkeypatch.setenv("HARNESS_TEMPLATE_CACHE", where)
        signoff.template_environments.cache_clear()  # as a new process starts
        before = len(compiled)
        write_report(tmp_path / name, score, ReportContext(ledger=ledger))
        counts[name] = len(compiled) - before
        pages[name] = [_stampless(tmp_path / name / p) for p in ("report.json", "report.md", "report.html")]
    assert pages["cold"] == pages["off"] and pages["warm"] == pages["off"]
    assert counts["off"] >= 2 and counts["cold"] == counts["off"], counts
    assert counts["warm"] == 0, (
        f"a warm template cache still compiled {counts['warm']} of {counts['off']} templates; expected 0 "
        "(reports.template_cache: jinja2's bytecode cache under HARNESS_TEMPLATE_CACHE)"
    )
    cached = sorted((tmp_path / "cache").rglob("*.cache"))
    assert len(cached) == counts["off"]
    cached[0].write_bytes(cached[0].read_bytes()[:20])  # cut short: compiled again, the same page
    signoff.template_environments.cache_clear()
    write_report(tmp_path / "cut", score, ReportContext(ledger=ledger))
    assert [_stampless(tmp_path / "cut" / p) for p in ("report.json", "report.md", "report.html")] == pages["off"]
    signoff.template_environments.cache_clear()
