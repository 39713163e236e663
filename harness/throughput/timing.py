"""Throughput, latency and memory per lane and shape, from the recorded network calls.

Speedup is measured the way the lanes run: interleaved. Each packed call of exactly k blocks (a
last partial pack is excluded: it is not a k-block request) is paired
with the exact lane's calls of the *same* blocks (every OP of them), which ran moments before on
the same machine; the speedup is the median of those ratios, with a distribution-free 95 %
interval for the median (order statistics). When the interval includes 1 the speedup is within
noise. A call far slower than its lane's median (a stall: a page fault storm, another process) is
counted, and cannot move a median the way it moves a sum.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, NotRequired, TypedDict, cast

import numpy as np

from harness.data.call_record import CallRecord
from harness.data.ops import Op
from harness.data.schemas.results import STALL_FACTOR  # what the score's "stalls" count (a report says it)
from harness.judging.binomial import half_binomial_cdf


def summarize_calls(calls: Iterable[Mapping[str, Any]]) -> dict[str, LaneSummary]:
    """Key "exact" or the shape k as a string -> summary over every OP of that lane.

    blocks_per_s counts a block once it has been through every OP (segmentation and the
    voiceprints): it is the rate at which the engine could finish blocks in that lane.

    One pass over ``calls`` (a stream: a large corpus's log is never held whole); what is kept is a
    few numbers per call and the exact lane's time per block. ``calls``: the call log's records (mappings of its
    columns, as an evidence kind's ``observe`` passes them on; each read as a :class:`CallRecord`); the summary is
    the score's ``throughput`` object (the exact lane's speedup is 1 by definition, with no interval).
    """
    lanes: dict[str, dict[int, _OpCalls]] = defaultdict(dict)
    exact_time: dict[str, float] = defaultdict(float)  # block id -> exact wall time summed over its OPs
    units: dict[str, dict[frozenset[str], float]] = defaultdict(lambda: defaultdict(float))
    for given in calls:
        c = CallRecord.of(given)
        if c.replica != 0 or c.variant:  # a variant's calls (lanes.running.variants) are not the shape's
            continue
        key = "exact" if c.lane == "exact" else str(int(c.shape))
        lanes[key].setdefault(int(c.op), _OpCalls()).add(c)
        ids = c.block_ids
        if key == "exact":
            for b in ids:
                exact_time[b] += c.wall_s / max(1, len(ids))
        elif ids:
            units[key][frozenset(ids)] += c.wall_s
    out: dict[str, LaneSummary] = {}
    for key, per_op in lanes.items():
        lane = asdict(_lane(per_op))
        speedup = {"speedup": 1.0} if key == "exact" else asdict(_speedup(units.get(key, {}), exact_time, int(key)))
        out[key] = cast(LaneSummary, {**lane, **speedup})  # the dataclasses' fields, in their order (LaneSummary)
    return out


class LaneSummary(TypedDict):
    """One lane of the score's ``throughput`` object, JSON built to be written: :class:`LaneTiming`'s fields (each
    OP of ``ops`` with :class:`OpTiming`'s), then :class:`Speedup`'s (the exact lane's: ``speedup`` alone, 1)."""

    blocks: int
    wall_s: float
    blocks_per_s: float | None
    peak_device_mb: float | None
    ops: dict[str, dict[str, float | int | None]]
    stalls: int
    speedup: float | None
    speedup_interval: NotRequired[list[float] | None]
    repetitions: NotRequired[int]
    within_noise: NotRequired[bool | None]
    speedup_basis: NotRequired[str]


@dataclass(frozen=True)
class OpTiming:
    """One OP's calls of one lane (the score's ``throughput[lane].ops[op]``: fields in its key order)."""

    calls: int
    blocks: int
    wall_s: float
    blocks_per_s: float | None
    p50_ms: float
    p99_ms: float
    mean_request_mb: float
    peak_device_mb: float | None
    stalls: int


@dataclass(frozen=True)
class LaneTiming:
    """One lane over every OP (the score's ``throughput[lane]`` before its speedup: fields in its key order).
    ``blocks``: OP 0's, a block counted once it has been through every OP."""

    blocks: int
    wall_s: float
    blocks_per_s: float | None
    peak_device_mb: float | None
    ops: dict[str, OpTiming]
    stalls: int


@dataclass(frozen=True)
class Speedup:
    """A packed lane against the exact lane over the same blocks (module doc; fields in the score's key order)."""

    speedup: float | None
    speedup_interval: list[float] | None
    repetitions: int
    within_noise: bool | None
    speedup_basis: str


class _OpCalls:
    """One lane's calls of one OP, as numbers."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.blocks = 0
        self.request_bytes = 0
        self.peak: int | None = None

    def add(self, c: CallRecord) -> None:
        self.wall.append(float(c.wall_s))
        self.blocks += int(c.blocks)
        self.request_bytes += int(c.request_bytes)
        if c.peak_device_bytes is not None:
            self.peak = max(self.peak or 0, int(c.peak_device_bytes))


def _lane(per_op: dict[int, _OpCalls]) -> LaneTiming:
    out_ops: dict[str, OpTiming] = {}
    stalls = 0
    for op in sorted(per_op):
        calls = per_op[op]
        wall = np.array(calls.wall, dtype=np.float64)
        median = float(np.median(wall))
        op_stalls = int((wall > STALL_FACTOR * median).sum()) if median > 0 and wall.size >= 4 else 0
        stalls += op_stalls
        out_ops[str(op)] = OpTiming(
            calls=int(wall.size),
            blocks=calls.blocks,
            wall_s=float(wall.sum()),
            blocks_per_s=calls.blocks / float(wall.sum()) if wall.sum() > 0 else None,
            p50_ms=float(np.percentile(wall, 50) * 1e3),
            p99_ms=float(np.percentile(wall, 99) * 1e3),
            mean_request_mb=float(calls.request_bytes / wall.size / 1e6),
            peak_device_mb=calls.peak / 2**20 if calls.peak is not None else None,
            stalls=op_stalls,
        )
    total = sum(v.wall_s for v in out_ops.values())
    segmentation = per_op.get(int(Op.SEGMENTATION))  # every block goes through OP 0 once
    blocks = segmentation.blocks if segmentation is not None else 0
    peaks = [v.peak_device_mb for v in out_ops.values() if v.peak_device_mb is not None]
    return LaneTiming(
        blocks=blocks,
        wall_s=total,
        blocks_per_s=blocks / total if total > 0 else None,
        peak_device_mb=max(peaks) if peaks else None,
        ops=out_ops,
        stalls=stalls,
    )


def _speedup(units: dict[frozenset[str], float], exact_time: dict[str, float], k: int) -> Speedup:
    """Median over packed calls' block sets of (exact time of those blocks) / (packed time), over the
    **full** k-block requests only: a last partial pack is not a k-block request, and its time says
    nothing about one (a 16-block pack is not a 32-block speedup)."""
    full = {ids: wall for ids, wall in units.items() if len(ids) == k}
    excluded = len(units) - len(full)
    ratios = np.array(
        [
            sum(exact_time.get(b, 0.0) for b in ids) / wall
            for ids, wall in full.items()
            if wall > 0 and all(b in exact_time for b in ids)
        ],
        dtype=np.float64,
    )
    basis = (
        f"{ratios.size} full {k}-block request(s)" + (f"; {excluded} partial pack(s) excluded" if excluded else "")
        if ratios.size
        else f"no full {k}-block request: no speedup measured at k={k}"
    )
    if ratios.size == 0:
        return Speedup(speedup=None, speedup_interval=None, repetitions=0, within_noise=None, speedup_basis=basis)
    lo, hi = median_interval(ratios)
    interval = None if lo is None or hi is None else [lo, hi]  # both None, or neither
    within = None if interval is None else bool(interval[0] <= 1.0 <= interval[1])
    return Speedup(
        speedup=float(np.median(ratios)),
        speedup_interval=interval,
        repetitions=int(ratios.size),
        within_noise=within,
        speedup_basis=basis,
    )


def median_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Distribution-free interval for the median: order statistics x_(j)..x_(n-j+1) with
    P(Binomial(n, 1/2) <= j - 1) <= (1 - confidence) / 2. None when n is too small (n < 6)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    alpha = 1.0 - confidence
    cdf = half_binomial_cdf(n)
    j = int(np.searchsorted(cdf, alpha / 2 * (1 - 1e-12), side="left")) + 1 if n else 0  # ppf(alpha / 2) + 1
    while j > 0 and cdf[j - 1] > alpha / 2:
        j -= 1
    if j < 1:
        return None, None
    return float(v[j - 1]), float(v[n - j])
