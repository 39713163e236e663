"""The audit's scoring pass, fed batch by batch: one OP's blocks, served and re-run, given to its judge.

Split out of :mod:`harness.pipeline.audit` (which keeps the passes and the files): the rows of a
voiceprint block are matched by (block, window, speaker), or by their index when the capture carries
no speaker labels (or a (window, speaker) twice).
"""

from __future__ import annotations

import numpy as np

from harness.data.blocks import Block
from harness.data.ops import Op
from harness.data.outputs import SegmentationOutputs, VoiceprintOutputs
from harness.judging.judges.judge_base import Evidence

BATCH_BLOCKS = 32


class Batches:
    """One OP's blocks, served and re-run, fed to its judge BATCH_BLOCKS at a time."""

    def __init__(self, op: Op, evidence: Evidence) -> None:
        self.op, self.evidence = op, evidence
        # (key, block, golden, served, row labels: None for OP 0)
        self.items: list[tuple[str, Block, np.ndarray, np.ndarray, np.ndarray | None]] = []
        self.unlabelled = 0

    def add(self, key: str, block: Block, golden: np.ndarray, served: np.ndarray) -> None:
        labels: np.ndarray | None = None
        if self.op.is_voiceprint:
            # rows are matched by (block, window, speaker); without labels (or with a (window, speaker) twice),
            # by their index in the block
            pairs = (
                set()
                if block.speakers is None or block.idx is None
                else set(zip(block.idx.tolist(), block.speakers.tolist(), strict=True))
            )
            labelled = block.speakers is not None and len(pairs) == block.rows
            labels = block.speakers if labelled else np.arange(block.rows, dtype=np.int32)
            self.unlabelled += 0 if labelled else block.rows
        self.items.append((key, block, golden, served, labels))
        if len(self.items) >= BATCH_BLOCKS:
            self.flush()

    def flush(self) -> None:
        if not self.items:
            return
        items, self.items = self.items, []
        keys = [k for k, *_ in items]
        sides = ([x[2] for x in items], [x[3] for x in items])  # (golden, served)
        if self.op is Op.SEGMENTATION:
            valid = np.stack([b.valid for _, b, *_ in items])
            seg = [SegmentationOutputs(keys, valid, np.stack(side)) for side in sides]
            self.evidence.add(seg[0], seg[1])
            return
        counts = [b.rows for _, b, *_ in items]
        ids = np.repeat(np.array(keys, dtype=object), counts)
        row = np.concatenate([np.arange(c, dtype=np.int32) for c in counts])
        window = np.concatenate([b.idx for _, b, *_ in items]).astype(np.int32)
        speaker = np.concatenate([x[4] for x in items]).astype(np.int32)
        weights = np.concatenate([b.weights for _, b, *_ in items])
        side = [VoiceprintOutputs(self.op, ids, row, window, speaker, weights, np.concatenate(part)) for part in sides]
        self.evidence.add(side[0], side[1])
