"""How a check's figures read and compare: the pure helpers behind a check's verdict and its one line.

They live in the data layer because the check itself does (``harness.data.schemas.results``): the
score file's model renders its own failure lines, and the judges, the CLI, the sign-off report and
the JUnit file all render the same rows through it (``harness.judging.judges.judge_base`` re-exports them).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any, Final

NOT_GATED: Final = "report"  # a check's relation when it is reported, not gated (its allowed is None)
NEGATION = {"<=": ">", ">=": "<", "==": "!="}  # how a failed relation reads: observed > allowed


def holds(observed: Any, relation: str, allowed: Any) -> bool:
    """``observed relation allowed``; a missing or non-finite observation never holds."""
    if observed is None or (isinstance(observed, float) and not math.isfinite(observed)):
        return False
    if relation == "<=":
        return bool(observed <= allowed)
    if relation == ">=":
        return bool(observed >= allowed)
    if relation == "==":
        return bool(observed == allowed)
    raise ValueError(f"unknown relation {relation!r}")


def plain_number(value: Any) -> Any:
    """numpy scalars as Python numbers; NaN/Inf as None (files hold no such numbers)."""
    if value is None or isinstance(value, bool | str):
        return value
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def non_finite_text(count: int, total: int, unit: str) -> str:
    """How a figure over non-finite values reads everywhere (CLI, report, JUnit): 'non-finite (3 of 80 rows)'."""
    return f"non-finite ({count:,} of {total:,} {unit})"


def fmt(value: Any) -> str:
    """A number as a person reads it in a one-line message, and as the configuration takes it back: a figure or
    a limit is what a user pastes into ``--set`` (``would pass at 3222``), so no thousands separator (a count of
    units, ``3 of 4,096 windows``, is not one of these and keeps its separators where it is written)."""
    if value is None:
        return "non-finite"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value == 0:
            return "0"
        if value == int(value) and abs(value) < 1e6:
            return f"{value:g}"
        if abs(value) >= 0.99 and abs(value) < 1:
            return f"{value:.9g}"
        return f"{value:.3g}"
    return str(value)


def percent(part: int, whole: int) -> str:
    """A share for a failure line: two significant digits, never rounded to 0 % or 100 % when it is not."""
    share = 100.0 * part / whole
    if part == whole:
        return "100 %"
    if share >= 99.5:
        return f"{min(share, 99.9):.1f} %" if share < 99.95 else "99.99 %"
    return f"{share:.2g} %" if share < 10 else f"{share:.0f} %"


def passing_limit(observed: Any, relation: str) -> str | None:
    """The least limit that would have passed a failed ``<=`` / ``>=`` check, as a person would type it
    (as Polygraphy prints the tolerance a comparison needed): the observed figure rounded *towards
    passing* at the digits :func:`fmt` shows (up for ``<=``, down for ``>=``), so that the printed
    number, given as the limit, passes. None where no limit passes (a non-finite observation) or the
    relation has no limit to move (``==``, a fixed requirement)."""
    if relation not in ("<=", ">=") or observed is None or isinstance(observed, bool):
        return None
    if isinstance(observed, int):
        return fmt(observed)
    if not isinstance(observed, float) or not math.isfinite(observed):
        return None
    if observed == 0:
        return "0"
    digits = 9 if 0.99 <= abs(observed) < 1 else 3
    exact = Decimal(repr(observed))
    step = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    rounded = exact.quantize(step, rounding=ROUND_CEILING if relation == "<=" else ROUND_FLOOR)
    text = f"{float(rounded):.{digits}g}"
    value = float(text)
    assert (value >= observed) if relation == "<=" else (value <= observed), (observed, text)
    return text
