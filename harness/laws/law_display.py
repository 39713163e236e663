"""How the law kit shows blocks and requests: one line per block, a request's tensors and layout (cut to a
readable length), and the same as plain data for a JSON document. A counterexample is read by the packer's
author: the block ids, span lengths, OFFSETS and VALID, the rows, and the layout the packer answered with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import numpy as np

from harness.data.blocks import Block
from harness.laws.boundary import LawParams
from harness.packers.packing import PackedRequest, Segment

LAYOUT_SHOWN = 10  # segments of a request's layout shown in full


def describe_params(params: LawParams, blocks: Sequence[Block]) -> str:
    """A law's example parameters in words (those of the kit's laws: pad_to, extra, cut)."""
    parts = []
    if params.pad_to is not None:
        parts.append(f"padded to k={params.pad_to}")
    if params.extra is not None:
        parts.append(f"padded to k={len(blocks) + params.extra}")
    if params.cut is not None:
        parts.append(f"split after {blocks[params.cut - 1].id!r}")
    return "".join(f", {p}" for p in parts)


def _arr(values: np.ndarray, limit: int = 24) -> str:
    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind == "f":
        text = " ".join(f"{v:.4g}" for v in flat[:limit])
    else:
        text = " ".join(str(int(v)) for v in flat[:limit])
    return f"[{text}{' ...' if flat.size > limit else ''}]"


def describe_block(block: Block) -> str:
    text = (
        f"{block.id}: SPAN {block.span.shape[0]} samples {_arr(block.span, 8)}, OFFSETS {_arr(block.offsets)}, "
        f"VALID {_arr(block.valid)}"
    )
    if block.op.is_voiceprint and block.idx is not None:  # (Block.create: OP 1/2 blocks have IDX)
        text += f", rows {block.rows}: IDX {_arr(block.idx)}"
        if block.speakers is not None:
            text += f", speakers {_arr(block.speakers)}"
    return text


def describe_request(packed: PackedRequest) -> list[str]:
    lines = [
        f"OP {int(packed.op)}, k={packed.k}, SPAN {packed.span.shape[0]} samples {_arr(packed.span, 8)}",
        f"OFFSETS {_arr(packed.offsets, 48)}",
        f"VALID   {_arr(packed.valid, 48)}",
    ]
    if packed.idx is not None:
        weights = None if packed.weights is None else list(packed.weights.shape)
        lines.append(
            f"IDX {_arr(packed.idx, 48)}, WEIGHTS {weights}"
            + (f", speakers {_arr(packed.speakers, 48)}" if packed.speakers is not None else "")
        )
    shown = packed.segments if len(packed.segments) <= LAYOUT_SHOWN else packed.segments[: LAYOUT_SHOWN - 2]
    layout = "; ".join(_segment(s) for s in shown)
    if len(shown) < len(packed.segments):  # a request padded to 64: the first segments and the last one
        pads = sum(s.padding for s in packed.segments[len(shown) : -1])
        layout += (
            f"; ... {len(packed.segments) - len(shown) - 1} more ({pads} of them padding) ...; "
            f"{_segment(packed.segments[-1])}"
        )
    lines.append(f"layout: {layout}")
    if packed.batch_inputs:
        lines.append(
            "index tensors: "
            + ", ".join(
                f"{k} {_arr(v)}"
                for k, v in sorted(packed.batch_inputs.items())
                if k != "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"
            )
        )
    return lines


def _segment(s: Segment) -> str:
    return (
        f"{s.block_id}{' (padding)' if s.padding else ''} SPAN[{s.span_start}:{s.span_start + s.span_length}] "
        f"windows[{s.window_start}:{s.window_start + s.windows}] rows[{s.row_start}:{s.row_start + s.rows}]"
    )


class BlockJson(TypedDict):
    """A block as the laws report's JSON holds it (``idx`` only for a voiceprint block)."""

    id: str
    op: int
    span_length: int
    offsets: list[int]
    valid: list[int]
    rows: int
    idx: NotRequired[list[int]]


class SegmentJson(TypedDict):
    """One segment of a request's layout (:class:`~harness.packers.packing.Segment`'s fields, in its order)."""

    block_id: str
    span_start: int
    span_length: int
    window_start: int
    windows: int
    row_start: int
    rows: int
    padding: bool


class RequestJson(TypedDict):
    """A packed request as the laws report's JSON holds it (its audio and weights left out)."""

    op: int
    k: int
    span_length: int
    offsets: list[int]
    valid: list[int]
    idx: list[int] | None
    segments: list[SegmentJson]


def block_dict(block: Block) -> BlockJson:
    """A block as the laws report's JSON holds it (idx only for a voiceprint block)."""
    out = BlockJson(
        id=block.id,
        op=int(block.op),
        span_length=int(block.span.shape[0]),
        offsets=block.offsets.tolist(),
        valid=block.valid.tolist(),
        rows=block.rows,
    )
    return out if block.idx is None else {**out, "idx": block.idx.tolist()}


def request_dict(packed: PackedRequest) -> RequestJson:
    """A packed request as the laws report's JSON holds it."""
    return RequestJson(
        op=int(packed.op),
        k=packed.k,
        span_length=int(packed.span.shape[0]),
        offsets=packed.offsets.tolist(),
        valid=packed.valid.tolist(),
        idx=None if packed.idx is None else packed.idx.tolist(),
        segments=[_segment_json(s) for s in packed.segments],
    )


def _segment_json(s: Segment) -> SegmentJson:
    return SegmentJson(
        block_id=s.block_id,
        span_start=s.span_start,
        span_length=s.span_length,
        window_start=s.window_start,
        windows=s.windows,
        row_start=s.row_start,
        rows=s.rows,
        padding=s.padding,
    )
