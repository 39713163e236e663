"""Every kind of malformed block is refused with one BlockError naming the block, field and value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import BlockError
from harness.data.blocks import Block, BlockRows, check_request
from harness.data.geometry import Geometry

G = Geometry(window_samples=100, frames_per_window=5, frame_step=20, windows_per_block=8, embedding_dim=4)
N = 8


def good(**overrides):
    fields = dict(
        id="blk-7",
        op=1,
        span=np.linspace(-0.5, 0.5, 400, dtype=np.float32),
        offsets=np.arange(N, dtype=np.int64) * 40,
        valid=np.array([100] * 7 + [80], dtype=np.int32),
        weights=np.ones((3, 5), dtype=np.float32),
        idx=np.array([0, 3, 7], dtype=np.int32),
        geometry=G,
    )
    fields.update(overrides)
    return fields


def create(weights=None, idx=None, speakers=None, **fields) -> Block:
    """``Block.create`` of ``good()``'s fields: the voiceprint rows go down as one ``BlockRows``."""
    return Block.create(**fields, rows=BlockRows(weights, idx, speakers))


def test_a_good_block_is_normalised():
    b = create(
        **good(
            span=np.zeros(400, dtype=np.float64), offsets=list(range(0, 320, 40)), valid=np.full(8, 50, dtype=np.int64)
        )
    )
    assert b.span.dtype == np.float32 and b.offsets.dtype == np.int64 and b.valid.dtype == np.int32
    assert b.op == 1 and b.rows == 3 and b.windows == 8


CASES = {
    "span wrong dtype": (dict(span=np.zeros(400, dtype=np.int16)), "SPAN", "wrong dtype"),
    "offsets wrong dtype": (dict(offsets=np.arange(8, dtype=np.float32)), "OFFSETS", "wrong dtype"),
    "span wrong rank": (dict(span=np.zeros((2, 200), dtype=np.float32)), "SPAN", "wrong rank"),
    "weights wrong rank": (dict(weights=np.ones(5, dtype=np.float32)), "WEIGHTS", "wrong rank"),
    "empty span": (
        dict(span=np.zeros(0, dtype=np.float32), valid=np.zeros(8, np.int32), offsets=np.zeros(8, np.int64)),
        "SPAN",
        "empty",
    ),
    "negative offset": (dict(offsets=np.array([-5, 40, 80, 120, 160, 200, 240, 280])), "OFFSETS[0]", "negative"),
    "decreasing offsets": (dict(offsets=np.array([0, 40, 80, 60, 160, 200, 240, 280])), "OFFSETS[3]", "decrease"),
    "offset past the span": (
        dict(offsets=np.array([0, 40, 80, 120, 160, 200, 240, 401]), valid=np.array([100] * 7 + [0])),
        "OFFSETS[7]",
        "past the end",
    ),
    "negative valid": (dict(valid=np.array([100] * 7 + [-1])), "VALID[7]", "negative"),
    "valid above the window": (dict(valid=np.array([101] + [100] * 7)), "VALID[0]", "exceeds the window"),
    "offset + valid past the span": (
        dict(offsets=np.array([0, 40, 80, 120, 160, 200, 240, 320]), valid=np.array([100] * 8)),
        "VALID[7]",
        "runs past the end",
    ),
    "NaN in span": (dict(span=np.r_[np.zeros(10), np.nan, np.zeros(389)].astype(np.float32)), "SPAN[10]", "NaN"),
    "Inf in span": (dict(span=np.r_[np.zeros(10), np.inf, np.zeros(389)].astype(np.float32)), "SPAN[10]", "NaN"),
    "NaN in weights": (dict(weights=np.array([[1, 1, np.nan, 1, 1]] * 3, dtype=np.float32)), "WEIGHTS[0,2]", "NaN"),
    "weights width": (dict(weights=np.ones((3, 6), dtype=np.float32)), "WEIGHTS", "frames per window"),
    "negative weight": (dict(weights=-np.ones((3, 5), dtype=np.float32)), "WEIGHTS[0,0]", ">= 0"),
    "idx out of range": (dict(idx=np.array([0, 3, 8])), "IDX[2]", "out of range"),
    "idx negative": (dict(idx=np.array([-1, 3, 7])), "IDX[0]", "out of range"),
    "idx rows mismatch": (dict(idx=np.array([0, 3])), "IDX", "one entry per WEIGHTS row"),
    "weights with OP 0": (dict(op=0), "WEIGHTS", "takes no WEIGHTS"),
    "idx with OP 0": (dict(op=0, weights=None), "IDX", "takes no WEIGHTS or IDX"),
    "weights missing with OP 1": (dict(weights=None), "WEIGHTS", "requires WEIGHTS"),
    "idx missing with OP 2": (dict(op=2, idx=None), "IDX", "requires IDX"),
    "unknown OP": (dict(op=3), "OP", "unknown OP"),
    "OP not a number": (dict(op="x"), "OP", "wrong dtype"),
    "valid count": (dict(valid=np.full(7, 10)), "VALID", "one value per window"),
    "windows per block": (
        dict(op=0, weights=None, idx=None, offsets=np.arange(4) * 40, valid=np.full(4, 100)),
        "OFFSETS",
        "exactly 8 windows",
    ),
}


