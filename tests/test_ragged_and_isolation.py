"""Triton's ragged-batching index tensors, and the one isolation function."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import PackingError
from harness.data.isolation import cut_windows, request_window, window_view
from harness.laws.strategies import block_lists
from harness.packers.packing import pack, ragged_batch_inputs


def test_triton_docs_worked_example():
    """Docs: requests of shapes [1,3], [1,4], [1,5] concatenate to [12] with INDEX = [3, 7, 12]."""
    items = [np.ones((1, 3)), np.ones((1, 4)) * 2, np.ones((1, 5)) * 3]
    flat = np.concatenate([x.reshape(-1) for x in items])
    idx = ragged_batch_inputs([x.shape for x in items], batch_dim=True)
    assert flat.shape == (12,)
    assert idx["BATCH_ACCUMULATED_ELEMENT_COUNT"].tolist() == [3, 7, 12]
    assert idx["BATCH_ELEMENT_COUNT"].tolist() == [3, 4, 5]
    assert idx["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"].tolist() == [0, 3, 7, 12]
    assert idx["BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"].shape == (5,)
    assert idx["BATCH_ITEM_SHAPE"].tolist() == [[3], [4], [5]]
    assert idx["BATCH_ITEM_SHAPE_FLATTEN"].tolist() == [3, 4, 5]
    assert all(v.dtype == np.int32 for v in idx.values())


@given(block_lists(max_k=16))
def test_packed_span_index_tensors_locate_every_block(blocks):
    packed = pack(blocks)
    idx = packed.ragged_index()
    acc = idx["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"]
    assert acc[-1] == packed.span.shape[0]
    for j, block in enumerate(blocks):
        np.testing.assert_array_equal(packed.span[acc[j] : acc[j + 1]], block.span)
    assert idx["BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"].shape == (max(b.span.shape[0] for b in blocks),)


def test_ragged_inputs_refuse_mixed_ranks_and_nothing():
    with pytest.raises(PackingError, match="share a rank"):
        ragged_batch_inputs([(3,), (1, 4)])
    with pytest.raises(PackingError, match="at least one item"):
        ragged_batch_inputs([])


@given(st.integers(1, 200), st.integers(0, 200), st.integers(0, 60), st.integers(1, 80))
def test_window_view_reads_valid_samples_then_zeros(span_len, offset, valid, window):
    span = np.arange(1, span_len + 1, dtype=np.float32)
    offset = min(offset, span_len)
    valid = min(valid, window, span_len - offset)
    out = window_view(span, offset, valid, window)
    assert out.shape == (window,) and out.dtype == np.float32
    np.testing.assert_array_equal(out[:valid], span[offset : offset + valid])
    assert (out[valid:] == 0).all()


def test_cut_windows_and_request_window_agree():
    span = np.arange(100, dtype=np.float32)
    offsets, valid = np.array([0, 10, 95], np.int64), np.array([20, 5, 5], np.int32)
    cut = cut_windows(span, offsets, valid, 20)
    req = {"SPAN": span, "OFFSETS": offsets, "VALID": valid}
    for i in range(3):
        np.testing.assert_array_equal(cut[i], request_window(req, i, 20))
    assert (cut[1, 5:] == 0).all()
