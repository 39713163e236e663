"""Schema of the load sweep's evidence: the score's optional ``load`` key.

A shape promoted on answers measured at one concurrency may still be served under more: the sweep
sends each candidate shape's requests to the Triton server at several concurrencies, checks every
answer against the golden with the lanes' own judges, and records per (shape, concurrency) the
latency percentiles, the throughput and the server's own queue and compute time (the difference of
Triton's cumulative statistics before and after the point). A point whose answers fail refuses its
shape (``harness.evidence.load_evidence``); the budget pick names the fastest accurate point within the
configured p99 latency budget.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from harness.data.schemas.base import Count, Frozen, NonNeg, OpKey, Positive, ShapeKey
from harness.data.shape import ShapeInt


class ServerStats(Frozen):
    """Triton's statistics of one model over one point (``/v2/models/<name>/stats``: after minus before).

    Cumulative counters, so a difference is what this point's requests cost on the server; ``requests`` is
    the successful-inference count (``inference_stats.success.count``)."""

    requests: Count
    queue_ns: Count
    compute_input_ns: Count
    compute_infer_ns: Count
    compute_output_ns: Count


class LoadPoint(Frozen):
    """One shape at one concurrency: every request of the sample sent with ``concurrency`` in flight."""

    concurrency: Positive
    requests: Count = Field(description="requests sent (every OP)")
    checked: Count = Field(description="responses checked against the golden (every one: equal to requests)")
    blocks: Count = Field(description="blocks judged (per OP)")
    p50_ms: NonNeg = Field(description="median request latency, send to answer")
    p99_ms: NonNeg = Field(description="99th percentile request latency (nearest rank)")
    wall_s: NonNeg = Field(description="wall time of the point, first send to last answer")
    blocks_per_s: NonNeg = Field(description="OP 0 blocks per second of wall time")
    queue_ms: NonNeg | None = Field(
        description="server queue time per request (mean, from the stats delta); None: the server gave no statistics"
    )
    compute_ms: NonNeg | None = Field(description="server compute time per request (input + infer + output, mean)")
    stats: ServerStats | None = Field(description="the server's statistics delta over the point")
    ops_passed: dict[OpKey, bool] = Field(description="per OP: every answer within the score's tolerances")
    accurate: bool = Field(description="every OP passed and every response was checked")
    reasons: list[str] = Field(description="why the point is not accurate (empty when it is)")

    @model_validator(mode="after")
    def _consistent(self) -> LoadPoint:
        if self.accurate != (all(self.ops_passed.values()) and self.checked == self.requests and not self.reasons):
            raise ValueError("accurate must be: every OP passed, every response checked, no reason")
        return self


class ShapeLoad(Frozen):
    shape: ShapeInt
    points: list[LoadPoint] = Field(description="one per concurrency, in the sweep's order")


class PointRef(Frozen):
    shape: ShapeInt
    concurrency: Positive


class BudgetPick(Frozen):
    """The fastest point (blocks per second) that is accurate, meets the p99 budget and whose shape passed."""

    shape: ShapeInt
    concurrency: Positive
    p99_ms: NonNeg
    blocks_per_s: NonNeg


class LoadEvidence(Frozen):
    """``score.load``: the concurrency sweep of every candidate shape on the Triton backend."""

    url: Annotated[str, Field(min_length=1)]
    model_name: Annotated[str, Field(min_length=1)]
    blocks: Count = Field(description="blocks sent per point (the [load] blocks sample of the golden's corpus)")
    concurrency: list[Positive] = Field(description="the sweep's concurrencies ([load] concurrency)")
    shapes: dict[ShapeKey, ShapeLoad]
    p99_budget_ms: NonNeg | None = Field(description="[load] p99_budget_ms; None: no budget given")
    meets_budget: list[PointRef] = Field(description="every accurate point within the budget, of shapes that passed")
    budget: BudgetPick | None = Field(description="the best of them (None: none, or no budget)")
