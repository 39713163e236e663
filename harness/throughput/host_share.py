"""The harness's own share of a run's lanes: what the speedups do not count.

Every lane's timing is the network call alone (``CallRecord.wall_s``: request to answer, the device's
time), so the speedups compare devices' work, not the harness's. The run records the lanes' wall in
its manifest (``lanes_wall_s``); scoring sums the logged calls (:class:`DeviceTime`, in the same pass
over the call log as the other figures) and :func:`host_entry` gives the score's ``host``: the rest
is the harness's own work between calls, per block, which the report shows beside the speedups.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypedDict

from harness.data.call_record import CallRecord


class DeviceTime:
    """Sums ``wall_s`` of the calls passing through :meth:`observe` (every lane: the variants' too)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def observe(self, calls: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for call in calls:  # the call log's records, passed on as they came (the kinds' observe protocol)
            self.seconds += float(CallRecord.of(call).wall_s)
            yield call


class HostEntry(TypedDict):
    """The score's ``host`` object as it is written (:class:`harness.data.schemas.host.HostShare` checks it)."""

    lanes_wall_s: float
    device_s: float
    host_s: float
    blocks: int
    host_ms_per_block: float


def host_entry(lanes_wall_s: float | None, device_s: float, blocks: int) -> HostEntry | None:
    """The score's ``host`` object (:class:`harness.data.schemas.host.HostShare`, checked when the score is); None
    for a run that did not record its lanes' wall (a run before it, merged shards: their walls do not add up to one)."""
    if lanes_wall_s is None or blocks <= 0:
        return None
    host_s = max(0.0, float(lanes_wall_s) - device_s)
    return HostEntry(
        lanes_wall_s=float(lanes_wall_s),
        device_s=device_s,
        host_s=host_s,
        blocks=blocks,
        host_ms_per_block=host_s * 1e3 / blocks,
    )
