"""Margins over nights: the trend of each allowed shape's gated checks, its warning lines,
the report's "Margins" section, JUnit's properties and the nightly's summary and exit status.

Unit tests build HistoryRows by hand; the nightly tests run real nightlies around nights committed
with forged figures through the ledger's own transaction (``harness.ledger.ledger_store.commit``), so the
report and the exit status are the nightly's, read through the history store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import EXIT_FAIL, EXIT_PASS, ConfigError
from harness.data.schemas import SignoffReport
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, HistorySection, ModelSection
from harness.data.schemas.history import HistoryRow
from harness.ledger.history_store import Figures, margin_of
from harness.ledger.ledger_history import read_history
from harness.ledger.ledger_store import commit
from harness.ledger.margins import margins_view, trend
from harness.ledger.promotion import sealed_ledger
from harness.pipeline.nightly import nightly, with_warnings
from harness.pipeline.nightly_job import NightlyJob
from harness.release_config import load_config, parse_set, release_config
from reports.junit import write_junit
from reports.plots import MarginLine, margins_svg
from reports.signoff import ReportContext, write_report

BASE = {
    "created": "2026-12-01T00:00:00+00:00",
    "run_id": "r",
    "release": "rel",
    "golden_id": "rel@0123456789ab",
    "fingerprint": "f",
    "device_kind": "cpu",
    "numerics_profile": "np-1",
    "packer_identity": "harness/1",
    "limit": "max_abs",
    "ok": True,
    "verdict": "pass",
}


def row(
    seq: int,
    observed: float | None,
    allowed: float = 1e-4,
    *,
    shape: int = 4,
    op: int = 0,
    metric: str = "max_abs",
    **kw,
) -> HistoryRow:
    margin = margin_of(observed, "<=", allowed)
    return HistoryRow(
        **{
            **BASE,
            **kw,
            "seq": seq,
            "shape": shape,
            "op": op,
            "metric": metric,
            "observed": observed,
            "allowed": allowed,
            "margin": margin,
        }
    )


def nights(margins: list[float], allowed: float = 1e-4, **kw) -> list[HistoryRow]:
    return [row(i + 1, m * allowed, allowed, **kw) for i, m in enumerate(margins)]


CREEP = [0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.65, 0.80]
DEFAULTS = HistorySection()


# ---------------------------------------------------------------------------------------------
# The trend


def test_a_creeping_margin_warns_in_one_line_saying_how_far_and_how_near():
    view = margins_view(nights(CREEP), DEFAULTS)
    assert view.warnings == [
        "k=4 OP 0 max_abs: margin 0.02 -> 0.80 over 10 nights (x40, over the x4.0 allowed); "
        "0.80 of its limit (warned from 0.80)"
    ]
    (t,) = view.trends
    assert (t.first, t.max, t.shrank, t.near) == (pytest.approx(0.02), pytest.approx(0.8), True, True)


def test_growth_alone_and_nearness_alone_each_warn_and_say_only_their_part():
    grew = margins_view(nights([0.01, 0.02, 0.05]), DEFAULTS).warnings
    assert grew == ["k=4 OP 0 max_abs: margin 0.01 -> 0.05 over 3 nights (x5.0, over the x4.0 allowed)"]
    near = margins_view(nights([0.7, 0.85]), DEFAULTS).warnings
    assert near == ["k=4 OP 0 max_abs: margin 0.70 -> 0.85 over 2 nights (x1.2); 0.85 of its limit (warned from 0.80)"]


def test_only_the_last_nights_count_and_only_shapes_that_still_pass():
    """Negative controls of the window and of 'allowed shapes': a low first night outside the window, a
    shape failing on its last night, rows of another device kind are left out."""
    assert margins_view(nights([0.01, *[0.2] * 10]), DEFAULTS).warnings == []  # 0.01 is night 1 of 11
    assert margins_view(nights([0.01, *[0.2] * 10]), HistorySection(nights=11)).warnings != []
    failing = nights(CREEP[:-1]) + [row(10, 0.8e-4, verdict="fail")]
    assert margins_view(failing, DEFAULTS).trends == ()
    other = nights(CREEP, device_kind="NVIDIA H100")
    assert margins_view(other, DEFAULTS, device_kind="cpu").trends == ()
    assert margins_view(other, DEFAULTS, device_kind="NVIDIA H100").warnings != []


def test_undefined_margins_are_gaps_and_a_bitwise_start_has_no_growth():
    t = trend(4, 0, "max_abs", nights([0.0, 0.3, 0.5]), DEFAULTS)
    assert t.growth is None and not t.shrank and t.line is None  # 0 -> 0.5: no ratio to grow from
    rows = [row(1, None), row(2, 0.1e-4), row(3, 0.5e-4)]
    t = trend(4, 0, "max_abs", rows, DEFAULTS)
    assert t.first == pytest.approx(0.1) and t.growth == pytest.approx(5.0) and t.shrank
    assert [p.margin for p in t.points][0] is None


margin_values = st.floats(min_value=0.0, max_value=0.79, allow_nan=False)


@given(c=margin_values, n=st.integers(min_value=1, max_value=15))
def test_a_constant_series_under_near_limit_never_warns(c, n):
    view = margins_view(nights([c] * n), DEFAULTS)
    assert view.warnings == [] and not any(t.shrank for t in view.trends)


@given(c=st.floats(min_value=0.0, max_value=5.0, allow_nan=False), n=st.integers(min_value=1, max_value=15))
def test_a_constant_series_never_shrinks(c, n):
    assert not any(t.shrank for t in margins_view(nights([c] * n), DEFAULTS).trends)


@given(st.lists(margin_values, min_size=1, max_size=DEFAULTS.nights))
def test_a_series_under_near_limit_growing_no_more_than_the_factor_never_warns(ms):
    first = ms[0]  # (a window of at most ``nights`` nights: all of it counts)
    if first > 0 and ms[-1] / first > DEFAULTS.shrink_factor:
        ms = [*ms[:-1], min(first * DEFAULTS.shrink_factor, 0.79)]  # growth at most the factor: allowed
    assert margins_view(nights(ms), DEFAULTS).warnings == []


@given(
    st.lists(st.floats(min_value=0.0, max_value=2.0, allow_nan=False), min_size=1, max_size=12),
    st.floats(min_value=1e-3, max_value=1e3),
)
def test_scaling_observed_and_allowed_together_leaves_the_margins_unchanged(ms, scale):
    base = margins_view(nights(ms, 1e-4), DEFAULTS)
    scaled = margins_view(nights(ms, 1e-4 * scale), DEFAULTS)
    assert [p.margin for p in scaled.trends[0].points] == pytest.approx([p.margin for p in base.trends[0].points])
    assert [t.shrank or t.near for t in scaled.trends] == [t.shrank or t.near for t in base.trends]


def test_the_history_table_is_validated_and_settable_from_the_command_line():
    cfg = load_config(None, [parse_set("history.fail_on_warning=true"), parse_set("history.nights=5")])
    assert cfg.history.fail_on_warning is True and cfg.history.nights == 5
    for bad, what in (
        ("history.shrink_factor=0.5", "shrink_factor"),
        ("history.near_limit=1.5", "near_limit"),
        ("history.nigths=3", "nigths"),
    ):
        with pytest.raises(ConfigError, match=what):
            load_config(None, [parse_set(bad)])


# ---------------------------------------------------------------------------------------------
# Rendering


def test_the_plot_draws_one_line_per_series_and_the_warned_one_red():
    svg = margins_svg(
        0,
        [
            MarginLine("k=4 max_abs", tuple((i, m) for i, m in enumerate(CREEP)), True),
            MarginLine("k=2 max_abs", ((0, 0.1), (1, None), (2, 0.1)), False),
        ],
        0.8,
    )
    assert svg.count("<polyline") == 2 and 'stroke="#cf222e" stroke-width="1.5"' in svg
    assert "WARNING k=4 max_abs" in svg and "k=2 max_abs" in svg and "url(" not in svg


def test_the_summary_lists_warnings_before_it_and_fails_only_with_fail_on_warning():
    view = margins_view(nights(CREEP), DEFAULTS)
    line = "PASS: 2 shapes promoted (k=2,4), golden reproduced bitwise"
    text, code = with_warnings(line, EXIT_PASS, view.warnings, False)
    assert code == EXIT_PASS and text.splitlines() == [f"warning: {view.warnings[0]}", line]
    text, code = with_warnings(line, EXIT_PASS, view.warnings, True)
    assert code == EXIT_FAIL and text.splitlines()[-1] == (
        "FAIL: the verdicts held (2 shapes promoted (k=2,4), golden reproduced bitwise) but 1 warning "
        "failed the nightly (history.fail_on_warning = true)"
    )
    steady = margins_view(nights([0.1] * 10), DEFAULTS)
    assert with_warnings(line, EXIT_PASS, steady.warnings, True) == (line, EXIT_PASS)
    assert with_warnings("FAIL: x", EXIT_FAIL, view.warnings, True)[1] == EXIT_FAIL  # a failed verdict stays the reason


# ---------------------------------------------------------------------------------------------
# Ten nights through the nightly


def _config(**history) -> ConfigFile:
    # one arrangement (CI time): the margins' history is the subject, not the arrangements' evidence
    return release_config(
        name="small-rel",
        model=ModelSection(spec="small"),
        candidates=(2, 4),
        history=HistorySection(**history),
        evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False),
    )


def _forge_nights(ledger: Path, manifest: Path, template: list[HistoryRow], margins: list[float | None]) -> None:
    """Commit one ledger commit per margin, as a night of its own would: every entry gets an event of that
    commit (its last event again, of a run and score of that night), and the commit carries ``template``'s rows
    of that run with k=4 OP 0 flip_rate_upper95 at that margin (None: the template's own). The history store
    binds a commit's figures to its events (a part of another run is refused), so the nights are forged whole."""
    for night, m in enumerate(margins, start=2):
        run_id, digest = f"{template[0].run_id}.night{night}", f"{night:064x}"

        def update(book, run_id=run_id, digest=digest):
            seq = book.seq + 1
            entries = {
                key: e.model_copy(
                    update={
                        "history": [
                            *e.history,
                            e.history[-1].model_copy(update={"seq": seq, "run_id": run_id, "score_digest": digest}),
                        ]
                    }
                )
                for key, e in book.entries.items()
            }
            return sealed_ledger(seq, book.updated, entries), None

        def rows(seq, m=m, run_id=run_id, digest=digest):
            out = []
            for r in template:
                change = {"seq": seq, "run_id": run_id}
                if m is not None and (r.shape, r.op, r.metric) == (4, 0, "flip_rate_upper95"):
                    assert r.allowed is not None
                    change |= {"observed": m * r.allowed, "margin": m}
                out.append(r.model_copy(update=change))
            return Figures(out, digest)

        commit(ledger, manifest, {"0": [1], "1": [1], "2": [1]}, update, rows)


def _junit_props(path: Path) -> dict[str, str]:
    root = ET.parse(path).getroot()
    return {p.get("name", ""): p.get("value", "") for p in root.iter("property")}


def test_ten_nights_of_a_shrinking_margin_warn_in_report_junit_and_summary(tmp_path, golden_copy, backend):
    first = nightly(NightlyJob(_config(), golden_copy, tmp_path / "n1", progress=False, localise=False), backend)
    assert first.exit_code == EXIT_PASS, first.summary
    ledger, manifest = first.paths["ledger"], first.paths["promoted"]
    template = read_history(ledger)
    real = next(r.margin for r in template if (r.shape, r.op, r.metric) == (4, 0, "flip_rate_upper95"))
    assert real is not None and real > 0.3  # 12 blocks: the upper bound alone uses a good part of the limit
    creep = [real / 40 * (1 + 3 * i / 8) for i in range(9)]  # nights 2..10: x4 over nine nights
    _forge_nights(ledger, manifest, template, creep)

    night = nightly(NightlyJob(_config(), golden_copy, tmp_path / "n11", progress=False, localise=False), backend)
    lines = night.summary.splitlines()
    assert night.exit_code == EXIT_PASS and lines[-1].startswith("PASS:"), night.summary  # warned, not failed
    # the small networks' packed voiceprints drift from the golden by a few ULPs here: those warn as kind golden
    # (evidence), the margin's own line is the one of this subject
    warning = [w for w in lines if w.startswith("warning: ") and ": margin " in w]
    assert len(warning) == 1 and warning[0].startswith("warning: k=4 OP 0 flip_rate_upper95: margin ")
    assert all(" golden: " in w for w in lines if w.startswith("warning: ") and w not in warning)
    assert re.search(r"over 10 nights \(x\d+, over the x4\.0 allowed\)$", warning[0]), warning[0]
    md = night.paths["md"].read_text()
    html = night.paths["html"].read_text()
    assert "## Margins over the last 10 nights" in md and warning[0] in md
    facts = SignoffReport.model_validate(json.loads(night.paths["json"].read_text()))  # report.json's schema
    assert facts.margins is not None
    assert 'id="margins-plot-0"' in html and warning[0].replace(">", "&gt;") in html
    props = _junit_props(night.paths["junit"])
    assert props["margin_warning_k4_op0_flip_rate_upper95"] == warning[0].removeprefix("warning: ")
    assert (tmp_path / "n11" / "summary.txt").read_text().strip() == night.summary

    # the same through the command line, the key set with --set (no flag of its own): exit 1, said last
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "nightly",
        "--golden",
        str(golden_copy),
        "--out",
        str(tmp_path / "n12"),
        "--model",
        "small",
        "--set",
        "shapes.candidates=[2, 4]",
        "--set",
        "history.fail_on_warning=true",
        "--no-progress",
        "--no-localise",
    ]
    failed = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=600
    )
    out = failed.stdout.strip().splitlines()
    assert failed.returncode == EXIT_FAIL, failed.stdout + failed.stderr
    assert out[-1].startswith("FAIL: the verdicts held (2 shapes promoted (k=2,4)") and out[-1].endswith(
        (
            "warning failed the nightly (history.fail_on_warning = true)",
            "warnings failed the nightly (history.fail_on_warning = true)",
        )
    ), out
    assert out[-2].startswith("warning: k=4 OP 0 flip_rate_upper95: margin "), out


