"""The verdict of one OP of one judged pair (its checks, the metrics and the limits), declared apart from the
score so that the models holding verdicts (a score's shapes, their arrangements and repeats) import it without
importing each other: :mod:`harness.data.schemas.results` re-exports both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.base.figures import (
    NEGATION,
    NOT_GATED,
    fmt,
    holds,
    non_finite_text,
    passing_limit,
    percent,
    plain_number,
)
from harness.base.jsonio import plain
from harness.data.schemas.base import (
    Count,
    Frozen,
    Number,
)
from harness.data.schemas.verdict_figures import Offender, VerdictFigures


@dataclass(frozen=True)
class CheckDetails:
    """What a check says beside its metric and observed-against-allowed (:meth:`CheckModel.gate`): the ``unit`` it
    counts in, ``offending`` of ``total`` units, ``where`` to look (the worst or first block), a ``note``, a
    ``hint`` and the limits key ``limit`` its allowed value came from (empty: a fixed 0). One value, so a judge
    hands the same details down whole."""

    unit: str = ""
    offending: int | None = None
    total: int | None = None
    where: str | None = None
    note: str = ""
    hint: str = ""
    limit: str = ""


NO_DETAILS = CheckDetails()


class CheckModel(Frozen):
    """One metric of one OP against its limit, as the score file holds it and as the judges build it
    (``harness.judging.judges.judge_base.Check`` is this class). The gate produces them; the CLI lines, the sign-off
    report's tables and the JUnit file all render the same rows (:meth:`line`), and promotion
    re-derives every ``ok`` from ``observed``, ``relation`` and ``allowed`` before it trusts a verdict.
    A check whose ``allowed`` is ``None`` is reported, not gated."""

    op: Literal[0, 1, 2]
    metric: Annotated[str, Field(min_length=1)]
    observed: bool | int | Number | None = Field(description="None: non-finite")
    relation: Literal["<=", ">=", "==", "report"]
    allowed: bool | int | Number | None = Field(description="None: reported, not gated")
    ok: bool | None
    unit: str
    offending: Count | None
    total: Count | None
    where: str | None = Field(description='where to look: "worst block \'b7\' window 3", "first block ..."')
    note: str
    hint: str
    limit: str = Field(description="the limits key `allowed` came from; empty: a fixed 0")

    @model_validator(mode="after")
    def _gated(self) -> CheckModel:
        if (self.relation == "report") != (self.allowed is None) or (self.relation == "report") != (self.ok is None):
            raise ValueError("a reported check has neither allowed nor ok; a gated one has both")
        return self

    @classmethod
    def gate(
        cls, op: int, metric: str, observed: Any, relation: str, allowed: Any, details: CheckDetails = NO_DETAILS
    ) -> CheckModel:
        """A gated check (``allowed`` given) or a reported one (``allowed`` None), told with ``details``; numpy
        scalars become Python numbers and non-finite observations None (files hold no such numbers)."""
        seen, d, gated = plain_number(observed), details, allowed is not None
        return cls.model_validate(
            {
                "op": op,
                "metric": metric,
                "observed": seen,
                "relation": relation if gated else NOT_GATED,
                "allowed": plain_number(allowed) if gated else None,
                "ok": holds(seen, relation, allowed) if gated else None,
                "unit": d.unit,
                "offending": plain_number(d.offending),
                "total": plain_number(d.total),
                "where": d.where,
                "note": d.note,
                "hint": d.hint,
                "limit": d.limit,
            }
        )

    @property
    def failed(self) -> bool:
        return self.ok is False

    @property
    def would_pass_at(self) -> str | None:
        """A failed check's least passing limit (:func:`harness.base.figures.passing_limit`); None when it passed,
        is not gated, or no limit passes it."""
        return passing_limit(self.observed, self.relation) if self.failed else None

    def passing_text(self) -> str:
        """What a failed check would have needed, for its line: '(would pass at 2.11e-4)', or '' when it did not
        fail or its limit is fixed."""
        if not self.failed:
            return ""
        if self.observed is None:
            return " (no limit passes a non-finite value)"
        at = self.would_pass_at
        return f" (would pass at {at})" if at is not None else ""

    def line(self) -> str:
        """One line: 'OP 0 max_abs: 0.505 > 0.0001 allowed, 3 of 4 096 windows (0.07 %), worst block 'b7'...'"""
        if self.observed is None and self.offending and self.total:
            # a figure over non-finite values (figure_check): says so, never a number that looks in range
            head = f"OP {self.op} {self.metric}: {non_finite_text(self.offending, self.total, self.unit)}"
            text = (
                f"{head} (reported, not gated)"
                if self.relation == NOT_GATED
                else f"{head}, {self.relation} {fmt(self.allowed)} allowed{self.passing_text()}"
            )
        else:
            head = f"OP {self.op} {self.metric}: {fmt(self.observed)}"
            if self.relation == NOT_GATED:
                text = f"{head} (reported, not gated)"
            else:
                rel = self.relation if self.ok else NEGATION[self.relation]
                text = f"{head} {rel} {fmt(self.allowed)} allowed{self.passing_text()}"
            if self.offending and self.total:
                text += f", {self.offending:,} of {self.total:,} {self.unit} ({percent(self.offending, self.total)})"
            elif self.offending:
                text += f", {self.offending:,} {self.unit}"
        if self.where:
            text += f", {self.where}"
        if self.note:
            text += f"; {self.note}"
        return text


class OpVerdictModel(Frozen):
    """Every check of one OP at one shape (or of the exact lane's reproduction); the judges build it
    with :meth:`of` (``harness.judging.judges.judge_base.OpVerdict`` is this class). ``passed`` and ``reasons``
    follow from the checks when it is built; a file's are kept as written (promotion re-derives them,
    ``harness.ledger.score_check``)."""

    op: Literal[0, 1, 2]
    shape: int | str
    passed: bool
    reasons: list[str]
    checks: list[CheckModel]
    # the figures, limits and worst rows by name: each judge's own (a segmentation judge's flips, a voiceprint
    # judge's cosines: harness.judging.judges); readers take them typed (figures, offenders, the limits' models)
    metrics: dict[str, Any] = Field(description="the judge's figures by name (max_abs, bitwise, flips, ...)")
    # each judge's own limits model, dumped (harness.data.judge_limits: LimitSet.document)
    limits: dict[str, Any] = Field(description="the limits judged against, by name (the OP's tolerances)")
    # each judge's own rows (harness.judging.judges.evidence_figures: WorstBlock, WorstRow)
    failing: list[dict[str, Any]] = Field(description="worst offenders, for the report (each judge's own rows)")
    distribution: list[Number | None] = Field(description="a sample of per-unit max |diff| for the plot")

    @property
    def figures(self) -> VerdictFigures:
        """The figures every judge may give, by attribute (``metrics`` keeps each judge's own by name)."""
        return VerdictFigures.of(self.metrics)

    @property
    def offenders(self) -> list[Offender]:
        """The worst offenders, by attribute (``failing`` keeps each judge's own rows as it wrote them)."""
        return [Offender.of(row) for row in self.failing]

    @classmethod
    def of(
        cls,
        op: int,
        shape: int | str,
        checks: list[CheckModel],
        metrics: dict[str, Any],  # the judge's totals as their fields (dataclasses.asdict): its own names
        limits: dict[str, Any],  # the judge's limits model's document: its own names
        failing: list[dict[str, Any]] | None = None,  # the judge's worst rows as their fields: its own names
        distribution: list[float | None] | None = None,
    ) -> OpVerdictModel:
        """A verdict from a judge's checks: passed and reasons derived; the free-form parts (metrics,
        limits, failing, distribution) made JSON-plain (numpy scalars as Python numbers, as the file
        holds them)."""
        return cls.model_validate(
            {
                "op": op,
                "shape": shape,
                "passed": not any(c.failed for c in checks),
                "reasons": [c.line() for c in checks if c.failed],
                "checks": list(checks),
                "metrics": plain(metrics),
                "limits": plain(limits),
                "failing": plain(failing or []),
                "distribution": plain(distribution or []),
            }
        )
