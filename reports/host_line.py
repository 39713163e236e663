"""The report's sentence on what a lane's timing measures, and the harness's share beside it (issue 25.4).

A speedup compares the network calls of two lanes; on a fast device the harness's own work between
calls can be what keeps the device idle, and the speedups would hide it. The score's ``host``
(:mod:`harness.host_share`) holds that share; this sentence shows it under the speedup tables.
"""

from __future__ import annotations

from harness.data.schemas.results import Score


def timing_line(score: Score) -> str:
    """What a lane's timing measures, and the harness's own share the speedups leave out (issue 25.4)."""
    line = ("Timing: every lane's figure (blocks/s, latency, speedup) is the network call alone, request to answer "
            "(device time); the harness's own work between calls (reading, packing, validating, unpacking, masks, "
            "writing) is not in it")
    h = score.host
    if h is None:
        return line + " (this run did not record its lanes' wall: a run before it was recorded, or merged shards)."
    share = h.host_s / h.lanes_wall_s * 100 if h.lanes_wall_s > 0 else 0.0
    return (f"{line}: here {h.host_s:.3g} s of the lanes' {h.lanes_wall_s:.3g} s wall ({share:.0f} %, "
            f"{h.host_ms_per_block:.3g} ms per block), beside {h.device_s:.3g} s of calls.")