def test_ten_steady_nights_raise_no_warning(tmp_path, golden_copy, backend):
    first = nightly(NightlyJob(_config(), golden_copy, tmp_path / "n1", progress=False, localise=False), backend)
    ledger, manifest = first.paths["ledger"], first.paths["promoted"]
    _forge_nights(ledger, manifest, read_history(ledger), [None] * 8)
    night = nightly(
        NightlyJob(_config(fail_on_warning=True), golden_copy, tmp_path / "n10", progress=False, localise=False),
        backend,
    )
    # no margin warns; any other warning is the evidence's own (the packed voiceprints' drift from the golden, kind
    # golden), which fail_on_warning fails too
    warned = [w for w in night.summary.splitlines() if w.startswith("warning: ")]
    assert not [w for w in warned if ": margin " in w], night.summary
    assert all(" golden: " in w for w in warned), night.summary
    assert night.exit_code == (EXIT_FAIL if warned else EXIT_PASS), night.summary
    md = night.paths["md"].read_text()
    assert "## Margins over the last 10 nights" in md and "- no margin warning" in md
    assert not [k for k in _junit_props(night.paths["junit"]) if k.startswith("margin_warning")]


def test_a_report_without_a_history_has_no_margins_section(tmp_path, golden_copy, backend):
    """--no-promote reads no ledger, so no history: the report has no margins section."""
    night = nightly(
        NightlyJob(_config(), golden_copy, tmp_path / "o", progress=False, localise=False, no_promote=True), backend
    )
    assert "Margins" not in night.paths["md"].read_text() and "margins" not in night.paths["json"].read_text()
    write_report(tmp_path / "r", night.score, ReportContext(margins=margins_view(nights(CREEP), DEFAULTS)))
    write_junit(tmp_path / "j.xml", night.score, None, margins_view(nights(CREEP), DEFAULTS))
    assert "warning: k=4 OP 0 max_abs" in (tmp_path / "r" / "report.md").read_text()
    assert "margin_warning_k4_op0_max_abs" in _junit_props(tmp_path / "j.xml")
