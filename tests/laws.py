"""The packing laws as plain functions of a packer, so they can judge a broken packer too.

Each law returns None when it holds and raises AssertionError (or any error) when it does
not. tests/test_packing_laws.py runs them with hypothesis on the real packer (they must
hold) and on deliberately broken packers (hypothesis must find a counterexample).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from harness import ops
from harness.blocks import Block
from harness.isolation import request_window
from harness.packing import PackedRequest, pack, unpack

Packer = Callable[..., PackedRequest]
W = 64  # window samples of the law geometry
F = 5  # frames per window
D = 3  # embedding width


def same_block(a: Block, b: Block) -> None:
    assert a.id == b.id and a.op is b.op
    for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype, name
            np.testing.assert_array_equal(x, y, err_msg=name)


def window_fn(samples: np.ndarray) -> np.ndarray:
    """A per-window function sensitive to every sample and its position."""
    pos = np.arange(samples.shape[0], dtype=np.float64) + 1.0
    return np.array([samples.sum(), (samples * pos).sum(), np.abs(samples).max(initial=0.0)])


def model_fn(request: dict) -> np.ndarray:
    """f applied per window (OP 0) or per row (OP 1/2) of any request, via the isolation function."""
    n = request[ops.OFFSETS].shape[0]
    per_window = np.stack([window_fn(request_window(request, i, W)) for i in range(n)]) if n else np.zeros((0, 3))
    if int(request[ops.OP][0]) == 0:
        return per_window
    weights = request[ops.WEIGHTS]
    return per_window[request[ops.IDX]] * weights.sum(axis=1, keepdims=True)


def law_roundtrip(packer: Packer, blocks: Sequence[Block]) -> None:
    packed = packer(list(blocks))
    for original, back in zip(blocks, packed.split(), strict=True):
        same_block(original, back)
    outputs = [np.random.default_rng(0).standard_normal((b.windows if b.op == 0 else b.rows, F, 2)).astype(np.float32)
               for b in blocks]
    answer = {packed.op.output_name: np.concatenate(outputs) if outputs else np.zeros((0, F, 2), np.float32)}
    for want, got in zip(outputs, unpack(packed, answer), strict=True):
        np.testing.assert_array_equal(want, got)


def law_windows_see_the_same(packer: Packer, blocks: Sequence[Block]) -> None:
    packed = packer(list(blocks))
    request = packed.tensors()
    real = [s for s in packed.segments if not s.padding]
    for block, seg in zip(blocks, real, strict=True):
        alone = block.tensors()
        for i in range(block.windows):
            np.testing.assert_array_equal(request_window(request, seg.window_start + i, W),
                                          request_window(alone, i, W))


def law_rebased_inside(packer: Packer, blocks: Sequence[Block]) -> None:
    packed = packer(list(blocks))
    for seg in packed.segments:
        offs = packed.offsets[seg.window_slice]
        valid = packed.valid[seg.window_slice]
        assert (offs >= seg.span_start).all() and (offs + valid <= seg.span_start + seg.span_length).all()
        if packed.op.is_voiceprint:
            idx = packed.idx[seg.row_slice]
            assert ((idx >= seg.window_start) & (idx < seg.window_start + seg.windows)).all()


def law_per_window_function(packer: Packer, blocks: Sequence[Block]) -> None:
    packed = packer(list(blocks))
    answer = {packed.op.output_name: model_fn(packed.tensors())}
    for block, got in zip(blocks, unpack(packed, answer), strict=True):
        np.testing.assert_array_equal(got, model_fn(block.tensors()))


def law_associative(packer: Packer, blocks: Sequence[Block], cut: int) -> None:
    whole = packer(list(blocks))
    nested = packer([packer(list(blocks[:cut])), packer(list(blocks[cut:]))]) if 0 < cut < len(blocks) else whole
    for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
        a, b = getattr(whole, name), getattr(nested, name)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b, err_msg=name)
    assert whole.segments == nested.segments


def law_padding_dropped(packer: Packer, blocks: Sequence[Block], extra: int) -> None:
    k = len(blocks) + extra
    packed = packer(list(blocks), pad_to=k)
    assert packed.k == k and packed.block_ids == [b.id for b in blocks]
    assert (packed.valid[sum(b.windows for b in blocks):] == 0).all()
    answer = {packed.op.output_name: model_fn(packed.tensors())}
    got = unpack(packed, answer)
    assert len(got) == len(blocks)
    for block, out in zip(blocks, got, strict=True):
        np.testing.assert_array_equal(out, model_fn(block.tensors()))


# ------------------------------------------------------------------ broken packers (negative controls)


def off_by_one_packer(items, pad_to=None) -> PackedRequest:
    """Rebases every block after the first one sample too far."""
    good = pack(items, pad_to=pad_to)
    offsets = good.offsets.copy()
    for seg in good.segments[1:]:
        offsets[seg.window_slice] += 1
    return PackedRequest(good.op, good.span, offsets, good.valid, good.weights, good.idx, good.speakers, good.segments)


def leaky_packer(items, pad_to=None) -> PackedRequest:
    """Lets every window run on for a whole window, into the next block's audio."""
    good = pack(items, pad_to=pad_to)
    valid = np.minimum(W, good.span.shape[0] - good.offsets).astype(np.int32)
    valid = np.where(good.valid > 0, valid, 0).astype(np.int32)
    return PackedRequest(good.op, good.span, good.offsets, valid, good.weights, good.idx, good.speakers,
                         good.segments)
