"""What every judge returns: checks (observed vs allowed, how many of how many, where) and verdicts.

A **check** is one metric against its limit. The gate produces them; the CLI lines, the sign-off
report's tables and the JUnit file all render the same rows, and promotion re-derives every
``ok`` from ``observed``, ``relation`` and ``allowed`` before it trusts a verdict. A check whose
``allowed`` is ``None`` is reported, not gated.

A **judge** owns one output kind (segmentation, voiceprint): how its limits follow from a tolerance
mode and its noise-floor figures (``<kind>_judge``), how evidence is accumulated batch by batch and its
checks (``<kind>_evidence``); its tolerance model is declared in the data layer
(:mod:`harness.data.tolerances`), since every file that records a verdict holds it. Adding a metric means
editing that judge's modules (and its tolerance key, if it is gated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import Field, asdict, replace
from typing import Any, ClassVar, Protocol, TypeAlias, TypeVar

from pydantic import BaseModel

from harness.base.errors import ScoringError
from harness.base.figures import NOT_GATED, fmt, holds, non_finite_text, percent, plain_number
from harness.data.geometry import Geometry
from harness.data.judge_limits import LimitSet, OpLimits
from harness.data.modes import TOLERANCE_MODES, ToleranceMode, VoiceprintInputs
from harness.data.ops import Op
from harness.data.schemas.files import Floor
from harness.data.schemas.results import CheckModel as Check
from harness.data.schemas.results import OpVerdictModel as OpVerdict
from harness.data.schemas.verdict_figures import NonFiniteFigures, VerdictFigures
from harness.data.schemas.verdicts import NO_DETAILS, CheckDetails
from harness.judging.judges.floor_figures import FloorFigure, FloorSource, floor_of


class DataclassInstance(Protocol):
    """A dataclass's instance, as ``dataclasses.asdict`` takes it (typeshed's name, declared here: its module
    exists for the type checker only)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]


# ``Check`` and ``OpVerdict`` are declared once, in the data layer (the score file's models): the judges build
# the very objects the score holds, with gate() and op_verdict().


def gate(op: int, metric: str, observed: Any, relation: str, allowed: Any, details: CheckDetails = NO_DETAILS) -> Check:
    """``Check.gate``: a gated check (``allowed`` given) or a reported one (``allowed`` None)."""
    return Check.gate(op, metric, observed, relation, allowed, details)


def op_verdict(
    op: int,
    shape: int | str,
    checks: list[Check],
    totals: DataclassInstance,
    limits: LimitSet,
    failing: Sequence[DataclassInstance],
    distribution: list[float | None],
) -> OpVerdict:
    """``OpVerdict.of``: every check of one OP at one shape; passed and reasons follow from the checks. The
    judge's typed totals, limits and worst offenders become the verdict's free-form parts here, each
    dataclass as its fields in order (the score file's keys)."""
    return OpVerdict.of(
        op, shape, checks, asdict(totals), limits.document(), [asdict(o) for o in failing], distribution
    )


RELATIONS = ("<=", ">=", "==")

# OP 0's flipped windows of one batch, (block, window) -> (near-tie flips, confident flips): what the
# segmentation evidence hands the voiceprint evidence of chained mode
FlipNotes: TypeAlias = dict[tuple[str, int], tuple[int, int]]


# ``NonFiniteFigures``: how many units (windows, rows) of an OP held non-finite values, out of how many (the
# figures over them are None, and the report says so): declared once, with the verdict's figures it is one of


