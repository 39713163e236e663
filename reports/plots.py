"""The sign-off report's plots, as small inline SVG (no plotting library, no URL).

- ``error_distribution_svg``: how far one OP of one packed shape is from the golden, per window
  (OP 0) or per voiceprint row (OP 1/2). A log axis is the only way to see 1e-7 next to 10, but
  it cannot show 0, and 0 is the answer we hope for: exact zeros get their own bar on the left
  ("= 0"), labelled "n of N", so "bitwise" is visible, not hidden. Bars over the limit are red.
- ``speedup_svg``: speedup over the exact lane against k, one marker per shape coloured by its
  verdict, so the accuracy/speed trade-off is one glance.
- ``bitwise_line``: an OP whose every window/row is identical gets one line instead of a histogram.
- ``margins_svg``: margin (observed / allowed) against night per allowed shape and check of one OP,
  the limit and the warning level drawn, so a margin creeping toward its limit is one glance.

Drawn as SVG text directly: a report is written in milliseconds, not the seconds a plotting
library takes to lay out and rasterise seven figures, and it needs nothing installed. The markup
is inlined in the HTML page (HTML5 places ``<svg>`` in the SVG namespace without an ``xmlns``),
so the page still names no URL of any kind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from harness.data.schemas.verdict_figures import VerdictFigures

PASS_COLOUR = "#1a7f37"
FAIL_COLOUR = "#cf222e"
OTHER_COLOUR = "#6e7781"
BAR_COLOUR = "#0969da"
WIDTH, HEIGHT = 480, 250
_UNIT = {0: "per-window max |Δ log-prob|", 1: "per-row max |Δ embedding|", 2: "per-row max |Δ embedding|"}


@dataclass(frozen=True)
class SpeedPoint:
    """One lane on the speedup plot. ``verdict``: "pass", "fail", "exact" or anything else (not scored)."""

    k: int
    speedup: float | None
    verdict: str


class _Svg:
    def __init__(self, width: int, height: int, label: str) -> None:
        self.parts = [
            f'<svg class="plot" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'role="img" aria-label="{escape(label)}" font-family="sans-serif">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
        ]

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: int = 9,
        anchor: str = "middle",
        colour: str = "#1f2328",
        rotate: bool = False,
    ) -> None:
        transform = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
        self.add(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{colour}"'
            f"{transform}>{escape(text)}</text>"
        )

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        colour: str = "#1f2328",
        dash: bool = False,
        width: float = 1.0,
    ) -> None:
        style = ' stroke-dasharray="4 3"' if dash else ""
        self.add(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
            f'stroke-width="{width}"{style}/>'
        )

    def rect(self, x: float, y: float, w: float, h: float, colour: str) -> None:
        if w > 0 and h > 0:
            self.add(f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{colour}"/>')

    def done(self) -> str:
        return "\n".join([*self.parts, "</svg>"])


def bitwise_line(op: int, metrics: Mapping[str, Any]) -> str | None:
    """'bitwise: 32 of 32 windows identical' when every window (OP 0) or row (OP 1/2) of an OP is
    bit-identical to the golden; None where there is a spread (then the histogram is drawn).

    Why: a histogram of nothing but zeros is a near-empty plot; six of them fill the page of a
    bitwise night and say less than this line. It counts every unit judged (the score's metrics),
    not the distribution sample the histogram draws. ``metrics``: the score's open dict of named figures (which
    ones an OP has depends on the OP and the judge), read through ``VerdictFigures``."""
    figures = VerdictFigures.of(metrics)
    if not figures.bitwise:
        return None
    n, unit = (figures.windows, "windows") if int(op) == 0 else (figures.judged_rows, "rows")
    if n is None:
        return None
    return f"bitwise: {n:,} of {n:,} {unit} identical"


def error_distribution_svg(values: Sequence[float | None], op: int, shape: int | str, limit: float | None) -> str:
    """Histogram of one OP's per-window/per-row max abs error for one shape.

    ``values``: the sample the score keeps (None = non-finite); ``limit``: the max_abs limit in
    force (0 in bitwise mode; None when not gated)."""
    raw = list(values)
    finite = np.array([v for v in raw if v is not None and math.isfinite(v)], dtype=np.float64)
    non_finite = len(raw) - finite.size
    zeros = int(np.count_nonzero(finite == 0.0))
    positive = finite[finite > 0.0]
    n = len(raw)
    svg = _Svg(WIDTH, HEIGHT, f"OP {op} error distribution for k={shape}")
    svg.text(WIDTH / 2, 14, f"OP {op}, k={shape}: {_UNIT.get(int(op), 'max abs')}", size=11)
    note = f"bitwise: {zeros} of {n} zero" + (f"; {non_finite} non-finite" if non_finite else "")
    if limit == 0:
        note += "; limit: bitwise (0)"
    svg.text(WIDTH - 10, 30, note, anchor="end", colour=PASS_COLOUR if zeros == n and n else "#1f2328")
    top, bottom = 40, HEIGHT - 40
    # Left panel: the exact zeros (a log axis cannot place them).
    lx, lw = 40, 44
    svg.line(lx, top, lx, bottom)
    svg.line(lx, bottom, lx + lw + 12, bottom)
    if zeros:
        height = (bottom - top) / 1.2
        svg.rect(lx + 6, bottom - height, lw, height, PASS_COLOUR if zeros == n else OTHER_COLOUR)
    svg.text(lx + 6 + lw / 2, bottom - (bottom - top) / 1.2 - 4 if zeros else bottom - 4, f"{zeros} of {n}", size=8)
    svg.text(lx + 6 + lw / 2, bottom + 13, "= 0", size=9)
    svg.text(14, (top + bottom) / 2, "count", size=9, rotate=True)
    # Right panel: the non-zero errors on a log axis, with the limit.
    rx0, rx1 = 130, WIDTH - 14
    svg.line(rx0, top, rx0, bottom)
    svg.line(rx0, bottom, rx1, bottom)
    if positive.size:
        lo_edge = math.floor(math.log10(float(positive.min())))
        hi_edge = max(math.ceil(math.log10(float(positive.max()))), lo_edge + 1)
    else:
        centre = math.log10(limit) if limit else -6.0
        lo_edge, hi_edge = math.floor(centre - 3), math.ceil(centre + 3)
    if limit is not None and limit > 0:
        decade = math.log10(limit)
        lo_edge, hi_edge = min(lo_edge, math.floor(decade) - 1), max(hi_edge, math.ceil(decade) + 1)

    def x_of(value: float) -> float:
        return rx0 + (math.log10(value) - lo_edge) / (hi_edge - lo_edge) * (rx1 - rx0)

    for decade in range(lo_edge, hi_edge + 1):
        x = x_of(10.0**decade)
        svg.line(x, bottom, x, bottom + 4)
        svg.text(x, bottom + 14, f"1e{decade}", size=8)
    svg.text((rx0 + rx1) / 2, HEIGHT - 8, "max abs error (log scale)", size=9)
    if positive.size:
        bins = np.logspace(lo_edge, hi_edge, max(8, 4 * (hi_edge - lo_edge)) + 1)
        over = positive > limit if limit is not None else np.zeros(positive.shape, dtype=bool)
        within_counts, _ = np.histogram(positive[~over], bins=bins)
        over_counts, _ = np.histogram(positive[over], bins=bins)
        tallest = max(1, int((within_counts + over_counts).max()))
        scale = (bottom - top) / (tallest * 1.25)
        for i in range(len(bins) - 1):
            x, w = x_of(bins[i]) + 0.5, x_of(bins[i + 1]) - x_of(bins[i]) - 1
            h_in, h_over = within_counts[i] * scale, over_counts[i] * scale
            svg.rect(x, bottom - h_in, w, h_in, BAR_COLOUR)
            svg.rect(x, bottom - h_in - h_over, w, h_over, FAIL_COLOUR)
        svg.text(rx0 - 4, top + 8, str(tallest), size=8, anchor="end")
        svg.text(rx0 - 4, bottom, "0", size=8, anchor="end")
        legend = [(BAR_COLOUR, "within limit")] if (~over).any() else []
        legend += [(FAIL_COLOUR, "over limit")] if over.any() else []
        for i, (colour, label) in enumerate(legend):
            svg.rect(rx0 + 8, top + 4 + 12 * i, 9, 9, colour)
            svg.text(rx0 + 21, top + 12 + 12 * i, label, size=8, anchor="start")
    else:
        svg.text((rx0 + rx1) / 2, (top + bottom) / 2, "no non-zero error", size=10, colour=OTHER_COLOUR)
    if limit is not None and limit > 0:
        x = x_of(limit)
        svg.line(x, top, x, bottom, dash=True)
        svg.text(x + 3, top + 8, f"limit {limit:.3g}", size=8, anchor="start")
    return svg.done()


def speedup_svg(points: Sequence[SpeedPoint]) -> str:
    """Speedup over the exact lane against k (log2 axis); the exact lane is k=1, 1.0."""
    # (k, speedup, verdict) of the points with a speedup: the ones drawn
    pts = sorted([(p.k, p.speedup, p.verdict) for p in points if p.speedup is not None], key=lambda p: p[0])
    if not any(verdict == "exact" for _, _, verdict in pts):
        pts.insert(0, (1, 1.0, "exact"))
    svg = _Svg(WIDTH, 280, "speedup over the exact lane against k, by verdict")
    svg.text(WIDTH / 2, 16, "Speedup over the exact lane, by shape", size=11)
    x0, x1, top, bottom = 56, WIDTH - 20, 30, 280 - 42
    ks = [k for k, _, _ in pts]
    lo, hi = math.log2(min(ks)) - 0.5, math.log2(max(ks)) + 0.5
    ymax = max(1.2, max(speedup for _, speedup, _ in pts) * 1.25)

    def xy(k: float, s: float) -> tuple[float, float]:
        return (x0 + (math.log2(k) - lo) / (hi - lo) * (x1 - x0), bottom - s / ymax * (bottom - top))

    svg.line(x0, top, x0, bottom)
    svg.line(x0, bottom, x1, bottom)
    for tick in np.linspace(0, ymax, 5):
        _, y = xy(1, tick)
        svg.line(x0 - 3, y, x1, y, colour="#eaeef2")
        svg.text(x0 - 5, y + 3, f"{tick:.2g}", size=8, anchor="end")
    _, y1 = xy(1, 1.0)
    svg.line(x0, y1, x1, y1, dash=True)
    svg.add(
        '<polyline fill="none" stroke="#8c959f" stroke-width="1" points="'
        + " ".join(f"{a:.1f},{b:.1f}" for a, b in (xy(k, speedup) for k, speedup, _ in pts))
        + '"/>'
    )
    colours = {"exact": "black", "pass": PASS_COLOUR, "fail": FAIL_COLOUR}
    for k, speedup, verdict in pts:
        x, y = xy(k, speedup)
        colour = colours.get(verdict, OTHER_COLOUR)
        if verdict == "exact":
            svg.rect(x - 5, y - 5, 10, 10, colour)
        elif verdict == "fail":
            svg.line(x - 5, y - 5, x + 5, y + 5, colour, width=3)
            svg.line(x - 5, y + 5, x + 5, y - 5, colour, width=3)
        else:
            svg.add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5.5" fill="{colour}"/>')
        svg.text(x, y - 9, f"{speedup:.2f}x", size=8)
        svg.text(x, bottom + 13, str(k), size=8)
    svg.text((x0 + x1) / 2, 280 - 10, "k (blocks per call); square: exact lane, green: pass, red cross: fail", size=9)
    svg.text(14, (top + bottom) / 2, "speedup (÷ exact)", size=9, rotate=True)
    return svg.done()


_SERIES_COLOURS = ("#0969da", "#8250df", "#bf8700", "#1a7f37", "#6e7781", "#953800")


@dataclass(frozen=True)
class MarginLine:
    """One series on a margins plot: its label ("k=4 max_abs"), its (seq, margin) points (margin None: not
    defined that night, a gap) and whether it warns (drawn red)."""

    label: str
    points: tuple[tuple[int, float | None], ...]
    warns: bool


def margins_svg(op: int, lines: Sequence[MarginLine], near_limit: float) -> str:
    """Margin (observed / allowed: 0 exact, 1 at the limit) against night (ledger commit), one line per
    allowed shape and gated metric of one OP; the limit (1) dashed, the warning level dotted."""
    height = 256 + 12 * len(lines)
    svg = _Svg(WIDTH, height, f"OP {op} margins over nights")
    svg.text(WIDTH / 2, 14, f"OP {op}: margin (observed / allowed) by night", size=11)
    x0, x1, top, bottom = 48, WIDTH - 16, 28, 212
    seqs = sorted({s for line in lines for s, _ in line.points}) or [0]
    values = [m for line in lines for _, m in line.points if m is not None and math.isfinite(m)]
    ymax = max([1.1, *(v * 1.1 for v in values)])
    index = {s: i for i, s in enumerate(seqs)}

    def xy(seq: int, m: float) -> tuple[float, float]:
        span = max(len(seqs) - 1, 1)
        return (x0 + index[seq] / span * (x1 - x0), bottom - min(m, ymax) / ymax * (bottom - top))

    svg.line(x0, top, x0, bottom)
    svg.line(x0, bottom, x1, bottom)
    for tick in np.linspace(0, ymax, 5):
        _, y = xy(seqs[0], float(tick))
        svg.line(x0 - 3, y, x1, y, colour="#eaeef2")
        svg.text(x0 - 5, y + 3, f"{tick:.2g}", size=8, anchor="end")
    for level, dashed, label in ((1.0, True, "limit"), (near_limit, False, f"warn {near_limit:.2g}")):
        _, y = xy(seqs[0], level)
        svg.line(x0, y, x1, y, colour=FAIL_COLOUR if dashed else "#bf8700", dash=dashed)
        svg.text(x1, y - 3, label, size=8, anchor="end")
    for seq in seqs:
        x, _ = xy(seq, 0.0)
        svg.text(x, bottom + 12, str(seq), size=8)
    for i, line in enumerate(lines):
        colour = FAIL_COLOUR if line.warns else _SERIES_COLOURS[i % len(_SERIES_COLOURS)]
        drawn = [xy(s, m) for s, m in line.points if m is not None and math.isfinite(m)]
        if len(drawn) > 1:
            svg.add(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="'
                + " ".join(f"{a:.1f},{b:.1f}" for a, b in drawn)
                + '"/>'
            )
        for a, b in drawn:
            svg.add(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.5" fill="{colour}"/>')
        svg.text(
            x0, 252 + 12 * i, ("WARNING " if line.warns else "") + line.label, size=9, anchor="start", colour=colour
        )
    svg.text((x0 + x1) / 2, bottom + 24, "night (ledger commit)", size=9)
    return svg.done()
