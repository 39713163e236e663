"""The report's sentence on what a lane's timing measures, and the harness's share beside it.

A speedup compares the network calls of two lanes; on a fast device the harness's own work between
calls can be what keeps the device idle, and the speedups would hide it. The score's ``host``
(:mod:`harness.throughput.host_share`) holds that share; this sentence shows it under the speedup tables.
"""

from __future__ import annotations

from harness.data.schemas.results import Score


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
