"""Hypothesis strategies: blocks of a small law geometry, ragged in every way a packer must handle.

Spans of 1..3 windows, windows full, short or empty (VALID 0), offsets anywhere in the span
(repeated, at its very end), 0..12 voiceprint rows per block with any window index and speaker.
A counterexample shrinks to few blocks, short spans and few windows holding audio.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from harness.data.blocks import Block, BlockRows
from harness.data.geometry import Geometry
from harness.data.ops import Op

W = 64  # window samples of the law geometry
F = 5  # frames per window
D = 3  # embedding width
LAW_GEOMETRY = Geometry(
    sample_rate=16_000,
    window_samples=W,
    frames_per_window=F,
    frame_step=8,
    speakers=3,
    max_simultaneous=2,
    embedding_dim=D,
    windows_per_block=8,
)
MAX_ROWS = 12
LARGE_ONE_IN = 8  # about one generated list in LARGE_ONE_IN is drawn large (up to max_k blocks)


@st.composite
def _draft(draw: st.DrawFn, op: Op, geometry: Geometry) -> tuple[int, int, int, int]:
    """What hypothesis draws for one block: span length, windows holding audio (bit mask), rows, seed."""
    span_len = draw(st.integers(1, 3 * geometry.window_samples), label="span length")
    audible = draw(st.integers(0, 2**geometry.windows_per_block - 1), label="windows holding audio (bit mask)")
    rows = draw(st.integers(0, MAX_ROWS), label="rows") if op.is_voiceprint else 0
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    return span_len, audible, rows, seed


def build_block(
    block_id: str, op: Op, draft: tuple[int, int, int, int], position: int, geometry: Geometry = LAW_GEOMETRY
) -> Block:
    """The block a draft describes: the seed draws offsets, VALID and rows; seed and position the audio.

    The layout depends on the draft alone, so deleting a block while shrinking leaves the others'
    layouts as they were; the audio also depends on the position, so shrunk blocks (seeds 0)
    still hold different audio and a leak into a neighbour shows.
    """
    span_len, audible, rows, seed = draft
    n = geometry.windows_per_block
    rng = np.random.default_rng(seed)
    # Half the blocks use their span to its very end (a window ending on the last sample, or an
    # empty one starting after it); the other half leave the last sample unread, so that a packer
    # that shifts windows by a sample still answers well-formed requests the other laws can judge.
    to_the_end = rng.random() < 0.5
    usable = span_len if to_the_end else span_len - 1
    offsets = np.sort(rng.integers(0, usable + 1, size=n)).astype(np.int64)
    room = np.minimum(geometry.window_samples, usable - offsets)
    short = rng.integers(0, room + 1)
    full = rng.random(n) < 0.5
    bits = (audible >> np.arange(n)) & 1
    valid = np.where(bits == 0, 0, np.where(full, room, short)).astype(np.int32)
    span = np.random.default_rng([seed, position]).standard_normal(span_len).astype(np.float32)
    weights = idx = speakers = None
    if op.is_voiceprint:
        idx = rng.integers(0, n, size=rows).astype(np.int32)
        speakers = rng.integers(0, geometry.speakers, size=rows).astype(np.int32)
        weights = rng.random((rows, geometry.frames_per_window)).astype(np.float32)
    return Block.create(block_id, op, span, offsets, valid, geometry, BlockRows(weights, idx, speakers))


@st.composite
def blocks(
    draw: st.DrawFn, op: Op | None = None, block_id: str = "b", position: int = 0, geometry: Geometry = LAW_GEOMETRY
) -> Block:
    """One valid block of ``geometry`` (any OP unless given).

    Hypothesis draws the span length, which windows hold audio (a bit mask: it shrinks towards
    fewer windows), the row count and a seed; the seed draws the rest (offsets, short or full
    windows, IDX, speakers, weights, audio). Few draws per block keep 64-block examples cheap.
    """
    op = Op(draw(st.sampled_from([0, 1, 2]))) if op is None else op
    return build_block(block_id, op, draw(_draft(op, geometry)), position, geometry)


@st.composite
def block_lists(draw: st.DrawFn, min_k: int = 1, max_k: int = 64, geometry: Geometry = LAW_GEOMETRY) -> list[Block]:
    """``min_k..max_k`` blocks of one OP with ids ``b0, b1, ...``: what one request may hold.

    Drawn as a list (not a count, then blocks), so hypothesis shrinks by deleting whole blocks.
    One list in eight or so is at least a drawn size up to ``max_k``: hypothesis's plain lists
    average a few items and all but never reach 64, the sizes a packer meets at the largest
    candidate k; more would make every example slower (the fixed boundary examples of
    :mod:`harness.laws.boundary` are what guarantees those sizes). The floor shrinks first.
    """
    op = Op(draw(st.sampled_from([0, 1, 2]), label="OP"))
    large = draw(st.integers(0, LARGE_ONE_IN - 1), label="a large list (when the last value)") == LARGE_ONE_IN - 1
    floor = draw(st.integers(min_k, max_k), label="at least this many blocks") if large else min_k
    drafts = draw(st.lists(_draft(op, geometry), min_size=floor, max_size=max_k), label="blocks")
    return [build_block(f"b{i}", op, d, i, geometry) for i, d in enumerate(drafts)]
