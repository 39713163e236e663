"""Judging the load sweep: a shape must stay accurate under load to be promoted.

The sweep itself (``harness.pipeline.load_sweep``) sends the requests; this module turns what came
back into evidence and verdicts, with no I/O, so that promotion can re-derive them from the score
(``harness.ledger.score_check``): a point is accurate when every response was checked and every OP's answers
are within the score's tolerances; one inaccurate point refuses its shape, with a reason naming the
concurrency and the failing check. The budget pick is the fastest accurate point within the p99
budget among the shapes that passed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.data.schemas.load import BudgetPick, LoadEvidence, LoadPoint, PointRef, ServerStats, ShapeLoad
from harness.data.schemas.refusals import NOT_REPRODUCIBLE, Cause
from harness.data.schemas.results import OpVerdictModel, Score
from harness.data.shape import Shape
from harness.evidence.kind import KindDefaults
from harness.judging.lane_scoring import op_key

__all__ = ["LoadKind", "PointTraffic", "budget_pick", "load_point", "load_refusals", "nearest_rank"]


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile by nearest rank (a value that was observed; p99 of 10 requests is the slowest)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


@dataclass(frozen=True)
class PointTraffic:
    """What one (shape, concurrency) point sent and got back: every request's latency, the point's wall, the
    blocks it carried, its requests and how many of their responses were checked against the golden."""

    latencies_s: Sequence[float]
    wall_s: float
    blocks: int
    requests: int
    checked: int


def load_point(
    shape: int, concurrency: int, traffic: PointTraffic, verdicts: Sequence[OpVerdictModel], stats: ServerStats | None
) -> LoadPoint:
    """One (shape, concurrency) point from its requests' latencies and its OPs' verdicts against the golden."""
    latencies_s, wall_s, blocks = traffic.latencies_s, traffic.wall_s, traffic.blocks
    requests, checked = traffic.requests, traffic.checked
    reasons: list[str] = []
    if checked != requests:
        reasons.append(
            f"k={shape} at concurrency {concurrency}: {checked} of {requests} responses were checked "
            "against the golden; every response must be (a bug in the sweep: report it)"
        )
    for v in verdicts:
        reasons += [f"k={shape} at concurrency {concurrency}: {r}" for r in v.reasons]
    ops_passed = {op_key(v.op): v.passed for v in verdicts}
    served = stats.requests if stats is not None else 0
    queue = compute = None
    if stats is not None and served:
        queue = stats.queue_ns / served / 1e6
        compute = (stats.compute_input_ns + stats.compute_infer_ns + stats.compute_output_ns) / served / 1e6
    ms = [1000.0 * s for s in latencies_s]
    return LoadPoint(
        concurrency=concurrency,
        requests=requests,
        checked=checked,
        blocks=blocks,
        p50_ms=nearest_rank(ms, 50),
        p99_ms=nearest_rank(ms, 99),
        wall_s=max(0.0, float(wall_s)),
        blocks_per_s=blocks / wall_s if wall_s > 0 else 0.0,
        queue_ms=queue,
        compute_ms=compute,
        stats=stats,
        ops_passed=ops_passed,
        accurate=not reasons and all(ops_passed.values()),
        reasons=reasons,
    )


def load_refusals(load: LoadEvidence | None, shape: int | str) -> list[str]:
    """The reasons the sweep refuses ``shape`` (empty: every point accurate, or the shape was not swept)."""
    if load is None:
        return []
    entry = load.shapes.get(str(int(shape)))
    if entry is None:
        return []
    bad = [p for p in entry.points if not p.accurate]
    if not bad:
        return []
    where = ", ".join(str(p.concurrency) for p in bad)
    first = bad[0].reasons[0] if bad[0].reasons else "not accurate"
    return [
        f"k={shape} is not accurate under load (concurrency {where} of the sweep {load.concurrency}): {first}; "
        "a shape must give the golden's answers at every concurrency the engine may use: look for state shared "
        "between requests in the model or the server (instance_group, a global buffer)"
    ]


def budget_pick(
    shapes: Mapping[str, ShapeLoad], budget_ms: float | None, eligible: Sequence[str]
) -> tuple[list[PointRef], BudgetPick | None]:
    """Every accurate point of an ``eligible`` shape within ``budget_ms``, and the fastest (ties: the smaller
    concurrency, then the smaller k)."""
    if budget_ms is None:
        return [], None
    meets = [
        (s, p) for key, s in shapes.items() if key in eligible for p in s.points if p.accurate and p.p99_ms <= budget_ms
    ]
    refs = [PointRef(shape=s.shape, concurrency=p.concurrency) for s, p in meets]
    if not meets:
        return refs, None
    s, p = max(meets, key=lambda sp: (sp[1].blocks_per_s, -sp[1].concurrency, -sp[0].shape))
    return refs, BudgetPick(shape=s.shape, concurrency=p.concurrency, p99_ms=p.p99_ms, blocks_per_s=p.blocks_per_s)


class LoadKind(KindDefaults):
    """The load sweep: every candidate shape's requests again at each concurrency, judged against the golden
    (module doc); it refuses a shape from the score's ``load`` as a whole."""

    name = "load"

    def refusals(self, score: Score, k: Shape) -> list[tuple[Cause, str]]:
        return [(NOT_REPRODUCIBLE, line) for line in load_refusals(score.load, k)]
