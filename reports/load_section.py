"""The sign-off report's "Under load" section: each shape's speed/accuracy frontier from the load sweep.

The sweep and its verdicts are the score's (``score.load``, judged in ``harness.evidence.load_evidence``); here
they are only rendered: one table row per (k, concurrency) point and one plot of throughput against
p99 latency, a line per k through its concurrencies, inaccurate points in red, the p99 budget dashed,
the budget's pick ringed. A score without a sweep has no section: its report is the file it was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from markupsafe import Markup

from harness.data.schemas.load import BudgetPick, LoadEvidence
from harness.data.schemas.results import Score
from reports.plots import FAIL_COLOUR, HEIGHT, PASS_COLOUR, WIDTH, _Svg

_SERIES = ("#0969da", "#8250df", "#bf3989", "#1a7f37", "#9a6700", "#57606a")


@dataclass(frozen=True)
class LoadRow:
    """One (k, concurrency) point of the sweep as the table shows it."""

    shape: int
    concurrency: int
    requests: int
    checked: int
    p50_ms: float
    p99_ms: float
    blocks_per_s: float
    queue_ms: float | None
    compute_ms: float | None
    accurate: bool
    within_budget: bool
    reasons: list[str]
    why: str
    shape_verdict: str | None


@dataclass(frozen=True)
class LoadFacts:
    """The section (report.json's ``load``): the sweep's settings, a row per point, and the budget's pick."""

    url: str
    model_name: str
    blocks: int
    concurrency: list[int]
    p99_budget_ms: float | None
    points: list[LoadRow]
    budget: BudgetPick | None
    budget_line: str


def load_facts(score: Score) -> LoadFacts | None:
    """The section, or None when the score holds no sweep."""
    load = score.load
    if load is None:
        return None
    rows = []
    for key, entry in load.shapes.items():
        shape = score.shapes.get(key)
        for p in entry.points:
            meets = load.p99_budget_ms is not None and p.accurate and p.p99_ms <= load.p99_budget_ms
            rows.append(
                LoadRow(
                    shape=entry.shape,
                    concurrency=p.concurrency,
                    requests=p.requests,
                    checked=p.checked,
                    p50_ms=p.p50_ms,
                    p99_ms=p.p99_ms,
                    blocks_per_s=p.blocks_per_s,
                    queue_ms=p.queue_ms,
                    compute_ms=p.compute_ms,
                    accurate=p.accurate,
                    within_budget=meets,
                    reasons=list(p.reasons),
                    why=p.reasons[0] if p.reasons else ("" if p.accurate else "not accurate"),
                    shape_verdict=shape.verdict if shape is not None else None,
                )
            )
    return LoadFacts(
        url=load.url,
        model_name=load.model_name,
        blocks=load.blocks,
        concurrency=list(load.concurrency),
        p99_budget_ms=load.p99_budget_ms,
        points=rows,
        budget=load.budget,
        budget_line=budget_line(load),
    )


def budget_line(load: LoadEvidence) -> str:
    """One sentence: which (k, concurrency) meets the p99 budget, or why none does."""
    if load.p99_budget_ms is None:
        return "no p99 budget given ([load] p99_budget_ms)"
    best = load.budget
    if best is None:
        return (
            f"no accurate point of a passing shape meets the p99 budget of {load.p99_budget_ms:g} ms: lower the "
            "concurrency, use a smaller k, or raise the budget"
        )
    return (
        f"k={best.shape} at concurrency {best.concurrency} meets the p99 budget of {load.p99_budget_ms:g} ms "
        f"fastest: {best.blocks_per_s:.3g} blocks/s at p99 {best.p99_ms:.3g} ms ({len(load.meets_budget)} "
        f"point{'s' if len(load.meets_budget) != 1 else ''} within it)"
    )


def load_images(score: Score) -> dict[str, Markup]:
    """``load_frontier``: the frontier plot (none without a sweep)."""
    if score.load is None:
        return {}
    return {"load_frontier": Markup(frontier_svg(score.load))}


def frontier_svg(load: LoadEvidence) -> str:
    """Throughput (blocks/s) against p99 latency (ms), one line per k through its concurrencies."""
    series = [
        (entry.shape, [(p.p99_ms, p.blocks_per_s, p.concurrency, p.accurate) for p in entry.points])
        for entry in load.shapes.values()
    ]
    height = HEIGHT + 12 * len(series)
    svg = _Svg(WIDTH, height, "throughput against p99 latency per shape and concurrency")
    svg.text(WIDTH / 2, 14, "speed/accuracy frontier: blocks/s against p99 latency", size=11)
    x0, x1, top, bottom = 52, WIDTH - 16, 28, 212
    xs = [x for _, pts in series for x, *_ in pts] + ([load.p99_budget_ms] if load.p99_budget_ms else [])
    ys = [y for _, pts in series for _, y, *_ in pts]
    xmax = max([1e-3, *(v for v in xs if math.isfinite(v))]) * 1.1
    ymax = max([1e-3, *(v for v in ys if math.isfinite(v))]) * 1.1

    def xy(x: float, y: float) -> tuple[float, float]:
        return x0 + min(x, xmax) / xmax * (x1 - x0), bottom - min(y, ymax) / ymax * (bottom - top)

    svg.line(x0, top, x0, bottom)
    svg.line(x0, bottom, x1, bottom)
    for i in range(5):
        tx, ty = xy(xmax * i / 4, ymax * i / 4)
        svg.text(tx, bottom + 12, f"{xmax * i / 4:.3g}", size=8)
        svg.text(x0 - 5, ty + 3, f"{ymax * i / 4:.3g}", size=8, anchor="end")
    if load.p99_budget_ms is not None:
        bx, _ = xy(load.p99_budget_ms, 0.0)
        svg.line(bx, top, bx, bottom, colour=FAIL_COLOUR, dash=True)
        svg.text(bx - 3, top + 8, f"p99 budget {load.p99_budget_ms:g} ms", size=8, anchor="end")
    best = load.budget
    for i, (k, pts) in enumerate(series):
        colour = _SERIES[i % len(_SERIES)]
        drawn = [(xy(x, y), c, ok) for x, y, c, ok in pts]
        if len(drawn) > 1:
            svg.add(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="'
                + " ".join(f"{a:.1f},{b:.1f}" for (a, b), _, _ in drawn)
                + '"/>'
            )
        for (a, b), c, ok in drawn:
            svg.add(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{colour if ok else FAIL_COLOUR}"/>')
            svg.text(a + 5, b - 4, f"c={c}", size=8, anchor="start", colour=colour)
            if best is not None and best.shape == k and best.concurrency == c:
                svg.add(
                    f'<circle cx="{a:.1f}" cy="{b:.1f}" r="7" fill="none" stroke="{PASS_COLOUR}" stroke-width="2"/>'
                )
        bad = sum(1 for *_, ok in pts if not ok)
        svg.text(
            x0,
            252 + 12 * i,
            f"k={k}" + (f": {bad} point(s) NOT accurate (red)" if bad else ""),
            size=9,
            anchor="start",
            colour=FAIL_COLOUR if bad else colour,
        )
    svg.text((x0 + x1) / 2, bottom + 24, "p99 latency (ms)", size=9)
    svg.text(12, (top + bottom) / 2, "blocks/s", size=9, rotate=True)
    return svg.done()
