"""The two lanes. Both call the same backend; only the fast lane packs.

- The **exact lane** sends only the release's batch shapes (one block per call, unless the
  release says otherwise) and refuses anything else: its requests are the blocks exactly as the
  release sends them, and its outputs are what the release ships.
- The **fast lane** sends k blocks per call through a packer (the harness's own, or the engine's
  through :mod:`harness.packing`'s packer interface), optionally padded to exactly k with empty
  blocks as a fixed-compiled-batch runtime would, and unpacks the answer per block with the same
  packer.

A lane is given all its calls of one group at once and sends them with ``backend.call_many``, so
a backend can keep several requests in flight (the engine keeps about two per GPU).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Protocol

import numpy as np

from harness.data.blocks import Block
from harness.data.errors import LaneError, check_interrupted
from harness.data.ops import Op
from harness.packing import HARNESS_PACKER, PackedRequest, Packer
from lanes.backend import Backend, Call


@dataclass(frozen=True)
class CallRecord:
    """One network call: what was sent (which blocks) and what it cost."""

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
    block_ids: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        out = {name: getattr(self, name) for name in _CALL_FIELDS}  # (asdict deep-copies: slow per call)
        out["block_ids"] = list(self.block_ids)
        return out


_CALL_FIELDS = tuple(f.name for f in fields(CallRecord))


class CallLog(Protocol):
    """Where the lanes record their calls: a list, or anything with ``append`` (a log file writer)."""

    def append(self, call: CallRecord) -> None: ...


class ExactLane:
    name = "exact"

    def __init__(self, backend: Backend, release_shapes: Mapping[Op, Sequence[int]], log: CallLog) -> None:
        self.backend = backend
        self.release_shapes = {Op(op): tuple(int(k) for k in ks) for op, ks in release_shapes.items()}
        self.log = log

    @property
    def shape(self) -> int:
        return min(self.release_shapes[Op.SEGMENTATION])

    def run(self, blocks: Sequence[Block], replica: int = 0) -> list[np.ndarray]:
        """One call per block: the block's own request, unpacked. A voiceprint block without rows is
        not sent (the engine sends nothing when no speaker is found): its answer is no rows."""
        if not blocks:
            return []
        op = blocks[0].op
        if 1 not in self.release_shapes.get(op, ()):
            raise LaneError(f"exact lane refuses a call of 1 block for OP {int(op)}: the release's shapes for "
                            f"OP {int(op)} are {list(self.release_shapes.get(op, ()))} block(s) per call")
        sending = [b for b in blocks if b.rows or not b.op.is_voiceprint]
        calls: list[Call] = []
        for b in sending:
            where = f"exact lane k=1 OP {int(b.op)} block {b.id!r}"
            calls.append((b.op, b.tensors(), b.windows, b.rows, where))
        check_interrupted()
        results = self.backend.call_many(calls) if calls else []
        answers = {}
        for b, (_, request, *_), result in zip(sending, calls, results, strict=True):
            self.log.append(CallRecord(self.name, 1, int(b.op), 1, b.windows, b.rows, _nbytes(request),
                                       result.wall_s, result.peak_device_bytes, replica, (b.id,)))
            answers[b.id] = result.output
        if len(sending) == len(blocks):
            return [r.output for r in results]
        none = np.zeros((0, self.backend.geometry.embedding_dim), np.float32)
        return [answers.get(b.id, none) for b in blocks]


class FastLane:
    name = "fast"

    def __init__(self, backend: Backend, k: int, log: CallLog, pad_to_fixed: bool = False,
                 packer: Packer = HARNESS_PACKER) -> None:
        if k < 1:
            raise LaneError(f"fast lane shape must be >= 1 block per call, got {k}")
        self.backend, self.k, self.log, self.pad_to_fixed, self.packer = backend, int(k), log, pad_to_fixed, packer

    def run(self, chunks: Sequence[Sequence[Block]]) -> list[list[np.ndarray]]:
        """One call per chunk of at most k blocks; the outputs per chunk, per block."""
        packs: list[PackedRequest] = []
        for chunk in chunks:
            if len(chunk) > self.k:
                raise LaneError(f"fast lane k={self.k} given {len(chunk)} blocks in one call")
            packs.append(self.packer.pack(list(chunk), pad_to=self.k if self.pad_to_fixed else None))
        calls: list[Call] = []
        for packed in packs:
            ids = packed.block_ids
            where = (f"fast lane k={self.k} OP {int(packed.op)} blocks {ids[0]!r}"
                     + (f"..{ids[-1]!r}" if len(ids) > 1 else ""))
            calls.append((packed.op, packed.tensors(), packed.windows, packed.rows, where))
        check_interrupted()
        results = self.backend.call_many(calls)
        out = []
        for packed, (_, request, *_), result in zip(packs, calls, results, strict=True):
            self.log.append(CallRecord(self.name, self.k, int(packed.op), len(packed.block_ids), packed.windows,
                                       packed.rows, _nbytes(request), result.wall_s, result.peak_device_bytes, 0,
                                       tuple(packed.block_ids)))
            out.append(self.packer.unpack(packed, {packed.op.output_name: result.output}))
        return out


def _nbytes(request: Mapping[str, np.ndarray]) -> int:
    return sum(int(np.asarray(t).nbytes) for t in request.values() if t is not None)
