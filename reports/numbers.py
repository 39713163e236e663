"""How the sign-off pages print numbers (the templates' filters): one place, one rule per kind.

Why these rules: a page is read by people deciding whether a shape may ship, so a number must
read as what it is, and never look better than it is:

- latencies in ms or s with three significant digits, never ``1.017e+04``;
- fractions and rates as percentages with two significant digits (``1.3 %``, ``0.018 %``),
  never rounded to ``0 %`` or ``100 %`` when they are not;
- plain figures without scientific notation between 1e-3 and 1e9 (``12346``); error magnitudes
  outside keep it (``3.58e-06``, ``1e+30``), as torch.testing does;
- cosines through ``harness.judging.judges.judge_base.cosine_text``: never ``1`` when the values differ.

These are the templates' filters: they read the report's own facts (``reports.signoff.build_facts``,
plain JSON, what report.json holds) and an OP's ``metrics`` (a dict of named figures in the score's
model too), never a score model itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from harness.judging.judges.judge_base import cosine_text, non_finite_text, shown_figure


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
    # metrics: an OP's open dict of named figures (which it holds depends on the OP), read by name
    if not metrics:
        return False
    if "differing_rows" in metrics:
        return metrics["differing_rows"] == 0 and not metrics.get("non_finite")
    return bool(metrics.get("bitwise"))


def cosine(value: Any, metrics: Mapping[str, Any] | None) -> str:
    """A measured cosine (a number, or the 'non-finite (...)' text) over rows described by ``metrics``."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return cosine_text(float(value), identical(metrics))


def summary_cosine(shape: Mapping[str, Any], op: str) -> str:
    """The summary row's OP 1/2 minimum cosine, judged identical or not by that OP's own metrics."""
    # a template filter: ``shape`` is the report's row as report.json holds it (plain JSON), read by key
    metrics = (shape.get("ops", {}).get(op) or {}).get("metrics")
    return cosine(shape.get("min_cosine", {}).get(op), metrics)


def packing_alone(shape: Mapping[str, Any]) -> str:
    """The shape against the run's own exact lane, in a few words."""
    # a template filter: ``shape`` is the report's row as report.json holds it (plain JSON), read by key
    effect = shape.get("vs_exact")
    if not effect:
        return "—"
    if effect["bitwise"]:
        return "bitwise"
    op0 = effect["ops"].get("0", {})
    worst = [f"OP 0 max_abs {fmt(shown_figure(op0, 'max_abs'))}"] if not op0.get("bitwise") else []
    worst += [
        f"OP {op} cos {cosine(shown_figure(v, 'min_cosine'), v)}"
        for op, v in sorted(effect["ops"].items())
        if op != "0" and not v.get("bitwise")
    ]
    return ", ".join(worst)


def fmt_check(check: Mapping[str, Any], which: str, metrics: Mapping[str, Any] | None = None) -> str:
    """A check's observed ('value') or allowed ('limit') number; ``metrics``: its OP's, for a cosine."""
    # a template filter: ``check`` is a check row as report.json holds it (plain JSON), read by key
    if which == "value" and check["observed"] is None and check.get("offending") and check.get("total"):
        return non_finite_text(check["offending"], check["total"], check["unit"])  # a figure over non-finite values
    number = check["observed" if which == "value" else "allowed"]
    if check["metric"] == "min_cosine" and which == "value":
        return cosine(number, metrics)
    if "rate" in check["metric"] and isinstance(number, int | float) and not isinstance(number, bool):
        return percent_text(float(number))  # a rate is a fraction (a bound of 1 is '100 %', not '1')
    return fmt(number, "cosine" if check["metric"] == "min_cosine" else "")