def figure_check(
    op: int,
    metric: str,
    finite_value: Any,
    relation: str,
    allowed: Any,
    details: CheckDetails,
    non_finite: int,
    first_non_finite: str | None = None,
) -> Check:
    """A figure (max_abs, min_cosine, ...) of values some of which may be non-finite: ``details`` as for a
    finite figure (``total`` and ``unit``: the units it is over, windows or rows).

    Why: a figure taken over the finite values only reads as perfect (max_abs 0, cosine 1) for an
    OP whose failing rows are exactly the non-finite ones. With ``non_finite`` units its ``observed`` is
    None (non-finite, which never holds), ``offending`` / ``total`` count the non-finite units, ``where``
    names the first of them (``first_non_finite``), and the finite-only figure is kept in the note, said to
    be over the finite units only."""
    if not non_finite:
        return gate(op, metric, finite_value, relation, allowed, details)
    total, offending, where = details.total or 0, details.offending, details.where  # total: the judges count it
    finite = f"over the {total - non_finite:,} finite {details.unit} only: {fmt(plain_number(finite_value))}"
    if offending:
        finite += f", {offending:,} over the limit"
    if where:
        finite += f", {where}"
    return gate(
        op,
        metric,
        None,
        relation,
        allowed,
        replace(
            details,
            offending=non_finite,
            where=first_non_finite,
            note="; ".join(n for n in (finite, details.note) if n),
        ),
    )


def shown_figure(metrics: Mapping[str, Any], name: str) -> Any:
    """A metrics figure as people should read it: the number, or 'non-finite (N of M unit)' where
    non-finite values made it None (the figures' ``figures_non_finite``, written by the judges). ``metrics``:
    a verdict's as the score file holds them (each judge's own figures by name), read back by the report."""
    value = metrics.get(name)
    nf = VerdictFigures.of(metrics).figures_non_finite
    if value is None and nf is not None and nf.count:
        return non_finite_text(nf.count, nf.of, nf.unit)
    return value


class Evidence(Protocol):
    """Accumulates one OP of one lane against the golden, batch by batch (memory: one batch)."""

    def add(self, golden: Any, run: Any, notes: FlipNotes | None = None) -> FlipNotes | None: ...

    def verdict(self, shape: int | str) -> OpVerdict: ...


class Judge(Protocol):
    """One output kind: its tolerance model, limits per tolerance mode, evidence and checks."""

    kind: str
    floor_figures: tuple[FloorFigure, ...]  # its noise floor's figures (harness.judging.judges.floor_figures)

    @property
    def tolerance(self) -> type[BaseModel]: ...

    def applies_to(self, op: Op) -> bool: ...

    def limits(self, tol: Any, floor: FloorSource | None, sample_bound: bool = True) -> OpLimits: ...

    def evidence(
        self, op: Op, geometry: Geometry, limits: OpLimits, voiceprint_inputs: VoiceprintInputs
    ) -> Evidence: ...


Limits = TypeVar("Limits", bound=OpLimits)


def limits_for_mode(
    tolerance_mode: ToleranceMode,
    floor: FloorSource | None,  # the golden's noise floor of the OP (its model, or its manifest's JSON: parsed here)
    *,
    bitwise: Callable[[], Limits],
    noise_floor: Callable[[Floor], Limits],
    tolerance: Callable[[], Limits],
) -> Limits:
    """The one dispatch over tolerance modes: a judge supplies the three limit sets.

    ``noise-floor`` uses the golden's own reproducibility; a golden that reproduced bitwise
    makes it bitwise."""
    noise_floor_mode = tolerance_mode == ToleranceMode.NOISE_FLOOR
    recorded = floor_of(floor) if noise_floor_mode and floor is not None else None  # read only here
    if tolerance_mode == ToleranceMode.BITWISE or (recorded is not None and recorded.bitwise):
        return bitwise()
    if noise_floor_mode:
        if recorded is None:
            raise ScoringError("tolerance mode 'noise-floor' needs a golden recorded with its noise floor")
        return noise_floor(recorded)
    if tolerance_mode == ToleranceMode.TOLERANCE:
        return tolerance()
    raise ScoringError(f"unknown tolerance mode {tolerance_mode!r} (expected one of {TOLERANCE_MODES})")


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


__all__ = [
    "NOT_GATED",
    "RELATIONS",
    "Check",
    "CheckDetails",
    "Evidence",
    "FlipNotes",
    "Judge",
    "Limits",
    "NonFiniteFigures",
    "OpVerdict",
    "cosine_text",
    "figure_check",
    "fmt",
    "gate",
    "holds",
    "limits_for_mode",
    "non_finite_text",
    "op_verdict",
    "percent",
    "plain_number",
    "shown_figure",
]
