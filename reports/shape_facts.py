"""One shape's row of the sign-off report: its verdict, why it may or may not be used, its OPs' checks.

Nothing is judged here: the checks are the gate's, the cause the score's; the one decision, "may the
engine use this shape now?", follows from the ledger, this run and the golden (``reports.signoff``).
Also the production audit's OP rows (``reports.audit_report``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.data.schemas.localisation import LocalisedOp
from harness.data.schemas.records import LedgerEntry
from harness.data.schemas.results import LaneTiming, OpVerdictModel, ShapeScore
from harness.judging.judges.judge_base import shown_figure
from harness.ledger.promotion import PROMOTED, REVOKED
from reports.advice import op_next, slow_note, speed_measured
from reports.plots import bitwise_line

MAX_FAILING_ROWS = 10  # worst offenders per OP listed in the report (the score keeps 20)


def shape_facts(
    k: str,
    s: ShapeScore | None,
    entry: LedgerEntry | None,
    timing: LaneTiming | None,
    golden_ok: bool,
    ledger_given: bool,
    localisation: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """One shape's row: ``s`` its score (None: in the ledger, not scored in this run), ``entry`` its ledger entry,
    ``timing`` its lane's (None: no lane timed)."""
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
            op: {**op_facts(v), "next": [] if v.passed else op_next(v.checks, (loc or {}).get(op))}
            for op, v in sorted(s.ops.items())
        }
        if s is not None
        else {}
    )
    op0 = s.ops["0"].metrics if s is not None else {}
    shape = {
        "shape": int(k),
        "scored": s is not None,
        "verdict": verdict,
        "reasons": _reasons(s),
        "cause": s.cause.model_dump(mode="json") if s is not None and s.cause is not None else None,
        "warnings": [{"shape": int(k), **w.model_dump(mode="json")} for w in s.warnings] if s is not None else [],
        "usable": usable,
        "why": _why(s, entry, golden_ok, ledger_given, usable),
        "ledger_state": state,
        "revoked_by": entry.revoked_by if entry is not None and state == REVOKED else None,
        "speedup": lane.speedup,
        "speedup_interval": lane.speedup_interval,
        "within_noise": lane.within_noise,
        "repetitions": lane.repetitions,
        "speedup_basis": lane.speedup_basis,  # full k-block requests only
        "requests": s.requests.model_dump(mode="json") if s is not None else None,  # full k-block requests behind it
        "stalls": lane.stalls,
        "blocks_per_s": lane.blocks_per_s,
        "op0_max_abs": shown_figure(op0, "max_abs"),  # 'non-finite (N of M windows)', never a finite-only figure
        "min_cosine": {op: shown_figure(s.ops[op].metrics, "min_cosine") for op in ("1", "2") if op in s.ops}
        if s is not None
        else {},
        "flips": {"near_tie": op0.get("argmax_flips_near_tie"), "confident": op0.get("argmax_flips_confident")}
        if op0
        else None,
        "vs_exact": s.vs_exact if s is not None else None,
        "ops": ops,
        "localisation": loc,
    }
    note = slow_note(shape)  # usable, but slower than k=1 here: say so, with its sample and interval
    return {**shape, "slow_note": note, "slow_note_measured": note is not None and speed_measured(shape)}  # bold then


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


def op_facts(v: OpVerdictModel) -> dict[str, Any]:
    """One OP's verdict as the pages show it (also the production audit's: ``reports.audit_report``)."""
    return {
        "op": v.op,
        "passed": v.passed,
        "verdict": "pass" if v.passed else "fail",
        "reasons": list(v.reasons),
        "checks": [{**c.model_dump(mode="json"), "would_pass_at": c.would_pass_at} for c in v.checks],
        "metrics": v.metrics,
        "limits": v.limits,
        "failing": list(v.failing)[:MAX_FAILING_ROWS],
        "bitwise_line": bitwise_line(v.op, v.metrics),  # replaces the histogram when set
        "distribution": _distribution_summary(v.distribution),
    }


def _distribution_summary(values: Sequence[float | None]) -> dict[str, Any]:
    finite = np.array([v for v in values if v is not None], dtype=np.float64)
    return {
        "n": len(values),
        "zero": int(np.count_nonzero(finite == 0.0)),
        "non_zero": int(np.count_nonzero(finite != 0.0)),
        "non_finite": len(values) - int(finite.size),
        "max": float(finite.max()) if finite.size else None,
        "p99": float(np.percentile(finite, 99)) if finite.size else None,
    }


def _localisation(loc: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A failing shape's localisation per OP as the pages show it; each OP's read as the file's ``LocalisedOp``."""
    if not loc:
        return None
    out = {}
    for op, written in sorted(loc.items()):
        item = LocalisedOp.model_validate(written)
        out[op] = {
            "available": item.available,
            "reason": item.reason,
            "first_diverging_layer": item.first_diverging_layer,
            "blocks": item.blocks if item.blocks is not None else [],
            "k": item.k,
            "per_block": [{"block": item.block, **(item.detail or {})}] if item.block else [],
        }
    return out
