"""Check what a foreign packer answered before anything uses it.

A packed request from another packer is sent to a network and sliced back into per-block
results by its layout; a malformed one would turn into wrong numbers, not an error. So every
answer of an :class:`~harness.packers.ExternalPacker` or :class:`~harness.packers.CallablePacker`
passes :func:`check_packed` (and every unpacked answer :func:`check_unpacked`) first.

These are the *structural* rules (the request contract of docs/models.md plus a consistent layout), the ones
without which the answer cannot even be interpreted. Whether the packer rebased correctly
(each window sees its own samples, ...) is the job of the laws (:mod:`harness.laws`), which
name the blocks that break them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.base.errors import BlockError
from harness.data.blocks import Block, check_request
from harness.data.geometry import Geometry
from harness.packers.packer_errors import PackerAnswerError
from harness.packers.packing import PackedRequest, Segment

# Wire dtypes of the request contract (docs/models.md): an answer in another dtype is refused, not converted.
DTYPES = {
    "span": np.float32,
    "offsets": np.int64,
    "valid": np.int32,
    "weights": np.float32,
    "idx": np.int32,
    "speakers": np.int32,
}
BATCH_INPUT_NAMES = (
    "BATCH_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO",
    "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
    "BATCH_ITEM_SHAPE",
    "BATCH_ITEM_SHAPE_FLATTEN",
)


def check_packed(
    packed: object, items: Sequence[Block], pad_to: int | None, geometry: Geometry, where: str
) -> PackedRequest:
    """Return ``packed`` if it is a well-formed packing of ``items``; raise PackerAnswerError.

    Rules: a :class:`PackedRequest` of the blocks' OP; the contract's dtypes; the request passes
    :func:`harness.data.blocks.check_request` against ``geometry``; the layout has one segment per block
    (plus padding up to ``pad_to``), the real ones carrying the blocks' ids in the given order and
    their own span/window/row counts, all segments contiguous and covering SPAN, the windows and
    the rows exactly; padding segments have the blocks' window count, no rows and VALID 0.
    """
    if not isinstance(packed, PackedRequest):
        raise PackerAnswerError(f"{where}: answered a {type(packed).__name__}, not a PackedRequest")
    try:
        _check(packed, items, pad_to, geometry, where)
    except PackerAnswerError as exc:
        exc.packed = packed  # what the packer produced, for whoever reports the failure
        raise
    return packed


def _check(packed: PackedRequest, items: Sequence[Block], pad_to: int | None, geometry: Geometry, where: str) -> None:
    if not items:
        raise PackerAnswerError(f"{where}: nothing was given to pack")
    op = items[0].op
    if packed.op is not op:
        raise PackerAnswerError(f"{where}: request has OP {int(packed.op)}, the blocks are OP {int(op)}")
    _check_dtypes(packed, where)
    try:
        check_request(packed.tensors(), geometry, where="packed request")
    except BlockError as exc:
        raise PackerAnswerError(f"{where}: {exc.field}={exc.value!r}: {exc.reason}") from None
    if packed.speakers is not None and packed.speakers.shape != (packed.rows,):
        raise PackerAnswerError(
            f"{where}: speakers has shape {list(packed.speakers.shape)}, expected one label per row ({packed.rows})"
        )
    _check_layout(packed, items, pad_to, where)
    _check_batch_inputs(packed, where)


def check_unpacked(answer: object, packed: PackedRequest, output: np.ndarray, where: str) -> list[np.ndarray]:
    """Return ``answer`` if it is one array per real block of ``packed``, each of its own size; else raise.

    Each array must have the output's dtype and trailing shape, and a leading dimension equal to
    the block's windows (OP 0) or rows (OP 1/2).
    """
    real = [s for s in packed.segments if not s.padding]
    if not isinstance(answer, list | tuple) or len(answer) != len(real):
        got = f"{len(answer)} arrays" if isinstance(answer, list | tuple) else f"a {type(answer).__name__}"
        raise PackerAnswerError(f"{where}: unpack answered {got}, expected one per real block ({len(real)})")
    out = []
    for seg, part in zip(real, answer, strict=True):
        if not isinstance(part, np.ndarray):
            raise PackerAnswerError(
                f"{where}: unpacked output of block {seg.block_id!r} is a {type(part).__name__}, not an array"
            )
        lead = seg.rows if packed.op.is_voiceprint else seg.windows
        expected = (lead, *output.shape[1:])
        if part.shape != expected or part.dtype != output.dtype:
            raise PackerAnswerError(
                f"{where}: unpacked output of block {seg.block_id!r} is {part.dtype}{list(part.shape)}, "
                f"expected {output.dtype}{list(expected)}"
            )
        out.append(part)
    return out


def _check_dtypes(packed: PackedRequest, where: str) -> None:
    voiceprint = packed.op.is_voiceprint
    for name, dtype in DTYPES.items():
        value = getattr(packed, name)
        if value is None:
            if name in ("span", "offsets", "valid") or (voiceprint and name in ("weights", "idx")):
                raise PackerAnswerError(f"{where}: {name.upper()} is missing")
            continue
        if not voiceprint and name in ("weights", "idx", "speakers"):
            raise PackerAnswerError(f"{where}: OP 0 request carries {name.upper()}")
        if not isinstance(value, np.ndarray):
            raise PackerAnswerError(f"{where}: {name.upper()} is a {type(value).__name__}, not an array")
        if value.dtype != np.dtype(dtype):
            raise PackerAnswerError(
                f"{where}: {name.upper()} has dtype {value.dtype}, the contract says {np.dtype(dtype)}"
            )


def _check_layout(packed: PackedRequest, items: Sequence[Block], pad_to: int | None, where: str) -> None:
    segments = packed.segments
    if not isinstance(segments, tuple) or not all(isinstance(s, Segment) for s in segments):
        raise PackerAnswerError(f"{where}: layout is not a tuple of Segments")
    want_k = len(items) if pad_to is None else pad_to
    if len(segments) != want_k:
        raise PackerAnswerError(
            f"{where}: layout has {len(segments)} segments, expected {want_k} "
            f"({len(items)} blocks{'' if pad_to is None else f' padded to k={pad_to}'})"
        )
    real = [s for s in segments if not s.padding]
    ids = [s.block_id for s in real]
    if ids != [b.id for b in items]:
        raise PackerAnswerError(
            f"{where}: layout lists blocks {_ids(ids)}, expected {_ids([b.id for b in items])} in that order"
        )
    span_at = window_at = row_at = 0
    for j, seg in enumerate(segments):
        name = f"segment {j} ({seg.block_id!r})"
        starts = (seg.span_start, seg.window_start, seg.row_start)
        if starts != (span_at, window_at, row_at):
            raise PackerAnswerError(
                f"{where}: {name} starts at span {seg.span_start}, window {seg.window_start}, row {seg.row_start}; "
                f"contiguous packing puts it at span {span_at}, window {window_at}, row {row_at}"
            )
        if min(seg.span_length, seg.windows, seg.rows) < 0:
            raise PackerAnswerError(f"{where}: {name} has a negative size")
        span_at += seg.span_length
        window_at += seg.windows
        row_at += seg.rows
    if (span_at, window_at, row_at) != (packed.span.shape[0], packed.windows, packed.rows):
        raise PackerAnswerError(
            f"{where}: layout covers {span_at} samples, {window_at} windows, {row_at} rows; the request has "
            f"{packed.span.shape[0]}, {packed.windows}, {packed.rows}"
        )
    for seg, block in zip(real, items, strict=True):
        got = (seg.span_length, seg.windows, seg.rows)
        want = (int(block.span.shape[0]), block.windows, block.rows)
        if got != want:
            raise PackerAnswerError(
                f"{where}: block {block.id!r} occupies {got[0]} samples, {got[1]} windows, "
                f"{got[2]} rows; it has {want[0]}, {want[1]}, {want[2]}"
            )
    for seg in segments:
        if seg.padding and (
            seg.windows != items[0].windows or seg.rows != 0 or (packed.valid[seg.window_slice] != 0).any()
        ):
            raise PackerAnswerError(
                f"{where}: padding segment {seg.block_id!r} must have {items[0].windows} windows "
                f"of VALID 0 and no rows (has {seg.windows} windows, VALID "
                f"{packed.valid[seg.window_slice].tolist()}, {seg.rows} rows)"
            )


def _check_batch_inputs(packed: PackedRequest, where: str) -> None:
    if packed.batch_inputs is None:
        return
    for name, value in packed.batch_inputs.items():
        if name not in BATCH_INPUT_NAMES:
            raise PackerAnswerError(f"{where}: {name} is not one of Triton's batch inputs {list(BATCH_INPUT_NAMES)}")
        if not isinstance(value, np.ndarray) or value.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
            raise PackerAnswerError(f"{where}: batch input {name} must be an int32 or int64 array")


def _ids(ids: list[str]) -> str:
    return str(ids) if len(ids) <= 6 else f"{ids[:3]}..{ids[-2:]} ({len(ids)})"
