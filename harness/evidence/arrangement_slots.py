"""Where each block sat, and how far each block is from the golden: the per-slot half of the arrangements.

A shape's arrangement lanes (``lanes.running.arrangers``) put every block in other slots. To say *which* slot
is worse, two facts are joined after the score's pass: per (lane, block), its slot, read from the run's
call log (``block_ids`` of each OP 0 call, in request order, and ``variant``, the lane of a variant's
call: the slot is the position there, honest whatever the arranger did; the duplicates' second copy
is sent as ``id~1``), and per (lane, OP, block), its figures against the golden, accumulated batch by
batch (:class:`BlockFigures`: a few numbers per block, never the outputs). A block that is the last
real one of a request holding fewer than k blocks (a group's last, short pack) sits in slot ``pad``:
next to padding under ``pad_to_fixed``, next to nothing otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.compute.metrics import row_diff
from harness.data.call_record import CallRecord
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.arrangements import PAD, SlotFigures
from harness.judging.judges.rowkeys import match

COPY_MARK = "~"  # a variant's copy c >= 1 of a block is sent as f"{id}~{c}" (lanes.running.variants.sent_as)


class SlotMap:
    """Per lane, per block, its slot in its OP 0 request, read from the call log as it streams by.

    ``lanes``: for each shape k, the plain lane's name and, per variant lane of copy 0 (the call's
    ``variant``), the lanes its copies are collected in (``k4.d`` -> ``["k4.d", "k4.d2"]``)."""

    def __init__(self, plain: Mapping[int, str], copies: Mapping[str, Sequence[str]], known: Iterable[str]) -> None:
        self.plain = dict(plain)
        self.copies = {name: list(lanes) for name, lanes in copies.items()}
        self.known = set(known)
        self.slots: dict[str, dict[str, str]] = {}

    def observe(self, calls: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        """Pass the calls through (the score's other readers of the log), noting the slots on the way. A call is
        a record of the call log (a mapping of its columns, read as a :class:`CallRecord`)."""
        for given in calls:
            call = CallRecord.of(given)
            if int(call.op) == int(Op.SEGMENTATION) and call.lane != "exact":
                self._note(call)
            yield given

    def _note(self, call: CallRecord) -> None:
        variant, k = str(call.variant or ""), int(call.shape)
        ids = list(call.block_ids)
        if variant:
            lanes = self.copies.get(variant)
        else:
            lanes = [self.plain[k]] if k in self.plain else None
        if not lanes:
            return
        short = int(call.blocks) < k
        for pos, sent in enumerate(ids):
            block, copy = sent, 0
            if sent not in self.known:
                base, mark, tail = sent.rpartition(COPY_MARK)
                if not mark or not tail.isdigit():
                    continue
                block, copy = base, int(tail)
            if copy >= len(lanes):
                continue
            slot = PAD if short and pos == len(ids) - 1 else str(pos)
            self.slots.setdefault(lanes[copy], {})[block] = slot

    def of(self, lane: str) -> dict[str, str]:
        return self.slots.get(lane, {})


@dataclass
class _Figures:
    """Per block (in the order the batches came), one OP of one lane against the golden."""

    blocks: list[str] = field(default_factory=list)
    units: list[np.ndarray] = field(default_factory=list)
    differing: list[np.ndarray] = field(default_factory=list)
    max_abs: list[np.ndarray] = field(default_factory=list)  # NaN: a non-finite value
    max_ulp: list[np.ndarray] = field(default_factory=list)

    def add(
        self, ids: Sequence[str], units: np.ndarray, differing: np.ndarray, max_abs: np.ndarray, max_ulp: np.ndarray
    ) -> None:
        self.blocks += list(ids)
        self.units.append(units)
        self.differing.append(differing)
        self.max_abs.append(max_abs)
        self.max_ulp.append(max_ulp)

    def arrays(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        return (
            self.blocks,
            cat(self.units, np.int64),
            cat(self.differing, np.int64),
            cat(self.max_abs, np.float64),
            cat(self.max_ulp, np.int64),
        )


class BlockFigures:
    """Per (lane, OP, block): units, differing units, max |diff| and max ULP against the golden."""

    def __init__(self, ops: Sequence[Op]) -> None:
        self.ops = list(ops)
        self.figures: dict[tuple[str, Op], _Figures] = {}

    def add(self, name: str, gold: LaneOutputs, lane: LaneOutputs) -> None:
        for op in self.ops:
            fig = self.figures.setdefault((name, op), _Figures())
            if op is Op.SEGMENTATION:
                self._segmentation(fig, gold, lane)
            else:
                self._voiceprint(fig, op, gold, lane)

    @staticmethod
    def _segmentation(fig: _Figures, gold: LaneOutputs, lane: LaneOutputs) -> None:
        a, b = gold.segmentation.logprobs, lane.segmentation.logprobs
        n_blocks, n_windows = a.shape[0], a.shape[1]
        d = row_diff(a.reshape(n_blocks * n_windows, -1), b.reshape(n_blocks * n_windows, -1))
        max_abs = np.where(d.non_finite > 0, np.nan, d.max_abs).reshape(n_blocks, n_windows)
        fig.add(
            gold.segmentation.block_ids,
            np.full(n_blocks, n_windows),
            d.differs.reshape(n_blocks, n_windows).sum(axis=1),
            np.where(np.isnan(max_abs).any(axis=1), np.nan, np.nanmax(max_abs, axis=1, initial=0.0)),
            d.max_ulp.reshape(n_blocks, n_windows).max(axis=1, initial=0),
        )

    @staticmethod
    def _voiceprint(fig: _Figures, op: Op, gold: LaneOutputs, lane: LaneOutputs) -> None:
        ids = list(gold.segmentation.block_ids)
        pos = {b: i for i, b in enumerate(ids)}
        n = len(ids)
        units, differing = np.zeros(n, np.int64), np.zeros(n, np.int64)
        max_abs, max_ulp = np.zeros(n), np.zeros(n, np.int64)
        g, r = gold.voiceprint.get(op), lane.voiceprint.get(op)
        if g is not None and r is not None:
            m = match(g, r)
            gi = np.array([pos[str(b)] for b in g.block_ids], dtype=np.int64)
            np.add.at(units, gi, 1)
            if m.golden_only.size:
                np.add.at(differing, gi[m.golden_only], 1)
            if m.run_only.size:
                ri = np.array([pos[str(b)] for b in r.block_ids[m.run_only]], dtype=np.int64)
                np.add.at(differing, ri, 1)
            if m.golden.size:
                d = row_diff(g.embedding[m.golden], r.embedding[m.run])
                at = gi[m.golden]
                np.add.at(differing, at, d.differs.astype(np.int64))
                np.fmax.at(max_abs, at, np.where(d.non_finite > 0, np.inf, d.max_abs))
                np.maximum.at(max_ulp, at, d.max_ulp)
        fig.add(ids, units, differing, np.where(np.isinf(max_abs), np.nan, max_abs), max_ulp)

    def of(self, name: str, op: Op) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.figures.get((name, op), _Figures()).arrays()

    def worst_block(self, name: str, op: Op) -> str | None:
        """The block of the lane's largest |diff| for the OP (a non-finite one first; None: none differs)."""
        blocks, _, differing, max_abs, _ = self.of(name, op)
        if not blocks or not differing.any():
            return None
        key = np.where(np.isnan(max_abs), np.inf, max_abs) + (differing > 0) * 1e-300
        return blocks[int(np.argmax(key))]


@dataclass
class _SlotTally:
    """One slot's figures while they are summed over lanes and blocks (the file's :class:`SlotFigures` once
    done)."""

    placements: int = 0
    units: int = 0
    differing: int = 0
    max_abs: float | None = 0.0  # None: a non-finite value sat in the slot
    max_ulp: int = 0
    worst_block: str | None = None
    worst_rank: float = -1.0  # the worst block's |diff| (inf: non-finite)

    def add(self, block: str, units: int, differing: int, max_abs: float, max_ulp: int) -> None:
        self.placements += 1
        self.units += units
        self.differing += differing
        self.max_ulp = max(self.max_ulp, max_ulp)
        if self.max_abs is not None:
            self.max_abs = None if np.isnan(max_abs) else max(self.max_abs, max_abs)
        rank = np.inf if np.isnan(max_abs) else max_abs
        if differing and rank > self.worst_rank:
            self.worst_rank, self.worst_block = rank, block

    def figures(self) -> SlotFigures:
        return SlotFigures(
            placements=self.placements,
            units=self.units,
            differing=self.differing,
            max_abs=self.max_abs,
            max_ulp=self.max_ulp,
            worst_block=self.worst_block,
        )


def slot_figures(figures: BlockFigures, lanes: Sequence[str], slots: SlotMap, op: Op) -> dict[str, SlotFigures]:
    """Per slot key, over every lane: placements, units, differing, max_abs (None: non-finite), max_ulp, worst
    block. A block the call log does not place (a voiceprint-only gap) is left out."""
    out: dict[str, _SlotTally] = {}
    for name in lanes:
        where = slots.of(name)
        blocks, units, differing, max_abs, max_ulp = figures.of(name, op)
        for i, block in enumerate(blocks):
            slot = where.get(block)
            if slot is None:
                continue
            tally = out.setdefault(slot, _SlotTally())
            tally.add(block, int(units[i]), int(differing[i]), float(max_abs[i]), int(max_ulp[i]))
    ordered = sorted(out.items(), key=lambda kv: (kv[0] == PAD, int(kv[0]) if kv[0] != PAD else 0))
    return {slot: tally.figures() for slot, tally in ordered}


def worst_slot(slots: Mapping[str, SlotFigures]) -> str | None:
    """The slot of the largest max_abs among slots holding a differing unit (non-finite first; ties: more
    differing units, then the lower slot); None when no slot differs from the golden."""
    best: tuple[float, int] | None = None
    found = None
    for key, s in slots.items():
        if not s.differing:
            continue
        rank = (np.inf if s.max_abs is None else float(s.max_abs), int(s.differing))
        if best is None or rank > best:
            best, found = rank, key
    return found
