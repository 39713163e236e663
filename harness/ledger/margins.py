"""Margins over nights: is a packed shape that still passes creeping toward its limit?

A verdict is pass or fail; a shape can pass every night while its observed error grows tenfold.
The history store (``harness.ledger.history_store``: one row per gated check per committed score) keeps
each check's *margin* (observed / allowed for ``<=`` checks, (1 - observed) / (1 - allowed) for
cosine), so 0 is "exact", 1 is "at the limit". This module reads those rows as series, one per
shape, OP and gated metric, over the last ``nights`` nights, and says in one line per series
when the margin shrank (the ratio grew by more than ``shrink_factor``) or the check stands near
its limit (ratio >= ``near_limit``). It judges nothing anew: the rows are the gate's.

Why a Protocol for the rows: the trend needs only a few fields of a history row, and code (and
tests) can build rows without the store; ``harness.data.schemas.history.HistoryRow`` satisfies it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.data.schemas.config_file import HistorySection
from harness.data.schemas.history import HistoryRow


@dataclass(frozen=True)
class MarginPoint:
    """One night of one series: the ledger commit ``seq``, its score's time, the margin (None: undefined)."""

    seq: int
    created: str
    margin: float | None


@dataclass(frozen=True)
class MarginTrend:
    """One shape x OP x gated metric over the window. ``growth``: last / first defined margin (None where
    fewer than two defined margins, or the first is 0: a bitwise night has no ratio to grow from)."""

    shape: int
    op: int
    metric: str
    points: tuple[MarginPoint, ...]
    first: float | None
    last: float | None
    max: float | None
    growth: float | None
    shrank: bool
    near: bool
    line: str | None  # the warning line, None when it does not warn

    @property
    def warns(self) -> bool:
        return self.line is not None


@dataclass(frozen=True)
class MarginsView:
    """Every series of the allowed shapes over the last ``settings.nights`` nights, and its warnings."""

    settings: HistorySection
    nights: int  # nights (ledger commits) in the window, at most settings.nights
    trends: tuple[MarginTrend, ...]

    @property
    def warnings(self) -> list[str]:
        return [t.line for t in self.trends if t.line is not None]

    def ops(self) -> list[int]:
        return sorted({t.op for t in self.trends})


def _num(x: float) -> str:
    """A margin or factor as the warning line shows it: 2 decimals, 3 significant digits when smaller."""
    return f"{x:.2f}" if abs(x) >= 0.01 or x == 0 else f"{x:.3g}"


def _factor(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}" if x < 1 else f"{x:.1f}"


def trend(shape: int, op: int, metric: str, rows: Sequence[HistoryRow], settings: HistorySection) -> MarginTrend:
    """The trend of one series (``rows`` of one shape, OP and metric, in seq order, already windowed)."""
    points = tuple(MarginPoint(r.seq, r.created, r.margin) for r in rows)
    defined = [p.margin for p in points if p.margin is not None and math.isfinite(p.margin)]
    first = defined[0] if defined else None
    last = defined[-1] if defined else None
    top = max(defined) if defined else None
    growth = last / first if len(defined) >= 2 and first is not None and last is not None and first > 0 else None
    shrank = growth is not None and growth > settings.shrink_factor
    near = last is not None and last >= settings.near_limit
    line = None
    if (shrank or near) and first is not None and last is not None:
        over = f", over the x{settings.shrink_factor:.1f} allowed" if shrank else ""
        grew = f" (x{_factor(growth)}{over})" if growth is not None else ""
        parts = [
            f"k={shape} OP {op} {metric}: margin {_num(first)} -> {_num(last)} over {len(points)} "
            f"night{'s' if len(points) != 1 else ''}{grew}"
        ]
        if near:
            parts.append(f"{_num(last)} of its limit (warned from {_num(settings.near_limit)})")
        line = "; ".join(parts)
    return MarginTrend(shape, op, metric, points, first, last, top, growth, shrank, near, line)


def margins_view(
    rows: Iterable[HistoryRow],
    settings: HistorySection,
    *,
    device_kind: str | None = None,
    numerics_profile: str | None = None,
    packer_identity: str | None = None,
) -> MarginsView:
    """The trends of the allowed shapes: those whose latest night in the window passed (a failing shape
    already fails the nightly; its margin says nothing more). Rows of another device kind, numerics profile
    or packer are left out (given ones only): a margin is comparable only under the same key."""
    kept = [
        r
        for r in rows
        if (device_kind is None or r.device_kind == device_kind)
        and (numerics_profile is None or r.numerics_profile == numerics_profile)
        and (packer_identity is None or r.packer_identity == packer_identity)
    ]
    seqs = sorted({r.seq for r in kept})[-settings.nights :] if settings.nights > 0 else []
    window = set(seqs)
    series: dict[tuple[int, int, str], list[HistoryRow]] = {}
    for r in sorted(kept, key=lambda r: r.seq):
        if r.seq in window:
            series.setdefault((r.shape, r.op, r.metric), []).append(r)
    trends = tuple(
        trend(shape, op, metric, rows_, settings)
        for (shape, op, metric), rows_ in sorted(series.items())
        if rows_[-1].verdict == "pass"
    )
    return MarginsView(settings, len(seqs), trends)
