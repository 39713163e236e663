"""Refusals found while typing the packers: a None where the contract needs a tensor,
and a served packer that is neither a function nor a packer object, end in one line, not a traceback."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.base.errors import PackingError
from harness.capture import CapturedRequest
from harness.capture.capture_laws import check_captured
from harness.data import ops
from harness.data.blocks import Block, BlockRows
from harness.data.ops import Op
from harness.laws import LAW_GEOMETRY
from harness.packers import serve
from harness.packers.packing import pack

W = LAW_GEOMETRY.window_samples
N = LAW_GEOMETRY.windows_per_block


def _voiceprint_block_without(missing: str) -> Block:
    """An OP 1 block built around Block.create (as a foreign caller might): WEIGHTS or IDX left None."""
    rows = 2
    tensors: dict[str, np.ndarray | None] = {
        "weights": np.ones((rows, LAW_GEOMETRY.frames_per_window), np.float32),
        "idx": np.zeros(rows, np.int32),
    }
    tensors[missing] = None
    return Block(
        id="vp",
        op=Op(1),
        span=np.ones(W, np.float32),
        offsets=np.zeros(N, np.int64),
        valid=np.full(N, W, np.int32),
        weights=tensors["weights"],
        idx=tensors["idx"],
    )


@pytest.mark.parametrize("missing", ["weights", "idx"])
@pytest.mark.parametrize("pad_to", [None, 2])
def test_pack_refuses_a_voiceprint_block_without_its_tensor(missing: str, pad_to: int | None) -> None:
    # before: a ValueError from np.concatenate or an AttributeError on None (exit 3, "internal bug")
    with pytest.raises(PackingError, match=rf"vp: an OP 1/2 request needs {missing.upper()}, it has none"):
        pack([_voiceprint_block_without(missing)], pad_to=pad_to)


def test_pack_still_packs_a_whole_voiceprint_block() -> None:
    # the positive control of the test above: the same block with both tensors packs
    block = _voiceprint_block_without("weights")
    whole = Block(
        id=block.id,
        op=block.op,
        span=block.span,
        offsets=block.offsets,
        valid=block.valid,
        weights=np.ones((2, LAW_GEOMETRY.frames_per_window), np.float32),
        idx=block.idx,
    )
    packed = pack([whole], pad_to=2)
    assert packed.k == 2 and packed.rows == 2
    assert packed.tensors()["WEIGHTS"].shape == (2, LAW_GEOMETRY.frames_per_window)


def test_serve_refuses_a_spec_that_is_not_a_packer(capsys: pytest.CaptureFixture[str]) -> None:
    # before: served, then a TypeError traceback at the first pack request (an int is not callable)
    assert serve.main(["harness.laws.strategies:MAX_ROWS"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "harness: error: packer 'harness.laws.strategies:MAX_ROWS': a int is neither a function nor an "
        "object with pack() and unpack()"
    ]


@pytest.mark.parametrize("missing", ["weights", "idx"])
def test_a_captured_voiceprint_request_without_its_tensor_is_a_violation_not_a_crash(missing: str) -> None:
    # PackedRequest.tensors() leaves a None out (check_request then names the field): a capture may
    # hold an OP 1 request with a null WEIGHTS or IDX, which the audit reports as not well formed
    whole = Block.create(
        "vp",
        1,
        np.ones(W, np.float32),
        np.zeros(N, np.int64),
        np.full(N, W, np.int32),
        LAW_GEOMETRY,
        BlockRows(np.ones((2, LAW_GEOMETRY.frames_per_window), np.float32), np.zeros(2, np.int32)),
    )
    broken = dataclasses.replace(pack([whole]), **{missing: None})
    assert (ops.WEIGHTS if missing == "weights" else ops.IDX) not in broken.tensors()
    request = CapturedRequest(
        "r0",
        broken,
        np.zeros((2, LAW_GEOMETRY.embedding_dim), np.float32),
        "fp",
        "cpu",
        "1",
        "2026-01-02T03:04:05.678901+00:00",
    )
    (v,) = check_captured(request, LAW_GEOMETRY)
    assert v.law == "well-formed" and v.what == f"{missing.upper()}=None: OP 1 (voiceprint) requires {missing.upper()}"
