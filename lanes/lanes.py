"""The two lanes. Both pack through the one packer and call the same backend.

- The **exact lane** sends only the release's batch shapes (one block per call, unless the
  release says otherwise) and refuses anything else: its outputs are what the release ships.
- The **fast lane** sends k blocks per call (optionally padded to exactly k with empty
  blocks, as a fixed-compiled-batch runtime would) and unpacks the answer per block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from harness.blocks import Block
from harness.errors import LaneError
from harness.ops import Op
from harness.packing import pack, unpack
from lanes.backend import Backend


@dataclass(frozen=True)
class CallRecord:
    """One network call: what was sent and what it cost."""

    lane: str  # "exact" or "fast"
    shape: int  # the lane's blocks per call (k); padding counts
    op: int
    blocks: int  # real blocks in this call
    windows: int
    rows: int
    request_bytes: int
    wall_s: float
    peak_device_bytes: int | None
    replica: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class ExactLane:
    name = "exact"

    def __init__(self, backend: Backend, release_shapes: Mapping[Op, Sequence[int]], log: list[CallRecord]) -> None:
        self.backend = backend
        self.release_shapes = {Op(op): tuple(int(k) for k in ks) for op, ks in release_shapes.items()}
        self.log = log

    @property
    def shape(self) -> int:
        return min(self.release_shapes[Op.SEGMENTATION])

    def run(self, blocks: Sequence[Block], replica: int = 0) -> list[np.ndarray]:
        if not blocks:
            return []
        op = blocks[0].op
        allowed = self.release_shapes.get(op, ())
        if len(blocks) not in allowed:
            raise LaneError(
                f"exact lane refuses a call of {len(blocks)} block(s) for OP {int(op)}: the release's "
                f"shapes for OP {int(op)} are {list(allowed)} block(s) per call"
            )
        return _call(self.backend, self.log, self.name, len(blocks), blocks, None, replica)


class FastLane:
    name = "fast"

    def __init__(self, backend: Backend, k: int, log: list[CallRecord], pad_to_fixed: bool = False) -> None:
        if k < 1:
            raise LaneError(f"fast lane shape must be >= 1 block per call, got {k}")
        self.backend, self.k, self.log, self.pad_to_fixed = backend, int(k), log, pad_to_fixed

    def run(self, blocks: Sequence[Block]) -> list[np.ndarray]:
        if len(blocks) > self.k:
            raise LaneError(f"fast lane k={self.k} given {len(blocks)} blocks in one call")
        if not blocks:
            return []
        return _call(self.backend, self.log, self.name, self.k, blocks, self.k if self.pad_to_fixed else None, 0)


def _call(backend: Backend, log: list[CallRecord], lane: str, shape: int, blocks: Sequence[Block],
          pad_to: int | None, replica: int) -> list[np.ndarray]:
    packed = pack(list(blocks), pad_to=pad_to)
    ids = packed.block_ids
    where = f"{lane} lane k={shape} OP {int(packed.op)} blocks {ids[0]!r}" + (f"..{ids[-1]!r}" if len(ids) > 1 else "")
    result = backend.call(packed.op, packed.tensors(), packed.windows, packed.rows, where)
    log.append(CallRecord(lane, shape, int(packed.op), len(ids), packed.windows, packed.rows, packed.nbytes,
                          result.wall_s, result.peak_device_bytes, replica))
    return unpack(packed, {packed.op.output_name: result.output})
