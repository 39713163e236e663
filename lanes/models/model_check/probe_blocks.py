"""The few synthetic blocks a model check sends, and the voiceprint rows of its OP 1/2 requests.

Three blocks: ``a``, the block whose answer is judged, chosen with a short or padding window at the end of its
span (VALID < window_samples: the window a leaky model reads past, into the audio of the block packed after
it); ``b``, its neighbour; and ``b_other``, the neighbour with other audio (its span reversed in time and at half
its loudness: speech still, of the same length, with the same OFFSETS and VALID, but neither its samples nor its
statistics are B's: a model normalising by the whole request's level sees the change), so that ``[a, b]`` and
``[a, b_other]`` are requests of one shape that differ only in the neighbour's audio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.corpus.synth import iter_synth_blocks
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.masks import MaskPolicy, VoiceprintRows, audio_frames, voiceprint_rows
from harness.data.ops import Op

SYNTH_BLOCKS = 4  # blocks generated to choose from (the first recording ends within them)


@dataclass(frozen=True)
class ProbeBlocks:
    a: Block
    b: Block
    b_other: Block
    short_window: bool  # ``a`` has a window shorter than window_samples (so a forward leak shows)


def probe_blocks(geometry: Geometry, seed: int = 0, step: int | None = None) -> ProbeBlocks:
    blocks = [block for block, _, _ in iter_synth_blocks(geometry, SYNTH_BLOCKS, seed=seed, step=step)]
    short = [bool((block.valid < geometry.window_samples).any()) for block in blocks]
    a_at = short.index(True) if any(short) else 0
    a = blocks[a_at]
    b = next(block for i, block in enumerate(blocks) if i != a_at)
    other = np.ascontiguousarray(b.span[::-1] * np.float32(0.5))
    if np.array_equal(other, b.span):  # silence: any other audio will do
        other = np.full_like(b.span, np.float32(0.01))
    b_other = Block.create(f"{b.id}~other-audio", Op.SEGMENTATION, other, b.offsets, b.valid, geometry)
    return ProbeBlocks(a, b, b_other, short[a_at])


def stand_in_rows(block: Block, geometry: Geometry) -> VoiceprintRows:
    """One row per window holding audio, weighing each of its audio frames 1: OP 1/2 requests of the right
    form when the model's OP 0 answer gives none (or no usable answer)."""
    audio = audio_frames(block.valid, geometry)
    windows = np.flatnonzero(block.valid > 0)
    return VoiceprintRows(
        weights=audio[windows].astype(np.float32),
        idx=windows.astype(np.int32),
        speakers=np.zeros(len(windows), dtype=np.int32),
    )


def rows_of(
    block: Block, logprobs: np.ndarray | None, op: Op, geometry: Geometry, policy: MaskPolicy
) -> tuple[VoiceprintRows, bool]:
    """The rows the engine would derive from ``block``'s OP 0 answer, and True; or stand-in rows and False."""
    if logprobs is not None and np.isfinite(logprobs).all():
        rows = voiceprint_rows(logprobs, block.valid, op, geometry, policy)
        if len(rows.idx):
            return rows, True
    return stand_in_rows(block, geometry), False


def with_rows(block: Block, op: Op, rows: VoiceprintRows, geometry: Geometry) -> Block:
    """``block``'s OP ``op`` request: its audio, with ``rows`` (OP 0: the block itself)."""
    if op is Op.SEGMENTATION:
        return block
    return block.with_voiceprint(op, rows.weights, rows.idx, rows.speakers, geometry)
