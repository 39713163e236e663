"""Control repeats of the neighbour lane: is a moved answer a leak, or a backend that does not repeat itself?

A block whose answer in ``k4.n`` (its slot, other neighbours' audio: :mod:`lanes.running.neighbour_lane`) differs from
its plain lane's answer has one of two explanations: the answer depends on the neighbours' audio (a leak,
at any size), or the backend does not give the same answer to the same request twice (an atomic add, an
autotuned kernel, a reduction split by timing). One more send tells them apart: the requests concerned
are sent again exactly as before, the plain request and its neighbour requests, and their answers
compared bit for bit with the first ones. If they repeat themselves, the neighbours moved the answer.

Which requests: as the lanes run, every group's plain and neighbour answers are compared (:meth:`observe`,
at the group's end, bit for bit per block); the first ``cap`` plain requests per shape and OP with a moved
block are kept (their blocks, voiceprint rows and first answers: a few requests, never the corpus) and sent
again after the last group (:meth:`stage`), through the same backend, packer and device queue, logged with
``variant = k4.nc`` (so no shape's throughput or request count includes them). Their figures
(:class:`harness.data.schemas.neighbours.ControlFigures`) go into the run manifest's ``neighbour_controls``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.masks import VoiceprintRows
from harness.data.ops import Op
from harness.data.outputs import OutputCollector
from harness.data.schemas.neighbours import ControlFigures
from harness.evidence.control_tally import ControlTally
from lanes.backends.backend_api import Call
from lanes.running.lanes import FastLane, Take
from lanes.running.neighbour_lane import split_chunks
from lanes.running.variants import FILLER, Fill, sent_as

RowsOf = Callable[[Op, str], VoiceprintRows | None]  # a block's WEIGHTS/IDX as the plain lane sent them
CONTROL_SUFFIX = "c"  # the control calls' variant: the neighbour lane's name + "c" (k4.nc)
MAX_KEPT_BYTES = 64 * 2**20  # audio of the requests kept for a second send, over the whole run


@dataclass
class _Kept:
    """One plain request whose blocks moved beside other neighbours, kept to be sent again."""

    k: int
    op: Op
    chunk: list[Block]  # in slot order, OP 1/2 blocks with their rows
    plain: dict[str, np.ndarray]  # each block's first plain answer
    neighbour: dict[str, np.ndarray]  # each block's first answer beside other neighbours


@dataclass
class NeighbourControls:
    """The control repeats of a run's neighbour lanes (module doc). ``cap``: plain requests kept per shape and
    OP (0: none sent); ``fills``: each shape's neighbour fill (the lane's, so a neighbour request is sent again
    byte for byte)."""

    cap: int
    fills: Mapping[int, Fill]
    geometry: Geometry
    kept: list[_Kept] = field(default_factory=list)
    tallies: dict[tuple[int, Op], ControlTally] = field(default_factory=dict)
    _bytes: int = 0

    def observe(
        self,
        k: int,
        members: Sequence[Block],
        plain: OutputCollector,
        neighbour: OutputCollector,
        rows_of: RowsOf,
        ops: Sequence[Op],
    ) -> None:
        """One group's plain and neighbour answers at shape k: keep the first plain requests with a moved block."""
        for op in ops:
            for start in range(0, len(members), k):
                chunk = list(members[start : start + k])
                if len(chunk) < 2 or self._full(k, op):
                    continue
                firsts = {b.id: plain.answer(op, b.id) for b in chunk}
                beside = {b.id: neighbour.answer(op, b.id) for b in chunk}
                if not any(_moved(firsts[b.id], beside[b.id]) for b in chunk):
                    continue
                sent = self._request(chunk, op, rows_of)
                if sent is None:
                    continue
                nbytes = sum(int(b.span.nbytes) for b in chunk)
                if self._bytes + nbytes > MAX_KEPT_BYTES and self.kept:
                    continue
                self._bytes += nbytes
                self.kept.append(
                    _Kept(
                        k,
                        op,
                        sent,
                        {b: np.array(a, copy=True) for b, a in firsts.items() if a is not None},
                        {b: np.array(a, copy=True) for b, a in beside.items() if a is not None},
                    )
                )

    def _full(self, k: int, op: Op) -> bool:
        return sum(1 for kept in self.kept if kept.k == k and kept.op is op) >= self.cap

    def _request(self, chunk: list[Block], op: Op, rows_of: RowsOf) -> list[Block] | None:
        """The chunk as its plain request carried it (OP 1/2: with its rows; None: a request never sent)."""
        if op is Op.SEGMENTATION:
            return chunk
        rows = [rows_of(op, b.id) for b in chunk]
        if any(r is None for r in rows) or not sum(int(r.idx.shape[0]) for r in rows if r is not None):
            return None
        return [
            b.with_voiceprint(op, r.weights, r.idx, r.speakers, self.geometry)
            for b, r in zip(chunk, rows, strict=True)
            if r is not None
        ]

    def requests(self, lanes: Mapping[int, FastLane]) -> Iterator[tuple[Call, Take]]:
        """Every kept request sent again, the plain one then its neighbour ones (``lanes``: per shape, a fast
        lane logging as the control variant); each answer compared with the first as it is taken."""
        for kept in self.kept:
            lane = lanes[kept.k]
            tally = self.tallies.setdefault((kept.k, kept.op), ControlTally())
            yield from lane.requests([kept.chunk], functools.partial(self._plain_again, kept, tally))
            split = split_chunks(kept.chunk, kept.k)
            sent = [[sent_as(b, c, self.fills[kept.k]) for b, c in entries] for entries in split]
            yield from lane.requests(sent, functools.partial(self._neighbour_again, kept, tally, split))
        self.kept = []  # sent: their blocks are not held past the run

    @staticmethod
    def _plain_again(kept: _Kept, tally: ControlTally, _: int, answers: list[np.ndarray]) -> None:
        tally.plain_sent += 1
        same = [tally.compare(kept.plain[b.id], a) for b, a in zip(kept.chunk, answers, strict=True)]
        tally.plain_reproduced += int(all(same))

    @staticmethod
    def _neighbour_again(
        kept: _Kept, tally: ControlTally, split: list[list[tuple[Block, int]]], i: int, answers: list[np.ndarray]
    ) -> None:
        tally.neighbour_sent += 1
        same = [
            tally.compare(kept.neighbour[b.id], a)
            for (b, copy), a in zip(split[i], answers, strict=True)
            if copy != FILLER and b.id in kept.neighbour
        ]
        tally.neighbour_reproduced += int(all(same))

    def figures(self) -> dict[str, dict[str, ControlFigures]]:
        """The run manifest's ``neighbour_controls``: per shape, per OP that sent any."""
        out: dict[str, dict[str, ControlFigures]] = {}
        for (k, op), tally in sorted(self.tallies.items()):
            out.setdefault(str(k), {})[str(int(op))] = tally.figures()
        return out


def _moved(first: np.ndarray | None, again: np.ndarray | None) -> bool:
    if first is None or again is None:
        return first is not again
    a, b = np.ascontiguousarray(first, np.float32), np.ascontiguousarray(again, np.float32)
    return a.shape != b.shape or not np.array_equal(a.view(np.uint32), b.view(np.uint32))
