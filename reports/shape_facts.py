"""One shape's row of the sign-off report: its verdict, why it may or may not be used, its OPs' checks.

Nothing is judged here: the checks are the gate's, the cause the score's; the one decision, "may the
engine use this shape now?", follows from the ledger, this run and the golden (``reports.signoff``).
Also the production audit's OP rows (``reports.audit_report``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.data.schemas.base import OpKey
from harness.data.schemas.localisation import LocalisedOp
from harness.data.schemas.records import LedgerEntry
from harness.data.schemas.refusals import EvidenceWarning, RefusalCause
from harness.data.schemas.results import Figure, LaneTiming, OpVerdictModel, RequestEvidence, ShapeScore
from harness.data.schemas.verdicts import CheckModel
from harness.judging.judges.judge_base import shown_figure
from harness.ledger.promotion import PROMOTED, REVOKED
from reports.advice import LocalisationRow, ShapeSpeed, op_next, slow_note, speed_measured
from reports.plots import bitwise_line
from reports.row_view import MERGED

MAX_FAILING_ROWS = 10  # worst offenders per OP listed in the report (the score keeps 20)


@dataclass(frozen=True)
class CheckRow:
    """A check as the pages show it: the gate's own row, and the least limit it would pass at."""

    check: CheckModel = field(metadata=MERGED)
    would_pass_at: str | None


@dataclass(frozen=True)
class Distribution:
    """A summary of the sample of per-unit max |diff| the score keeps for the plot."""

    n: int
    zero: int
    non_zero: int
    non_finite: int
    max: float | None
    p99: float | None


@dataclass(frozen=True)
class OpRow:
    """One OP's verdict as the pages show it: its checks, its worst rows, its distribution and the judge's
    figures and limits, copied from the score as its verdict holds them (each judge's own, by name)."""

    op: int
    passed: bool
    verdict: str
    reasons: list[str]
    checks: list[CheckRow]
    metrics: dict[str, Any]  # OpVerdictModel.metrics as the score holds it: each judge's own figures, by name
    limits: dict[str, Any]  # OpVerdictModel.limits as the score holds it: the OP's tolerances, by name
    failing: list[dict[str, Any]]  # OpVerdictModel.failing as the score holds it: each judge's own rows
    bitwise_line: str | None  # replaces the histogram when set
    distribution: Distribution


@dataclass(frozen=True)
class ShapeOpRow(OpRow):
    """One OP of a shape's row: its verdict, and what to do next where it failed."""

    next: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Flips:
    """OP 0's argmax flips against the golden, near a tie and confident (None: its judge gives none)."""

    near_tie: int | None
    confident: int | None


@dataclass(frozen=True)
class ShapeWarning:
    """An evidence warning of the score, with the shape it is about."""

    shape: int
    warning: EvidenceWarning = field(metadata=MERGED)


@dataclass(frozen=True)
class ShapeRow:
    """One shape's row of the sign-off report (report.json's ``shapes``): see :func:`shape_facts`."""

    shape: int
    scored: bool
    verdict: str
    reasons: list[str]
    cause: RefusalCause | None
    warnings: list[ShapeWarning]
    usable: bool
    why: str
    ledger_state: str | None
    revoked_by: str | None
    speedup: Figure
    speedup_interval: list[int | float] | None
    within_noise: bool | None
    repetitions: Figure
    speedup_basis: str | None  # full k-block requests only
    requests: RequestEvidence | None  # full k-block requests behind it
    stalls: Figure
    blocks_per_s: Figure
    op0_max_abs: float | str | None  # 'non-finite (N of M windows)', never a finite-only figure
    min_cosine: dict[str, float | str | None]  # OP 1 and 2's, shown likewise
    flips: Flips | None
    vs_exact: dict[str, Any] | None  # ShapeScore.vs_exact as the score holds it (its packing effect, by name)
    ops: dict[OpKey, ShapeOpRow]
    localisation: dict[str, LocalisationRow] | None
    slow_note: str | None  # usable, but slower than k=1 here: said with its sample and interval
    slow_note_measured: bool  # the note rests on a measured speed: bold then


