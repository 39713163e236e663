"""The sign-off report's "Margins" section and JUnit's margin properties, from a margins view.

The trends are computed in the core (:func:`harness.ledger.margins.margins_view`, from the history store
beside the ledger); here they are only rendered: the facts report.json and the pages read, a plot
per OP of margin against night, and one JUnit property per warning line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from markupsafe import Markup

from harness.ledger.margins import MarginPoint, MarginsView, MarginTrend
from reports.plots import MarginLine, margins_svg


@dataclass(frozen=True)
class MarginSettings:
    """The [history] settings in force, as the section states them."""

    nights: int
    shrink_factor: float
    near_limit: float
    fail_on_warning: bool


@dataclass(frozen=True)
class TrendRow:
    """One series (shape, OP, metric) over the nights: its margins, how they moved, and its warning line."""

    shape: int
    op: int
    metric: str
    first: float | None
    last: float | None
    max: float | None
    growth: float | None
    shrank: bool
    near: bool
    warning: str | None
    points: list[MarginPoint]


@dataclass(frozen=True)
class MarginFacts:
    """The section (report.json's ``margins``): the settings in force, the window, the trends and the warnings."""

    nights: int
    first_night: bool
    settings: MarginSettings
    warnings: list[str]
    ops: list[int]
    trends: list[TrendRow]
    undefined_series: int


def margin_facts(view: MarginsView) -> MarginFacts:
    """The section: the settings in force, the window, the trends and the warning lines.

    A trend needs two nights: on the first (``first_night``) the table and plots would be a column of "—"
    per series, so the pages say so in one line instead (tonight's margins are in each shape's checks, and a
    margin already near its limit still warns). A series with no defined margin on any night (a limit of 0
    has no ratio) is counted, not listed (``undefined_series``)."""
    s = view.settings
    shown = _shown(view)
    return MarginFacts(
        nights=view.nights,
        first_night=view.nights < 2,
        settings=MarginSettings(
            nights=s.nights,
            shrink_factor=s.shrink_factor,
            near_limit=s.near_limit,
            fail_on_warning=s.fail_on_warning,
        ),
        warnings=view.warnings,
        ops=sorted({t.op for t in shown}),
        trends=[_trend_facts(t) for t in shown],
        undefined_series=sum(1 for t in view.trends if t.first is None),
    )


def _shown(view: MarginsView) -> list[MarginTrend]:
    """The series worth a row and a line: from the second night on, those with a defined margin."""
    return [t for t in view.trends if t.first is not None] if view.nights >= 2 else []


def _trend_facts(t: MarginTrend) -> TrendRow:
    return TrendRow(
        shape=t.shape,
        op=t.op,
        metric=t.metric,
        first=t.first,
        last=t.last,
        max=t.max,
        growth=t.growth,
        shrank=t.shrank,
        near=t.near,
        warning=t.line,
        points=list(t.points),
    )


def margin_images(view: MarginsView) -> dict[str, Markup]:
    """One inline SVG per OP with a trend shown: "margins_<op>" (none on a first night)."""
    images = {}
    shown = _shown(view)
    for op in sorted({t.op for t in shown}):
        lines = [
            MarginLine(f"k={t.shape} {t.metric}", tuple((p.seq, p.margin) for p in t.points), t.warns)
            for t in shown
            if t.op == op
        ]
        images[f"margins_{op}"] = Markup(margins_svg(op, lines, view.settings.near_limit))
    return images


def junit_properties(props: ET.Element, view: MarginsView) -> None:
    """One suite property per warning, named by its series (``margin_warning_k4_op0_max_abs``)."""
    for t in view.trends:
        if t.line is not None:
            ET.SubElement(props, "property", name=f"margin_warning_k{t.shape}_op{t.op}_{t.metric}", value=t.line)
