"""The two lanes. Both call the same backend; only the fast lane packs.

- The **exact lane** sends only the release's batch shapes (one block per call, unless the
  release says otherwise) and refuses anything else: its requests are the blocks exactly as the
  release sends them, and its outputs are what the release ships.
- The **fast lane** sends k blocks per call through a packer (the harness's own, or the engine's
  through :mod:`harness.packers.packing`'s packer interface), optionally padded to exactly k with empty
  blocks as a fixed-compiled-batch runtime would, and unpacks the answer per block with the same
  packer.

A lane makes its calls of one stage (a group, an OP) as they are asked for (``requests``: each call
with what takes its answer), so the runner can send one while the host packs the next
(:mod:`lanes.running.device_queue`); ``run`` sends a stage's calls together with ``backend.call_many``, so a
backend can keep several requests in flight (the engine keeps about two per GPU).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Protocol

import numpy as np

from harness.base.errors import LaneError, check_interrupted
from harness.data.blocks import Block
from harness.data.call_record import CallRecord  # one network call, by attribute (the lanes log it)
from harness.data.ops import Op
from harness.packers.packing import HARNESS_PACKER, PackedRequest, Packer
from lanes.backends.backend_api import Backend, Call, CallResult

Take = Callable[[CallResult], None]  # what takes a call's answer: logs the call, unpacks, delivers


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

    def requests(
        self, blocks: Sequence[Block], replica: int, deliver: Callable[[int, np.ndarray], None]
    ) -> Iterator[tuple[Call, Take]]:
        """One call per block, made as it is asked for: the call and what takes its answer (logs the call,
        gives ``deliver(i, output)``). A voiceprint block without rows is not sent (the engine sends
        nothing when no speaker is found): ``deliver`` gets no rows for it at once."""
        if not blocks:
            return
        op = blocks[0].op
        if 1 not in self.release_shapes.get(op, ()):
            raise LaneError(
                f"exact lane refuses a call of 1 block for OP {int(op)}: the release's shapes for "
                f"OP {int(op)} are {list(self.release_shapes.get(op, ()))} block(s) per call"
            )
        none = np.zeros((0, self.backend.geometry.embedding_dim), np.float32)
        for i, b in enumerate(blocks):
            if b.op.is_voiceprint and not b.rows:
                deliver(i, none)
                continue
            call = Call(b.op, b.tensors(), b.windows, b.rows, f"exact lane k=1 OP {int(b.op)} block {b.id!r}")
            yield call, functools.partial(self._take, b, replica, call, i, deliver)

    def _take(
        self, b: Block, replica: int, call: Call, i: int, deliver: Callable[[int, np.ndarray], None], result: CallResult
    ) -> None:
        self.log.append(
            CallRecord(
                self.name,
                1,
                int(b.op),
                1,
                b.windows,
                b.rows,
                _nbytes(call[1]),
                result.wall_s,
                result.peak_device_bytes,
                replica,
                (b.id,),
            )
        )
        deliver(i, result.output)

    def run(self, blocks: Sequence[Block], replica: int = 0) -> list[np.ndarray]:
        """Every block's answer (see :meth:`requests`), the calls through ``call_many``."""
        out: list[np.ndarray] = [np.zeros(0)] * len(blocks)
        _run(self.backend, list(self.requests(blocks, replica, out.__setitem__)))
        return out


class FastLane:
    name = "fast"

    def __init__(
        self,
        backend: Backend,
        k: int,
        log: CallLog,
        pad_to_fixed: bool = False,
        packer: Packer = HARNESS_PACKER,
        variant: str = "",
    ) -> None:
        if k < 1:
            raise LaneError(f"fast lane shape must be >= 1 block per call, got {k}")
        self.backend, self.k, self.log, self.pad_to_fixed, self.packer = backend, int(k), log, pad_to_fixed, packer
        self.variant = variant  # recorded on each call: a variant's lane, "" for the plain lane k{k}

    def requests(
        self, chunks: Sequence[Sequence[Block]], deliver: Callable[[int, list[np.ndarray]], None]
    ) -> Iterator[tuple[Call, Take]]:
        """One call per chunk of at most k blocks, packed as it is asked for; its answer, unpacked per
        block, goes to ``deliver(i, outputs)`` (after the call is logged)."""
        for i, chunk in enumerate(chunks):
            if len(chunk) > self.k:
                raise LaneError(f"fast lane k={self.k} given {len(chunk)} blocks in one call")
            packed = self.packer.pack(list(chunk), pad_to=self.k if self.pad_to_fixed else None)
            ids = packed.block_ids
            lane = f"k={self.k}" + (f" ({self.variant})" if self.variant else "")  # "k=2 (k2.d)": a variant lane
            where = f"fast lane {lane} OP {int(packed.op)} blocks {ids[0]!r}" + (
                f"..{ids[-1]!r}" if len(ids) > 1 else ""
            )
            call = Call(packed.op, packed.tensors(), packed.windows, packed.rows, where)
            yield call, functools.partial(self._take, packed, call, i, deliver)

    def _take(
        self,
        packed: PackedRequest,
        call: Call,
        i: int,
        deliver: Callable[[int, list[np.ndarray]], None],
        result: CallResult,
    ) -> None:
        self.log.append(
            CallRecord(
                self.name,
                self.k,
                int(packed.op),
                len(packed.block_ids),
                packed.windows,
                packed.rows,
                _nbytes(call[1]),
                result.wall_s,
                result.peak_device_bytes,
                0,
                tuple(packed.block_ids),
                self.variant,
            )
        )
        deliver(i, self.packer.unpack(packed, {packed.op.output_name: result.output}))

    def run(self, chunks: Sequence[Sequence[Block]]) -> list[list[np.ndarray]]:
        """One call per chunk of at most k blocks (every chunk packed first); the outputs per chunk, per block."""
        out: list[list[np.ndarray]] = [[] for _ in chunks]
        _run(self.backend, list(self.requests(chunks, out.__setitem__)))
        return out


def _run(backend: Backend, items: list[tuple[Call, Take]]) -> None:
    """The serial path: every call of ``items`` through ``call_many``, then each answer taken in order."""
    check_interrupted()
    results = backend.call_many([call for call, _ in items]) if items else []
    for (_, take), result in zip(items, results, strict=True):
        take(result)


def _nbytes(request: Mapping[str, np.ndarray]) -> int:
    return sum(int(np.asarray(t).nbytes) for t in request.values() if t is not None)
