"""``score.json``'s ``host``: how the run's lanes spent their wall (the report's honesty).

A lane's timing (``throughput``, every speedup) is the network call alone: the backend's call from
request to answer, the device's time. The harness's own work between the calls (reading, packing,
validating, unpacking, masks, writing) is not in it; on a fast device it is what keeps the device
idle, so the report gives it beside the speedups rather than let them stand for the whole cost.
"""

from __future__ import annotations

from pydantic import Field

from harness.data.schemas.base import Frozen, NonNeg, Positive


class HostShare(Frozen):
    """The lanes' wall split into the network calls and the harness's own work (one process's run)."""

    lanes_wall_s: NonNeg = Field(
        description="the run's lanes, first group's start to the last answer taken (the run manifest's lanes_wall_s)"
    )
    device_s: NonNeg = Field(
        description="the logged calls' time summed: the network call alone, as every lane's "
        "timing measures it (the untimed warm-up calls are not logged)"
    )
    host_s: NonNeg = Field(
        description="lanes_wall_s - device_s (0 when calls overlapped, several requests in "
        "flight): the harness's own work between calls, and the warm-ups"
    )
    blocks: Positive = Field(description="blocks the run's lanes ran")
    host_ms_per_block: NonNeg = Field(description="host_s per block, in milliseconds")
