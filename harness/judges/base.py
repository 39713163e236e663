"""What every judge returns: checks (observed vs allowed, how many of how many, where) and verdicts.

A **check** is one metric against its limit. The gate produces them; the CLI lines, the sign-off
report's tables and the JUnit file all render the same rows, and promotion re-derives every
``ok`` from ``observed``, ``relation`` and ``allowed`` before it trusts a verdict. A check whose
``allowed`` is ``None`` is reported, not gated.

A **judge** owns one output kind (segmentation, voiceprint): its tolerance model, how its limits
follow from a tolerance mode, how evidence is accumulated batch by batch, and its checks. Adding a
metric means editing that judge's module only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeAlias

from pydantic import BaseModel

from harness.data.errors import ScoringError
from harness.data.geometry import Geometry
from harness.data.ops import Op

RELATIONS = ("<=", ">=", "==")
NOT_GATED = "report"
MODES = ("bitwise", "tolerance", "noise-floor")

# OP 0's flipped windows of one batch, (block, window) -> (near-tie flips, confident flips): what the
# segmentation evidence hands the voiceprint evidence of chained mode
FlipNotes: TypeAlias = dict[tuple[str, int], tuple[int, int]]


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


_NEGATION = {"<=": ">", ">=": "<", "==": "!="}


@dataclass(frozen=True)
class Check:
    """One metric of one OP against its limit (see module doc)."""

    op: int
    metric: str
    observed: float | int | bool | None
    relation: str
    allowed: float | int | bool | None
    ok: bool | None
    unit: str = ""
    offending: int | None = None
    total: int | None = None
    where: str | None = None  # "worst block 'b7' window 3", "first block ...": where to look
    note: str = ""
    hint: str = ""
    limit: str = ""  # the key of the judge's limits ``allowed`` came from; "" = a fixed 0

    @classmethod
    def gate(cls, op: int, metric: str, observed: Any, relation: str, allowed: Any, **kw: Any) -> Check:
        """A gated check (``allowed`` given) or a reported one (``allowed`` None)."""
        if allowed is None:
            return cls(op, metric, _plain(observed), NOT_GATED, None, None, **kw)
        ok = holds(_plain(observed), relation, allowed)
        return cls(op, metric, _plain(observed), relation, _plain(allowed), ok, **kw)

    @property
    def failed(self) -> bool:
        return self.ok is False

    def line(self) -> str:
        """One line: 'OP 0 max_abs: 0.505 > 0.0001 allowed, 3 of 4 096 windows (0.07 %), worst block 'b7'...'"""
        if self.observed is None and self.offending and self.total:
            # a figure over non-finite values (figure_check): says so, never a number that looks in range
            head = f"OP {self.op} {self.metric}: {non_finite_text(self.offending, self.total, self.unit)}"
            text = (f"{head} (reported, not gated)" if self.relation == NOT_GATED
                    else f"{head}, {self.relation} {fmt(self.allowed)} allowed")
        else:
            head = f"OP {self.op} {self.metric}: {fmt(self.observed)}"
            if self.relation == NOT_GATED:
                text = f"{head} (reported, not gated)"
            else:
                rel = self.relation if self.ok else _NEGATION[self.relation]
                text = f"{head} {rel} {fmt(self.allowed)} allowed"
            if self.offending and self.total:
                text += f", {self.offending:,} of {self.total:,} {self.unit} ({percent(self.offending, self.total)})"
            elif self.offending:
                text += f", {self.offending:,} {self.unit}"
        if self.where:
            text += f", {self.where}"
        if self.note:
            text += f"; {self.note}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Check:
        return cls(**data)


def non_finite_text(count: int, total: int, unit: str) -> str:
    """How a figure over non-finite values reads everywhere (CLI, report, JUnit): 'non-finite (3 of 80 rows)'."""
    return f"non-finite ({count:,} of {total:,} {unit})"


def figure_check(op: int, metric: str, finite_value: Any, relation: str, allowed: Any, *, non_finite: int,
                 total: int, unit: str, limit: str = "", offending: int | None = None, where: str | None = None,
                 first_non_finite: str | None = None, note: str = "", hint: str = "") -> Check:
    """A figure (max_abs, min_cosine, ...) of values some of which may be non-finite.

    Why: a figure taken over the finite values only reads as perfect (max_abs 0, cosine 1) for an
    OP whose failing rows are exactly the non-finite ones. With ``non_finite`` units (windows or
    rows) its ``observed`` is None (non-finite, which never holds), ``offending`` / ``total``
    count the non-finite units, ``where`` names the first of them, and the finite-only figure is
    kept in the note, said to be over the finite units only."""
    if not non_finite:
        return Check.gate(op, metric, finite_value, relation, allowed, limit=limit, unit=unit, offending=offending,
                          total=total, where=where, note=note, hint=hint)
    finite = f"over the {total - non_finite:,} finite {unit} only: {fmt(_plain(finite_value))}"
    if offending:
        finite += f", {offending:,} over the limit"
    if where:
        finite += f", {where}"
    return Check.gate(op, metric, None, relation, allowed, limit=limit, unit=unit, offending=non_finite, total=total,
                      where=first_non_finite, note="; ".join(n for n in (finite, note) if n), hint=hint)


def shown_figure(metrics: dict[str, Any], name: str) -> Any:
    """A metrics figure as people should read it: the number, or 'non-finite (N of M unit)' where
    non-finite values made it None (``metrics['figures_non_finite']``, written by the judges)."""
    value = metrics.get(name)
    nf = metrics.get("figures_non_finite") or {}
    if value is None and nf.get("count"):
        return non_finite_text(nf["count"], nf["of"], nf["unit"])
    return value


@dataclass
class OpVerdict:
    """Every check of one OP at one shape (or of the exact lane's reproduction)."""

    op: int
    shape: int | str
    checks: list[Check]
    metrics: dict[str, Any]
    limits: dict[str, Any]
    failing: list[dict[str, Any]] = field(default_factory=list)  # worst offenders, for the report
    distribution: list[float | None] = field(default_factory=list)  # a sample of per-unit max |diff| for the plot

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks)

    @property
    def reasons(self) -> list[str]:
        return [c.line() for c in self.checks if c.failed]

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "shape": self.shape, "passed": self.passed, "reasons": self.reasons,
                "checks": [c.to_dict() for c in self.checks], "metrics": self.metrics, "limits": self.limits,
                "failing": self.failing, "distribution": self.distribution}


