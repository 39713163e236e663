"""How the sign-off pages print numbers (the templates' filters): one place, one rule per kind.

Why these rules: a page is read by people deciding whether a shape may ship, so a number must
read as what it is, and never look better than it is:

- latencies in ms or s with three significant digits, never ``1.017e+04``;
- fractions and rates as percentages with two significant digits (``1.3 %``, ``0.018 %``),
  never rounded to ``0 %`` or ``100 %`` when they are not;
- plain figures without scientific notation between 1e-3 and 1e9 (``12346``); error magnitudes
  outside keep it (``3.58e-06``, ``1e+30``), as torch.testing does;
- cosines through ``harness.judging.judges.judge_base.cosine_text``: never ``1`` when the values differ.

These are the templates' filters: they are handed the report's own facts (``reports.signoff.build_facts``,
plain JSON, what report.json holds) and an OP's ``metrics`` (a dict of named figures in the score's
model too), never a score model itself; each reads a row through a view naming the fields it uses
(``reports.row_view``), and a verdict's figures through ``VerdictFigures``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.data.schemas.verdict_figures import VerdictFigures
from harness.judging.judges.judge_base import cosine_text, non_finite_text, shown_figure
from reports.row_view import row_view


@dataclass(frozen=True)
class CheckView:
    """What a check's cell reads of a check row (report.json's: the gate's check as the score holds it)."""

    metric: str = ""
    observed: Any = None
    allowed: Any = None
    offending: int | None = None
    total: int | None = None
    unit: str = ""


@dataclass(frozen=True)
class OpView:
    """What the summary reads of an OP's row: the judge's figures by name."""

    metrics: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SummaryView:
    """What the summary row's cells read of a shape's row: its OPs and their shown minimum cosines."""

    ops: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    min_cosine: Mapping[str, Any] = field(default_factory=dict)
    vs_exact: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PackingView:
    """What the "packing alone" cell reads of a shape's packing effect (the score's ``vs_exact``)."""

    bitwise: bool = False
    ops: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def significant(value: float, digits: int) -> str:
    """``value`` with ``digits`` significant digits in positional notation (no exponent), trailing zeros cut."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def percent_text(fraction: float) -> str:
    """A fraction as a percentage: '1.3 %', '0.018 %'; '0 %' and '100 %' only when exactly so."""
    if fraction == 0:
        return "0 %"
    if fraction == 1:
        return "100 %"
    share = 100.0 * fraction
    if 99.5 <= share < 100:  # as many decimals as it takes not to read 100 %
        decimals = 1
        while round(share, decimals) >= 100 and decimals < 15:
            decimals += 1
        return f"{share:.{decimals}f} %"
    if share >= 10:
        return f"{share:.0f} %"
    return f"{significant(share, 2)} %"


def duration_text(ms: float) -> str:
    """A latency given in ms: '0.42 ms', '37.8 ms', '1.49 s', '10.2 s' (three significant digits)."""
    if ms == 0:
        return "0 ms"
    if abs(ms) >= 1000:
        return f"{significant(ms / 1000.0, 3)} s"
    return f"{significant(ms, 3)} ms"


def fmt(value: Any, kind: str = "") -> str:
    """A number as a person reads it; None as an em dash. ``kind``: speedup, rate, ms, cosine (a limit)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}".replace(",", " ") if abs(value) >= 100_000 else str(value)
    if not isinstance(value, float):
        return str(value)
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if kind == "cosine":  # a limit or a figure known to be exact; measured cosines go through cosine()
        return cosine_text(value, identical=True)
    if kind == "speedup":
        return f"{value:.2f}×"
    if kind == "rate":
        return percent_text(value)
    if kind == "ms":
        return duration_text(value)
    if value == 0:
        return "0"
    if abs(value) < 1e-3:
        return f"{value:.3g}"  # an error magnitude: 3.58e-06 reads better than 0.00000358
    if abs(value) >= 1e9:
        return f"{value:.3g}"  # a diverged error (1e+30): its exponent is the point
    if abs(value) >= 1e5:
        return f"{round(value):,}".replace(",", " ")
    return significant(value, 4)


def identical(metrics: Mapping[str, Any] | None) -> bool:
    """Whether the rows a cosine was taken over are bit-identical (so an exact 1.0 is the truth)."""
    if not metrics:
        return False
    figures = VerdictFigures.of(metrics)
    if "differing_rows" in metrics:  # a judge that counts differing rows: those decide (a null among them: no)
        return figures.differing_rows == 0 and not figures.non_finite
    return bool(figures.bitwise)


def cosine(value: Any, metrics: Mapping[str, Any] | None) -> str:
    """A measured cosine (a number, or the 'non-finite (...)' text) over rows described by ``metrics``."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return cosine_text(float(value), identical(metrics))


def summary_cosine(shape: Mapping[str, Any], op: str) -> str:
    """The summary row's OP 1/2 minimum cosine, judged identical or not by that OP's own metrics (``shape``: the
    report's row as report.json holds it)."""
    row = row_view(SummaryView, shape)
    op_row = row.ops.get(op)
    return cosine(row.min_cosine.get(op), row_view(OpView, op_row).metrics if op_row else None)


def packing_alone(shape: Mapping[str, Any]) -> str:
    """The shape against the run's own exact lane, in a few words (``shape``: the report's row as report.json
    holds it)."""
    vs_exact = row_view(SummaryView, shape).vs_exact
    if not vs_exact:
        return "—"
    effect = row_view(PackingView, vs_exact)
    if effect.bitwise:
        return "bitwise"
    worst = []
    # OP 0 first (an effect without one reads as not bitwise there), then the others in order
    for op, v in sorted({"0": {}, **effect.ops}.items()):
        if VerdictFigures.of(v).bitwise:
            continue
        if op == "0":
            worst.append(f"OP 0 max_abs {fmt(shown_figure(dict(v), 'max_abs'))}")
        else:
            worst.append(f"OP {op} cos {cosine(shown_figure(dict(v), 'min_cosine'), v)}")
    return ", ".join(worst)


def fmt_check(check: Mapping[str, Any], which: str, metrics: Mapping[str, Any] | None = None) -> str:
    """A check's observed ('value') or allowed ('limit') number; ``metrics``: its OP's, for a cosine (``check``: a
    check row as report.json holds it)."""
    c = row_view(CheckView, check)
    if which == "value" and c.observed is None and c.offending and c.total:
        return non_finite_text(c.offending, c.total, c.unit)  # a figure over non-finite values
    number = c.observed if which == "value" else c.allowed
    if c.metric == "min_cosine" and which == "value":
        return cosine(number, metrics)
    if "rate" in c.metric and isinstance(number, int | float) and not isinstance(number, bool):
        return percent_text(float(number))  # a rate is a fraction (a bound of 1 is '100 %', not '1')
    return fmt(number, "cosine" if c.metric == "min_cosine" else "")
