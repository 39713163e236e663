"""A packer that records what it is asked to pack (for tests of which sizes the laws reach).

``harness laws --packer tests.recording_packer:RecordingPacker`` packs with the harness's packer
and appends ``(len(items), pad_to)`` of every pack call to :data:`SEEN`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from harness.data.blocks import Block
from harness.packers.packing import PackedRequest, pack, unpack

SEEN: list[tuple[int, int | None]] = []


class RecordingPacker:
    """The harness's packing, with every request's size recorded in :data:`SEEN`."""

    name = "recording"

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
        SEEN.append((len(items), pad_to))
        return pack(items, pad_to=pad_to)

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return unpack(packed, outputs)

    def describe(self) -> dict:
        return {"name": self.name, "kind": "test"}