class Evidence(Protocol):
    """Accumulates one OP of one lane against the golden, batch by batch (memory: one batch)."""

    def add(self, golden: Any, run: Any, notes: FlipNotes | None = None) -> FlipNotes | None: ...

    def verdict(self, shape: int | str) -> OpVerdict: ...


class Judge(Protocol):
    """One output kind: its tolerance model, limits per mode, evidence and checks."""

    kind: str

    @property
    def tolerance(self) -> type[BaseModel]: ...

    def applies_to(self, op: Op) -> bool: ...

    def limits(self, tol: Any, floor: dict[str, Any] | None, sample_bound: bool = True) -> dict[str, Any]: ...

    def evidence(self, op: Op, geometry: Geometry, limits: dict[str, Any], mode: str) -> Evidence: ...


def limits_for_mode(mode: str, floor: dict[str, Any] | None, *, bitwise: Callable[[], dict[str, Any]],
                    noise_floor: Callable[[dict[str, Any]], dict[str, Any]],
                    tolerance: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The one dispatch over tolerance modes: a judge supplies the three limit sets.

    ``noise-floor`` uses the golden's own reproducibility; a golden that reproduced bitwise
    makes it bitwise."""
    if mode == "bitwise" or (mode == "noise-floor" and floor is not None and floor.get("bitwise")):
        limits = bitwise()
    elif mode == "noise-floor":
        if floor is None:
            raise ScoringError("tolerance mode 'noise-floor' needs a golden recorded with its noise floor")
        limits = noise_floor(floor)
    elif mode == "tolerance":
        limits = tolerance()
    else:
        raise ScoringError(f"unknown tolerance mode {mode!r} (expected one of {MODES})")
    return {"mode": mode, **limits}


def fmt(value: Any) -> str:
    """A number as a person reads it in a one-line message."""
    if value is None:
        return "non-finite"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if value == int(value) and abs(value) < 1e6:
            return f"{value:g}"
        if abs(value) >= 0.99 and abs(value) < 1:
            return f"{value:.9g}"
        return f"{value:.3g}"
    return str(value)


def cosine_text(value: float | None, identical: bool) -> str:
    """A cosine as people should read it: never a perfect-looking '1' for values that differ.

    Why: rows that differ in their last bits have a float64 cosine of 1 - 1e-13, or exactly 1.0
    (a 1-ULP change in float32 is below float64's resolution of the dot product), and '.9g'
    rounds both to '1'. So a gap under 1e-6 is shown as '1 − 2.9e-8', and an exact 1.0 over rows
    that are not bit-identical (``identical`` False) as '1 − <1e-16 (not bit-identical)'. One
    function for the judges' notes and the report's tables."""
    if value is None:
        return "non-finite"
    gap = 1.0 - float(value)
    if gap <= 0.0:
        return "1" if identical else "1 − <1e-16 (not bit-identical)"
    if gap < 1e-6:
        mantissa, exponent = f"{gap:.2g}".split("e")
        return f"1 − {mantissa}e{int(exponent)}"
    return f"{value:.6g}"  # gap >= 1e-6: six significant digits show it (0.999999 at most)


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers; NaN/Inf as None (files hold no such numbers)."""
    if value is None or isinstance(value, bool | str):
        return value
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def percent(part: int, whole: int) -> str:
    """A share for a failure line: two significant digits, never rounded to 0 % or 100 % when it is not."""
    share = 100.0 * part / whole
    if part == whole:
        return "100 %"
    if share >= 99.5:
        return f"{min(share, 99.9):.1f} %" if share < 99.95 else "99.99 %"
    return f"{share:.2g} %" if share < 10 else f"{share:.0f} %"