def shape_facts(
    k: str,
    s: ShapeScore | None,
    entry: LedgerEntry | None,
    timing: LaneTiming | None,
    golden_ok: bool,
    ledger_given: bool,
    localisation: Mapping[str, Any] | None,
) -> ShapeRow:
    """One shape's row: ``s`` its score (None: in the ledger, not scored in this run), ``entry`` its ledger entry,
    ``timing`` its lane's (None: no lane timed), ``localisation`` its OPs' as the localisation file holds them."""
    lane = timing or LaneTiming()
    verdict = s.verdict if s is not None else "not scored"
    state = entry.state if entry is not None else None
    passed_now = s is not None and verdict == "pass" and golden_ok
    if entry is not None:  # the ledger decides; a failed run or an unreproduced golden overrules it
        usable = state == PROMOTED and golden_ok and (s is None or passed_now)
    else:
        usable = passed_now
    loc = _localisation(localisation) if s is not None and verdict == "fail" else None
    # each OP's row, with what to do next, worded as JUnit words it (localisation's finding where it ran)
    ops = (
        {
            op: ShapeOpRow(
                **vars(op_facts(v)), next=[] if v.passed else op_next(v.checks, loc.get(op) if loc else None)
            )
            for op, v in sorted(s.ops.items())
        }
        if s is not None
        else {}
    )
    op0 = next(v for v in s.ops.values() if v.op == 0).metrics if s is not None else {}
    speed = ShapeSpeed(
        shape=int(k),
        usable=usable,
        ledger_state=state,
        speedup=lane.speedup,
        speedup_interval=lane.speedup_interval,
        within_noise=lane.within_noise,
        repetitions=lane.repetitions,
    )
    note = slow_note(speed)
    return ShapeRow(
        shape=int(k),
        scored=s is not None,
        verdict=verdict,
        reasons=_reasons(s),
        cause=s.cause if s is not None else None,
        warnings=[ShapeWarning(int(k), w) for w in s.warnings] if s is not None else [],
        usable=usable,
        why=_why(s, entry, golden_ok, ledger_given, usable),
        ledger_state=state,
        revoked_by=entry.revoked_by if entry is not None and state == REVOKED else None,
        speedup=lane.speedup,
        speedup_interval=lane.speedup_interval,
        within_noise=lane.within_noise,
        repetitions=lane.repetitions,
        speedup_basis=lane.speedup_basis,
        requests=s.requests if s is not None else None,
        stalls=lane.stalls,
        blocks_per_s=lane.blocks_per_s,
        op0_max_abs=shown_figure(op0, "max_abs"),
        min_cosine={op: shown_figure(v.metrics, "min_cosine") for op, v in sorted(s.ops.items()) if op in ("1", "2")}
        if s is not None
        else {},
        flips=_flips(op0),
        vs_exact=s.vs_exact if s is not None else None,
        ops=ops,
        localisation=loc,
        slow_note=note,
        slow_note_measured=note is not None and speed_measured(speed),
    )


def _flips(op0: Mapping[str, Any]) -> Flips | None:
    """OP 0's flips (None: no OP 0 figures; a figure its judge does not give: None)."""
    if not op0:
        return None
    # the segmentation judge's own figures, by their names in the score (not every judge's: not in VerdictFigures)
    return Flips(near_tie=op0.get("argmax_flips_near_tie"), confident=op0.get("argmax_flips_confident"))


def _why(s: ShapeScore | None, entry: LedgerEntry | None, golden_ok: bool, ledger_given: bool, usable: bool) -> str:
    """One sentence: why this shape may or may not be used (``s`` None: not scored in this run)."""
    state = entry.state if entry is not None else None
    revoked_by = entry.revoked_by if entry is not None else None
    if usable:
        if state == PROMOTED and entry is not None:
            last_pass = [h for h in entry.history if h.verdict == "pass"]
            by = f" by run {last_pass[-1].run_id}" if last_pass else ""
            return f"promoted{by}" + ("" if s is not None else "; not scored in this run")
        where = "not recorded in the ledger" if ledger_given else "no ledger given"
        return f"passed in this run; {where}"
    if not golden_ok:
        done = "not scored" if s is None else ("passed" if s.verdict == "pass" else "failed")
        return f"{done}, but judged against a golden this environment does not reproduce: no packed shape may be used"
    if s is not None and s.verdict == "fail":
        reasons = _reasons(s)
        first = reasons[0] if reasons else "failed"
        if s.cause is not None:  # the cause first, then the evidence that decided it
            first = s.cause.text(s.shape)
        more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
        prefix = f"revoked by run {revoked_by}: " if state == REVOKED and revoked_by else ""
        return f"{prefix}{first}{more}"
    if state == REVOKED:
        return f"revoked by run {revoked_by or '?'}"
    if state is not None:
        return f"ledger state {state}"
    return "not promoted"


def _reasons(s: ShapeScore | None) -> list[str]:
    """A shape's reasons, the evidence that decided its refusal first (its cause's; then the others in order)."""
    if s is None:
        return []
    if s.cause is None:
        return list(s.reasons)
    return [s.cause.evidence, *(r for r in s.reasons if r != s.cause.evidence)]


def op_facts(v: OpVerdictModel) -> OpRow:
    """One OP's verdict as the pages show it (also the production audit's: ``reports.audit_report``)."""
    return OpRow(
        op=v.op,
        passed=v.passed,
        verdict="pass" if v.passed else "fail",
        reasons=list(v.reasons),
        checks=[CheckRow(c, c.would_pass_at) for c in v.checks],
        metrics=v.metrics,
        limits=v.limits,
        failing=list(v.failing)[:MAX_FAILING_ROWS],
        bitwise_line=bitwise_line(v.op, v.metrics),
        distribution=_distribution_summary(v.distribution),
    )


def _distribution_summary(values: Sequence[float | None]) -> Distribution:
    finite = np.array([v for v in values if v is not None], dtype=np.float64)
    return Distribution(
        n=len(values),
        zero=int(np.count_nonzero(finite == 0.0)),
        non_zero=int(np.count_nonzero(finite != 0.0)),
        non_finite=len(values) - int(finite.size),
        max=float(finite.max()) if finite.size else None,
        p99=float(np.percentile(finite, 99)) if finite.size else None,
    )


def _localisation(loc: Mapping[str, Any] | None) -> dict[str, LocalisationRow] | None:
    """A failing shape's localisation per OP as the pages show it; each OP's read as the file's ``LocalisedOp``."""
    if not loc:
        return None
    out = {}
    for op, written in sorted(loc.items()):
        item = LocalisedOp.model_validate(written)
        out[op] = LocalisationRow(
            available=item.available,
            reason=item.reason,
            first_diverging_layer=item.first_diverging_layer,
            blocks=item.blocks if item.blocks is not None else [],
            k=item.k,
            per_block=[{"block": item.block, **(item.detail or {})}] if item.block else [],
        )
    return out