@pytest.mark.parametrize("overrides,field,reason", CASES.values(), ids=CASES.keys())
def test_bad_block_is_refused_naming_block_field_and_value(overrides, field, reason):
    with pytest.raises(BlockError) as info:
        create(**good(**overrides))
    err = info.value
    message = str(err)
    assert err.block_id == "blk-7" and "'blk-7'" in message
    assert err.field == field and field in message
    assert reason in message
    assert "=" in message and message.count("\n") == 0  # one line, with the offending value


def test_value_is_named_in_the_message():
    with pytest.raises(BlockError, match=r"OFFSETS\[0\]=-5"):
        create(**good(offsets=np.array([-5, 40, 80, 120, 160, 200, 240, 280])))


def test_wire_request_checks_names_missing_and_unknown_inputs():
    req = {
        "SPAN": np.zeros(10, np.float32),
        "OFFSETS": np.zeros(1, np.int64),
        "VALID": np.zeros(1, np.int32),
        "OP": np.array([0], np.int32),
    }
    assert check_request(req, G)["OP"][0] == 0
    with pytest.raises(BlockError, match="'request': OFFSETS=None: required input is missing"):
        check_request({k: v for k, v in req.items() if k != "OFFSETS"}, G)
    with pytest.raises(BlockError, match="EXTRA"):
        check_request({**req, "EXTRA": np.zeros(1)}, G)


def test_a_packed_request_may_hold_any_number_of_windows():
    req = {
        "SPAN": np.zeros(1000, np.float32),
        "OFFSETS": np.arange(24, dtype=np.int64) * 10,
        "VALID": np.full(24, 50, np.int32),
        "OP": np.array([0], np.int32),
    }
    assert check_request(req, G)["OFFSETS"].shape == (24,)


@given(
    st.integers(1, 3000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from([np.nan, np.inf, -np.inf, None]),
    st.data(),
)
def test_the_finiteness_check_refuses_every_nan_or_inf_and_nothing_else(n, fill, bad, data):
    """The fast path (a finite sum) and the exact path agree: a sum that overflows is not a refusal."""
    from harness.data.blocks import _require_finite

    values = np.full(n, fill, dtype=np.float32)
    if bad is None:
        _require_finite("b", "SPAN", values)  # even when the values sum past float32's range
        return
    at = data.draw(st.integers(0, n - 1))
    values[at] = bad
    with pytest.raises(BlockError, match=rf"SPAN\[{at}\]=.*NaN or Inf"):
        _require_finite("b", "SPAN", values)
