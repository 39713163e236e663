"""The sign-off report's two kinds of plot, as small PNG bytes ready to inline.

- ``error_distribution_png``: how far one OP of one packed shape is from the golden, per
  window (OP 0) or per voiceprint row (OP 1/2). A log axis is the only way to see 1e-7 next
  to 10, but it cannot show 0, and 0 is the answer we hope for: exact zeros get their own
  bar on the left ("= 0"), labelled "n of N", so "bitwise" is visible, not hidden.
- ``speedup_png``: speedup over the exact lane against k, one marker per shape coloured by
  its verdict, so the accuracy/speed trade-off is one glance.

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas directly: no pyplot,
no global backend or state, safe to call from any thread or a headless CI job.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

PASS_COLOUR = "#1a7f37"
FAIL_COLOUR = "#cf222e"
OTHER_COLOUR = "#6e7781"
BAR_COLOUR = "#0969da"
DPI = 100

_UNIT = {0: "per-window max |Δ log-prob|", 1: "per-row max |Δ embedding|", 2: "per-row max |Δ embedding|"}


@dataclass(frozen=True)
class SpeedPoint:
    """One lane on the speedup plot. ``verdict``: "pass", "fail", "exact" or anything else (not scored)."""

    k: int
    speedup: float | None
    verdict: str


def error_distribution_png(values: Sequence[float | None], op: int, shape: int | str,
                           limit: float | None) -> bytes:
    """Histogram of one OP's per-window/per-row max abs error for one shape.

    ``values`` is score["shapes"][k]["distribution"][op] (None = non-finite); ``limit`` the
    max_abs limit in force (0 in bitwise mode; None when not gated).
    """
    raw = list(values)
    finite = np.array([v for v in raw if v is not None and math.isfinite(v)], dtype=np.float64)
    non_finite = len(raw) - finite.size
    zeros = int(np.count_nonzero(finite == 0.0))
    positive = finite[finite > 0.0]
    n = len(raw)

    # Fixed margins, not a layout engine: the figure's size never changes and this is 3x faster.
    fig = Figure(figsize=(4.8, 2.5), dpi=DPI)
    grid = fig.add_gridspec(1, 2, width_ratios=(1, 5), left=0.11, right=0.965, bottom=0.18, top=0.81,
                            wspace=0.38)
    ax0 = fig.add_subplot(grid[0, 0])
    ax = fig.add_subplot(grid[0, 1])  # own count axis: 2 rows off must not vanish next to 300 zeros
    fig.suptitle(f"OP {op}, k={shape}: {_UNIT.get(int(op), 'max abs')}", fontsize=9)

    # Left: the exact zeros (a log axis cannot place them).
    ax0.bar([0], [zeros], width=0.6, color=PASS_COLOUR if zeros == n and n else OTHER_COLOUR)
    ax0.set_xticks([0], ["= 0"], fontsize=8)
    ax0.set_xlim(-0.6, 0.6)
    ax0.set_ylabel("count", fontsize=8)
    ax0.tick_params(axis="y", labelsize=7)
    ax0.annotate(f"{zeros} of {n}", (0, zeros), xytext=(0, 2), textcoords="offset points",
                 ha="center", va="bottom", fontsize=7)

    # Right: the non-zero errors on a log axis, with the limit.
    handles = []
    if positive.size:
        lo, hi = float(positive.min()), float(positive.max())
        lo_edge, hi_edge = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        if hi_edge <= lo_edge:
            hi_edge = lo_edge + 1
        bins = np.logspace(lo_edge, hi_edge, max(8, 4 * (hi_edge - lo_edge)) + 1)
        over = positive > limit if limit is not None else np.zeros(positive.shape, dtype=bool)
        ax.hist([positive[~over], positive[over]], bins=bins, stacked=True, color=[BAR_COLOUR, FAIL_COLOUR])
        if (~over).any():
            handles.append(Patch(color=BAR_COLOUR, label="within limit"))
        if over.any():
            handles.append(Patch(color=FAIL_COLOUR, label="over limit"))
        xlo, xhi = 10.0 ** lo_edge, 10.0 ** hi_edge
    else:
        centre = limit if limit else 1e-6
        xlo, xhi = centre / 1e3, centre * 1e3
        ax.text(0.5, 0.55, "no non-zero error", transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color=OTHER_COLOUR)
    if limit is not None and limit > 0:
        xlo, xhi = min(xlo, limit / 10), max(xhi, limit * 10)
        ax.axvline(limit, color="black", linestyle="--", linewidth=1)
        handles.append(Line2D([], [], color="black", linestyle="--", label=f"limit {limit:.3g}"))
    ax.set_xlim(xlo, xhi)  # before the log scale: an empty axis would autoscale to a singular range
    ax.set_xscale("log")
    ax.set_xlabel("max abs error (log scale)", fontsize=8)
    ax.set_ylabel("count (non-zero)", fontsize=8)
    ax.tick_params(axis="both", labelsize=7)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    ax.set_ylim(0, max(_tallest(ax), 1) * 1.35)
    note = f"bitwise: {zeros} of {n} zero" + (f"; {non_finite} non-finite" if non_finite else "")
    if limit == 0:
        note += "; limit: bitwise (0)"
    ax.set_title(note, fontsize=7, loc="right", color=PASS_COLOUR if zeros == n and n else "black")
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="best", framealpha=0.9)
    ax0.set_ylim(0, max(zeros, 1) * 1.2)
    return _png(fig)


def speedup_png(points: Sequence[SpeedPoint]) -> bytes:
    """Speedup over the exact lane (blocks/s ratio) against k; the exact lane is k=1, 1.0."""
    pts = sorted([p for p in points if p.speedup is not None], key=lambda p: p.k)
    if not any(p.verdict == "exact" for p in pts):
        pts.insert(0, SpeedPoint(1, 1.0, "exact"))
    fig = Figure(figsize=(4.8, 2.8), dpi=DPI)
    fig.subplots_adjust(left=0.11, right=0.98, bottom=0.15, top=0.91)
    ax = fig.add_subplot()
    ax.set_title("Speedup over the exact lane, by shape", fontsize=9)
    ks = [p.k for p in pts]
    ax.plot(ks, [p.speedup for p in pts], color="#8c959f", linewidth=1, zorder=1)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=0.8, zorder=0)
    styles = {
        "exact": ("s", "black", "exact lane (release, k=1)"),
        "pass": ("o", PASS_COLOUR, "pass"),
        "fail": ("X", FAIL_COLOUR, "fail"),
    }
    seen = set()
    for p in pts:
        marker, colour, label = styles.get(p.verdict, ("D", OTHER_COLOUR, "not scored"))
        ax.scatter([p.k], [p.speedup], marker=marker, color=colour, s=55, zorder=3,
                   label=None if label in seen else label)
        seen.add(label)
        ax.annotate(f"{p.speedup:.2f}x", (p.k, p.speedup), xytext=(0, 7), textcoords="offset points",
                    ha="center", fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_xlim(min(ks) / 1.4, max(ks) * 1.4)
    top = max(p.speedup for p in pts)
    ax.set_ylim(0, max(1.2, top * 1.25))
    ax.set_xlabel("k (blocks per call)", fontsize=8)
    ax.set_ylabel("speedup (blocks/s ÷ exact)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, axis="y", color="#eaeef2", linewidth=0.8)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


def _tallest(ax) -> float:
    return max((patch.get_y() + patch.get_height() for patch in ax.patches), default=0.0)


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    # No "Software" text chunk: it holds a URL, and the report must not carry any.
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()
