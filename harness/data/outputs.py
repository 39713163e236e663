"""A lane's outputs over a corpus, in the columnar form scoring and the golden store share.

Everything is held as corpus-wide arrays (one row per window for OP 0, one per voiceprint
row for OP 1/2) so scoring is a handful of vectorised numpy passes, and the Parquet files
are a direct image of these arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.compute.metrics import top_two
from harness.data.geometry import Geometry
from harness.data.masks import VoiceprintRows
from harness.data.ops import ALL_OPS, Op


@dataclass(eq=False)
class SegmentationOutputs:
    """OP 0 over a corpus: ``logprobs[b, n]`` is window n of block ``block_ids[b]``."""

    block_ids: list[str]
    valid: np.ndarray  # [B, N] int32
    logprobs: np.ndarray  # [B, N, F, C] float32
    # (argmax, margin) per frame, flat: computed on first use, or read back from a golden's file
    _decisions: tuple[np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False, compare=False)

    def index(self) -> dict[str, int]:
        return {b: i for i, b in enumerate(self.block_ids)}

    def decisions(self) -> tuple[np.ndarray, np.ndarray]:
        """Per frame (flat): the argmax class and the margin between the top two log-probabilities.

        Computed once per golden and cached: every shape scored against it reuses them.
        """
        cached = self._decisions
        if cached is None:
            cached = top_two(self.logprobs.reshape(-1, self.logprobs.shape[-1]))
            self._decisions = cached
        return cached

    def set_decisions(self, argmax: np.ndarray, margin: np.ndarray) -> None:
        """Decisions read back from a file (a golden stores its own)."""
        if argmax.shape[0] != self.logprobs[..., 0].size or margin.shape != argmax.shape:
            raise ValueError("decisions do not cover every frame")
        self._decisions = (argmax, margin)

    def block(self, block_id: str) -> np.ndarray:
        one: np.ndarray = self.logprobs[self.index()[block_id]]
        return one

    def select(self, block_ids: list[str]) -> SegmentationOutputs:
        pos = self.index()
        rows = [pos[b] for b in block_ids]
        out = SegmentationOutputs(list(block_ids), self.valid[rows], self.logprobs[rows])
        cached = self._decisions
        if cached is not None:
            frames = self.logprobs.shape[1] * self.logprobs.shape[2]
            take = (np.asarray(rows)[:, None] * frames + np.arange(frames)).reshape(-1)
            out._decisions = (cached[0][take], cached[1][take])
        return out


@dataclass(eq=False)
class VoiceprintOutputs:
    """OP 1 or 2 over a corpus: one row per (block, window, speaker)."""

    op: Op
    block_ids: np.ndarray  # [R] str (object)
    row: np.ndarray  # [R] int32: row index inside its block's request
    window: np.ndarray  # [R] int32: IDX
    speaker: np.ndarray  # [R] int32
    weights: np.ndarray  # [R, F] float32
    embedding: np.ndarray  # [R, D] float32

    @property
    def rows(self) -> int:
        return int(self.row.shape[0])

    @classmethod
    def empty(cls, op: Op, geometry: Geometry) -> VoiceprintOutputs:
        return cls(
            op,
            np.zeros(0, dtype=object),
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros((0, geometry.frames_per_window), np.float32),
            np.zeros((0, geometry.embedding_dim), np.float32),
        )

    def keys(self) -> np.ndarray:
        """Structured [R] array of (block, window, speaker): how rows are matched across runs."""
        keys = np.empty(self.rows, dtype=[("block", object), ("window", np.int32), ("speaker", np.int32)])
        for name, column in zip(keys.dtype.names or (), (self.block_ids, self.window, self.speaker), strict=True):
            keys[name] = column  # each field of the structured array, in its declared order
        return keys

    def inputs(self) -> dict[str, VoiceprintRows]:
        """The WEIGHTS/IDX each block was called with (to replay them in isolated mode)."""
        out: dict[str, VoiceprintRows] = {}
        order = np.argsort(self.block_ids.astype(str), kind="stable")
        ids = self.block_ids[order]
        if ids.size == 0:
            return out
        starts = np.r_[0, np.flatnonzero(ids[1:] != ids[:-1]) + 1, ids.size]
        for a, b in zip(starts[:-1], starts[1:], strict=True):
            sel = order[a:b][np.argsort(self.row[order[a:b]], kind="stable")]
            out[str(ids[a])] = VoiceprintRows(self.weights[sel], self.window[sel], self.speaker[sel])
        return out

    def select(self, block_ids: list[str]) -> VoiceprintOutputs:
        """The rows of these blocks, in the order ``block_ids`` lists the blocks (each block's rows in
        their stored order), as :meth:`SegmentationOutputs.select` orders: a run merged from shards
        then stores its rows exactly as a one-process run does."""
        wanted = np.array(block_ids, dtype=str)
        have = self.block_ids.astype(str)
        if wanted.size == 0 or have.size == 0:
            take = np.zeros(0, dtype=np.int64)
        else:
            sorter = np.argsort(wanted, kind="stable")
            at = np.minimum(np.searchsorted(wanted, have, sorter=sorter), wanted.size - 1)
            rank = sorter[at]
            take = np.flatnonzero(wanted[rank] == have)
            take = take[np.argsort(rank[take], kind="stable")]
        return VoiceprintOutputs(
            self.op,
            self.block_ids[take],
            self.row[take],
            self.window[take],
            self.speaker[take],
            self.weights[take],
            self.embedding[take],
        )

    @staticmethod
    def concat(parts: list[VoiceprintOutputs]) -> VoiceprintOutputs:
        """Rows of one OP from disjoint parts, one after the other (one part: itself, no copy)."""
        if len(parts) == 1:
            return parts[0]
        return VoiceprintOutputs(
            parts[0].op,
            *(
                np.concatenate([getattr(v, f) for v in parts])
                for f in ("block_ids", "row", "window", "speaker", "weights", "embedding")
            ),
        )


@dataclass(eq=False)
class LaneOutputs:
    """All three OPs of one lane (exact, or one packed shape) over a corpus."""

    segmentation: SegmentationOutputs
    voiceprint: dict[Op, VoiceprintOutputs] = field(default_factory=dict)

    def ops(self) -> list[Op]:
        return [Op.SEGMENTATION, *sorted(self.voiceprint)]

    @property
    def block_ids(self) -> list[str]:
        return list(self.segmentation.block_ids)

    def select(self, block_ids: list[str]) -> LaneOutputs:
        return LaneOutputs(
            self.segmentation.select(block_ids), {op: v.select(block_ids) for op, v in self.voiceprint.items()}
        )

    @staticmethod
    def concat(parts: list[LaneOutputs]) -> LaneOutputs:
        """Outputs of disjoint block sets (shards) as one."""
        seg = SegmentationOutputs(
            [b for p in parts for b in p.segmentation.block_ids],
            np.concatenate([p.segmentation.valid for p in parts]),
            np.concatenate([p.segmentation.logprobs for p in parts]),
        )
        cached = [p.segmentation._decisions for p in parts]
        known = [c for c in cached if c is not None]
        if len(known) == len(cached):
            seg._decisions = (np.concatenate([c[0] for c in known]), np.concatenate([c[1] for c in known]))
        vps = {}
        for op in sorted({op for p in parts for op in p.voiceprint}):
            vps[op] = VoiceprintOutputs.concat([p.voiceprint[op] for p in parts if op in p.voiceprint])
        return LaneOutputs(seg, vps)


class OutputCollector:
    """Accumulates per-block outputs as a lane produces them, in any order."""

    def __init__(self, geometry: Geometry) -> None:
        self.geometry = geometry
        self._seg: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._vp: dict[Op, dict[str, tuple[VoiceprintRows, np.ndarray]]] = {op: {} for op in ALL_OPS[1:]}

    def add_segmentation(self, block_id: str, valid: np.ndarray, logprobs: np.ndarray) -> None:
        self._seg[block_id] = (valid, logprobs)

    def add_voiceprint(self, op: Op, block_id: str, rows: VoiceprintRows, embedding: np.ndarray) -> None:
        self._vp[op][block_id] = (rows, embedding)

    def segmentation_of(self, block_id: str) -> np.ndarray:
        return self._seg[block_id][1]

    def answer(self, op: Op, block_id: str) -> np.ndarray | None:
        """One block's answer to one OP as collected (OP 0: its log-probabilities; OP 1/2: its embeddings; None:
        not collected)."""
        if op is Op.SEGMENTATION:
            found = self._seg.get(block_id)
            return None if found is None else found[1]
        rows = self._vp.get(op, {}).get(block_id)
        return None if rows is None else rows[1]

    def finish(self, order: list[str]) -> LaneOutputs:
        g = self.geometry
        seg = SegmentationOutputs(
            list(order),
            np.stack([self._seg[b][0] for b in order]).astype(np.int32, copy=False),
            np.stack([self._seg[b][1] for b in order]).astype(np.float32, copy=False),
        )
        vps = {}
        for op, per_block in self._vp.items():
            present = [b for b in order if b in per_block]
            if not present:
                continue
            counts = [per_block[b][0].idx.shape[0] for b in present]
            vps[op] = VoiceprintOutputs(
                op=op,
                block_ids=np.repeat(np.array(present, dtype=object), counts),
                row=np.concatenate([np.arange(c, dtype=np.int32) for c in counts]),
                window=np.concatenate([per_block[b][0].idx for b in present]).astype(np.int32, copy=False),
                speaker=np.concatenate([per_block[b][0].speakers for b in present]).astype(np.int32, copy=False),
                weights=np.concatenate([per_block[b][0].weights for b in present])
                .reshape(-1, g.frames_per_window)
                .astype(np.float32, copy=False),
                embedding=np.concatenate([per_block[b][1] for b in present])
                .reshape(-1, g.embedding_dim)
                .astype(np.float32, copy=False),
            )
        return LaneOutputs(seg, vps)
