"""Hypothesis strategies for blocks of a small law geometry (any ragged span and row count)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from harness.blocks import Block
from harness.geometry import Geometry
from harness.ops import Op
from tests.laws import F, W

LAW_GEOMETRY = Geometry(sample_rate=16_000, window_samples=W, frames_per_window=F, frame_step=8, speakers=3,
                        max_simultaneous=2, embedding_dim=3, windows_per_block=8)


@st.composite
def blocks(draw, op: Op | None = None, block_id: str = "b", geometry: Geometry = LAW_GEOMETRY) -> Block:
    op = Op(draw(st.sampled_from([0, 1, 2]))) if op is None else op
    n = geometry.windows_per_block
    span_len = draw(st.integers(1, 3 * geometry.window_samples))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    span = rng.standard_normal(span_len).astype(np.float32)
    offsets = np.sort(rng.integers(0, span_len + 1, size=n)).astype(np.int64)
    room = np.minimum(geometry.window_samples, span_len - offsets)
    # a mix of full, short and empty (padding) windows
    kind = rng.integers(0, 4, size=n)
    valid = np.where(kind == 0, 0, np.where(kind == 1, rng.integers(0, room + 1), room)).astype(np.int32)
    weights = idx = speakers = None
    if op.is_voiceprint:
        rows = draw(st.integers(0, 12))
        weights = rng.random((rows, geometry.frames_per_window)).astype(np.float32)
        idx = rng.integers(0, n, size=rows).astype(np.int32)
        speakers = rng.integers(0, geometry.speakers, size=rows).astype(np.int32)
    return Block.create(block_id, op, span, offsets, valid, geometry, weights=weights, idx=idx, speakers=speakers)


@st.composite
def block_lists(draw, min_k: int = 1, max_k: int = 64) -> list[Block]:
    op = Op(draw(st.sampled_from([0, 1, 2])))
    k = draw(st.integers(min_k, max_k))
    return [draw(blocks(op=op, block_id=f"b{i}")) for i in range(k)]
