"""The report's throughput table (a row per timed lane) and its sentence on what a lane's timing measures, and
the harness's share beside it.

A speedup compares the network calls of two lanes; on a fast device the harness's own work between
calls can be what keeps the device idle, and the speedups would hide it. The score's ``host``
(:mod:`harness.throughput.host_share`) holds that share; this sentence shows it under the speedup tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.data.schemas.results import Figure, OpTiming, Score


def timing_line(score: Score) -> str:
    """What a lane's timing measures, and the harness's own share the speedups leave out; with several requests in
    flight (a Triton backend at concurrency > 1) the calls overlap and no share is derived from their sum."""
    line = (
        "Timing: every lane's figure (blocks/s, latency, speedup) is the network call alone, request to answer "
        "(device time); the harness's own work between calls (reading, packing, validating, unpacking, masks, "
        "writing) is not in it"
    )
    h = score.host
    if h is None:
        return line + " (this run did not record its lanes' wall: a run before it was recorded, or merged shards)."
    backend = score.backend
    if backend is not None and backend.concurrency > 1:  # calls overlap: wall minus their summed time is no share
        return (
            f"{line}. Here {backend.concurrency} requests were in flight at once ({backend.name}), so calls "
            f"overlapped: {h.device_s:.3g} s of calls summed beside the lanes' {h.lanes_wall_s:.3g} s wall; the "
            "harness's own share cannot be told from these two figures (run at concurrency 1, "
            "--set backend.concurrency=1, to measure it)."
        )
    share = h.host_s / h.lanes_wall_s * 100 if h.lanes_wall_s > 0 else 0.0
    return (
        f"{line}: here {h.host_s:.3g} s of the lanes' {h.lanes_wall_s:.3g} s wall ({share:.0f} %, "
        f"{h.host_ms_per_block:.3g} ms per block), beside {h.device_s:.3g} s of calls."
    )


@dataclass(frozen=True)
class LaneRow:
    """One lane of the throughput table: its k (1 for the exact lane), the verdict of its shape, its timing and
    speed-up over the exact lane, and per OP its calls."""

    lane: str
    k: int
    verdict: str
    blocks: Figure
    blocks_per_s: Figure
    speedup: Figure
    speedup_interval: list[int | float] | None
    within_noise: bool | None
    repetitions: Figure
    stalls: Figure
    peak_device_mb: Figure
    ops: dict[str, LaneOpRow]


@dataclass(frozen=True)
class LaneOpRow:
    """One OP's calls in a lane, as the throughput table shows them (the figures as the lane's summary wrote
    them: an int stays an int, so the schema's float-coercing ``LaneOpTiming`` is not used to build it)."""

    calls: Figure
    p50_ms: Figure
    p99_ms: Figure
    mean_request_mb: Figure
    peak_device_mb: Figure
    blocks_per_s: Figure
    stalls: Figure


def throughput_rows(score: Score) -> list[LaneRow]:
    """Every timed lane, the exact lane first, then by k; a lane's verdict is its shape's in this score."""
    lanes = score.lane_timings()
    rows = []
    for key in sorted(lanes, key=lambda x: 0 if x == "exact" else int(x)):
        t = lanes[key]
        shape = score.shapes.get(key)
        verdict = "exact" if key == "exact" else (shape.verdict if shape is not None else "not scored")
        rows.append(
            LaneRow(
                lane=key,
                k=1 if key == "exact" else int(key),
                verdict=verdict,
                blocks=t.blocks,
                blocks_per_s=t.blocks_per_s,
                speedup=1.0 if key == "exact" else t.speedup,
                speedup_interval=t.speedup_interval,
                within_noise=t.within_noise,
                repetitions=t.repetitions,
                stalls=t.stalls,
                peak_device_mb=t.peak_device_mb,
                ops={op: _op_timing(v) for op, v in sorted(t.ops.items())},
            )
        )
    return rows


def _op_timing(v: OpTiming) -> LaneOpRow:
    """One OP's calls in a lane, as the throughput table shows them."""
    return LaneOpRow(
        calls=v.calls,
        p50_ms=v.p50_ms,
        p99_ms=v.p99_ms,
        mean_request_mb=v.mean_request_mb,
        peak_device_mb=v.peak_device_mb,
        blocks_per_s=v.blocks_per_s,
        stalls=v.stalls,
    )
