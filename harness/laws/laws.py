"""The packing laws: each one a function of a packer and blocks that raises LawBroken, saying what differed.

A law holds for every list of valid blocks of one OP. They judge any
:class:`~harness.packers.packing.Packer` (the harness's own, the engine's behind the wire, a Python
callable) through its ``pack``/``unpack`` only, so a packer that passes them is
interchangeable with the harness's for every fast-lane path:

==================== =======================================================================
well-formed          the packer answers every valid request with a request that meets the
                     contract and a consistent layout (:func:`harness.packers.validate.check_packed`)
round-trip           splitting the request by its layout gives back every block exactly, and
                     ``unpack`` returns each block's own outputs
own-samples          every window sees exactly the samples it sees when its block is sent alone
rebased-inside       each block's OFFSETS + VALID stay inside its own part of SPAN, its IDX
                     inside its own windows
per-window-function  a per-window (OP 0) / per-row (OP 1/2) function of the packed request,
                     unpacked, equals the function of each block alone
associative          pack(a..b) ++ pack(c..d) == pack(a..d) (++: concatenation with the contract's
                     rebasing); a packer that takes packs must also give pack([pack(a..b), pack(c..d)])
padding-dropped      padded to k with empty blocks, the request holds k blocks, and ``unpack``
                     returns exactly the real blocks with their own outputs
ragged-index         Triton's batch-input index tensors (BATCH_ELEMENT_COUNT, ..._ACCUMULATED...,
                     ..._WITH_ZERO, BATCH_MAX_ELEMENT_COUNT_AS_SHAPE, BATCH_ITEM_SHAPE(_FLATTEN))
                     are exactly those of the packer's layout (one item per segment, a padding
                     block an item of 0 samples, one integer dtype) and locate every block's span
==================== =======================================================================

A malformed answer (off the contract, or a refusal) is a counterexample of every law it was
asked for, not an example skipped: a packer that drops every block after the 16th breaks them
all, on 17 blocks. A packer that cannot be run (it exits, stalls, raises: :class:`PackerFailed`,
:class:`PackerUnavailable`) is no law's counterexample: its one-line error propagates (exit 2),
naming the request it was answering. The registry (:data:`harness.laws.registry.LAWS`) says
which examples each law is judged on; what the laws are built from (calling the packer, the reference
function, :class:`LawBroken`) is :mod:`harness.laws.law_tools`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.data.blocks import Block
from harness.data.isolation import request_window
from harness.laws.law_tools import FATAL, LawBroken, _first_difference, model_fn, packed_by, unpacked_by
from harness.laws.strategies import LAW_GEOMETRY, W
from harness.packers.packer_errors import PackerError
from harness.packers.packing import PackedRequest, Packer, Segment, pack, ragged_batch_inputs
from harness.packers.validate import BATCH_INPUT_NAMES

OUTPUT_WIDTH = 2  # trailing size of the random outputs of the round trip: [n, F, 2]


# ------------------------------------------------------------------ helpers


def _segments(packed: PackedRequest) -> list[Segment]:
    return [s for s in packed.segments if not s.padding]


def _same_request(a: PackedRequest, b: PackedRequest) -> str:
    """'' if two requests are equal field by field (layout included), else the first difference."""
    for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None):
            return f"{name.upper()} is {'absent' if x is None else 'present'} in one and not the other"
        if x is not None and (diff := _first_difference(x, y)):
            return f"{name.upper()}: {diff}"
    for sa, sb in zip(a.segments, b.segments, strict=False):
        if sa != sb:
            return f"layout: {sa} instead of {sb}"
    if len(a.segments) != len(b.segments):
        return f"layout: {len(a.segments)} segments instead of {len(b.segments)}"
    return ""


def _where_window(packed: PackedRequest, i: int) -> str:
    for seg in packed.segments:
        if seg.window_start <= i < seg.window_start + seg.windows:
            return f"window {i - seg.window_start} of block {seg.block_id!r} (window {i} of the request)"
    return f"window {i} of the request"


# ------------------------------------------------------------------ the laws


def law_well_formed(packer: Packer, blocks: Sequence[Block], pad_to: int | None = None) -> None:
    """The packer answers valid blocks with a request that meets the contract and a consistent layout."""
    packed_by(packer, blocks, "well-formed", pad_to)


def law_round_trip(packer: Packer, blocks: Sequence[Block]) -> None:
    """Split by its layout, the request gives back every block exactly; unpack returns each block's outputs."""
    packed = packed_by(packer, blocks, "round-trip")
    for original, back in zip(blocks, packed.split(), strict=True):
        for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
            x, y = getattr(back, name), getattr(original, name)
            if (x is None) != (y is None):
                raise LawBroken(
                    "round-trip",
                    f"block {original.id!r}: {name.upper()} is "
                    f"{'lost' if x is None else 'invented'} by the packed request",
                    packed,
                )
            if x is not None and (diff := _first_difference(x, y)):
                raise LawBroken(
                    "round-trip",
                    f"block {original.id!r} split back from the request by its layout: {name.upper()} {diff}",
                    packed,
                )
    rng = np.random.default_rng(0)
    outputs = [
        rng.standard_normal(
            (b.rows if b.op.is_voiceprint else b.windows, LAW_GEOMETRY.frames_per_window, OUTPUT_WIDTH)
        ).astype(np.float32)
        for b in blocks
    ]
    got = unpacked_by(packer, packed, np.concatenate(outputs), "round-trip")
    if len(got) != len(blocks):
        raise LawBroken("round-trip", f"unpack returned {len(got)} arrays for {len(blocks)} blocks", packed)
    for block, want, part in zip(blocks, outputs, got, strict=True):
        if diff := _first_difference(np.asarray(part), want):
            raise LawBroken("round-trip", f"unpacked output of block {block.id!r}: {diff}", packed)


def law_own_samples(packer: Packer, blocks: Sequence[Block]) -> None:
    """Every window of the request sees exactly the samples it sees when its block is sent alone."""
    packed = packed_by(packer, blocks, "own-samples")
    request = packed.tensors()
    for block, seg in zip(blocks, _segments(packed), strict=True):
        alone = block.tensors()
        for i in range(block.windows):
            got = request_window(request, seg.window_start + i, W)
            want = request_window(alone, i, W)
            if diff := _first_difference(got, want):
                raise LawBroken(
                    "own-samples",
                    f"{_where_window(packed, seg.window_start + i)} sees other samples "
                    f"packed than alone (OFFSETS {int(packed.offsets[seg.window_start + i])}, VALID "
                    f"{int(packed.valid[seg.window_start + i])} packed; OFFSETS {int(block.offsets[i])}, "
                    f"VALID {int(block.valid[i])} alone): {diff}",
                    packed,
                )


def law_rebased_inside(packer: Packer, blocks: Sequence[Block]) -> None:
    """Each block's OFFSETS + VALID stay inside its own part of SPAN, its IDX inside its own windows."""
    rebased_inside(packed_by(packer, blocks, "rebased-inside"))


def rebased_inside(packed: PackedRequest) -> None:
    """The ``rebased-inside`` law on one well-formed request as it stands (a packer's answer, or a
    request the engine captured in production: :mod:`harness.capture`); raises LawBroken."""
    for seg in packed.segments:
        offs = packed.offsets[seg.window_slice]
        end = offs + packed.valid[seg.window_slice]
        bad = np.flatnonzero((offs < seg.span_start) | (end > seg.span_start + seg.span_length))
        if bad.size:
            i = int(bad[0])
            raise LawBroken(
                "rebased-inside",
                f"{_where_window(packed, seg.window_start + i)} reads SPAN "
                f"[{int(offs[i])}, {int(end[i])}), outside its block's part "
                f"[{seg.span_start}, {seg.span_start + seg.span_length})",
                packed,
            )
        if packed.op.is_voiceprint:
            assert packed.idx is not None, "check_packed refuses an OP 1/2 request without IDX"
            idx = packed.idx[seg.row_slice]
            bad = np.flatnonzero((idx < seg.window_start) | (idx >= seg.window_start + seg.windows))
            if bad.size:
                r = int(bad[0])
                raise LawBroken(
                    "rebased-inside",
                    f"row {r} of block {seg.block_id!r} (row {seg.row_start + r} of "
                    f"the request) has IDX {int(idx[r])}, outside its block's windows "
                    f"[{seg.window_start}, {seg.window_start + seg.windows})",
                    packed,
                )


def law_per_window_function(packer: Packer, blocks: Sequence[Block]) -> None:
    """A per-window/per-row function of the request, unpacked, equals the function of each block alone."""
    packed = packed_by(packer, blocks, "per-window-function")
    got = unpacked_by(packer, packed, model_fn(packed.tensors()), "per-window-function")
    if len(got) != len(blocks):
        raise LawBroken("per-window-function", f"unpack returned {len(got)} arrays for {len(blocks)} blocks", packed)
    for block, part in zip(blocks, got, strict=True):
        if diff := _first_difference(np.asarray(part), model_fn(block.tensors())):
            unit = "row" if block.op.is_voiceprint else "window"
            raise LawBroken(
                "per-window-function",
                f"block {block.id!r}: f per {unit} of the packed request, "
                f"unpacked, differs from f of the block alone: {diff}",
                packed,
            )


def law_associative(packer: Packer, blocks: Sequence[Block], cut: int) -> None:
    """pack(a..b) ++ pack(c..d) == pack(a..d); and, for a packer that takes packs, the nested form too."""
    whole = packed_by(packer, blocks, "associative")
    left = packed_by(packer, blocks[:cut], "associative")
    right = packed_by(packer, blocks[cut:], "associative")
    joined = pack([left, right])  # the harness's concatenation: the contract's rebasing of two requests
    span = f"{blocks[0].id}..{blocks[cut - 1].id}", f"{blocks[cut].id}..{blocks[-1].id}"
    if diff := _same_request(joined, whole):
        raise LawBroken(
            "associative",
            f"pack({span[0]}) ++ pack({span[1]}) differs from pack({blocks[0].id}..{blocks[-1].id}): {diff}",
            whole,
        )
    if getattr(packer, "accepts_packs", False):
        try:
            # (Packer.pack is typed for blocks; a packer that says accepts_packs takes packs too)
            nested = packer.pack([left, right])  # type: ignore[list-item]
        except FATAL:
            raise
        except PackerError as exc:
            raise LawBroken("associative", f"the packer says it takes packs but refused two: {exc}", whole) from exc
        if diff := _same_request(nested, whole):
            raise LawBroken(
                "associative",
                f"pack([pack({span[0]}), pack({span[1]})]) (the request shown) differs "
                f"from pack({blocks[0].id}..{blocks[-1].id}): {diff}",
                nested,
            )


def law_padding_dropped(packer: Packer, blocks: Sequence[Block], extra: int) -> None:
    """Padded to k, the request holds k blocks; unpack returns exactly the real ones, with their own outputs."""
    k = len(blocks) + extra
    packed = packed_by(packer, blocks, "padding-dropped", pad_to=k)
    if packed.k != k or packed.block_ids != [b.id for b in blocks]:
        raise LawBroken(
            "padding-dropped",
            f"padded to k={k}, the request holds {packed.k} blocks, real ones {packed.block_ids}",
            packed,
        )
    got = unpacked_by(packer, packed, model_fn(packed.tensors()), "padding-dropped")
    if len(got) != len(blocks):
        raise LawBroken(
            "padding-dropped", f"unpack returned {len(got)} arrays for {len(blocks)} real blocks (k={k})", packed
        )
    for block, part in zip(blocks, got, strict=True):
        if diff := _first_difference(np.asarray(part), model_fn(block.tensors())):
            raise LawBroken("padding-dropped", f"block {block.id!r} in a request padded to k={k}: {diff}", packed)


def law_ragged_index(packer: Packer, blocks: Sequence[Block], pad_to: int | None = None) -> str:
    """Triton's batch-input index tensors are exactly those of the packer's layout, padded requests included.

    The convention (the harness's :meth:`PackedRequest.ragged_index`): one item per segment of
    the layout, in order, padding blocks included as items of 0 samples; every tensor in one
    integer dtype (int32 or int64: the batch inputs' data_type), compared by shape, dtype and
    value. A packer that emits none is judged on the derivation from its layout (padding
    segments must still hold no samples). Returns where the tensors came from, for the report.
    """
    packed = packed_by(packer, blocks, "ragged-index", pad_to)
    for seg in packed.segments:
        if seg.padding and seg.span_length != 0:
            raise LawBroken(
                "ragged-index",
                f"padding segment {seg.block_id!r} holds {seg.span_length} samples of "
                "SPAN; a padding block is a ragged item of 0 samples",
                packed,
            )
    emitted = dict(packed.batch_inputs or {})
    dtypes = sorted({str(np.asarray(v).dtype) for v in emitted.values()})
    if len(dtypes) > 1:
        raise LawBroken(
            "ragged-index",
            f"the index tensors mix dtypes {dtypes} "
            f"({ {k: str(np.asarray(v).dtype) for k, v in sorted(emitted.items())} }); emit all of "
            "them in one: int32 or int64",
            packed,
        )
    dtype = np.dtype(dtypes[0]) if dtypes else np.dtype(np.int32)
    lengths = [s.span_length for s in packed.segments]
    want = ragged_batch_inputs([(n,) for n in lengths], dtype=dtype.type)
    index = emitted or packed.ragged_index(dtype.type)
    source = "emitted by the packer" if emitted else "derived from the packer's layout"
    pads = sum(s.padding for s in packed.segments)
    items = (
        f"{len(lengths)} items (spans of {[s.span_length for s in packed.segments if not s.padding]} samples"
        + (f" and {pads} padding item(s) of 0" if pads else "")
        + ")"
    )
    for name in BATCH_INPUT_NAMES:
        if name not in index:
            continue
        got = np.asarray(index[name])
        if name == "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE":  # only its shape carries meaning
            if got.shape != want[name].shape:
                raise LawBroken(
                    "ragged-index",
                    f"{name} ({source}) has shape {list(got.shape)}, expected "
                    f"{list(want[name].shape)} (the longest item) for {items}",
                    packed,
                )
            continue
        if diff := _first_difference(got, want[name]):
            raise LawBroken(
                "ragged-index",
                f"{name} ({source}) for {items}: {diff}; got {_ints(got)}, the layout gives {_ints(want[name])}",
                packed,
            )
    acc = np.asarray(want["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"]).astype(np.int64)  # by its Triton input name
    for j, seg in enumerate(packed.segments):
        if seg.padding:
            continue
        block = blocks[[b.id for b in blocks].index(seg.block_id)]
        if diff := _first_difference(packed.span[acc[j] : acc[j + 1]], block.span):
            raise LawBroken(
                "ragged-index",
                f"SPAN[{acc[j]}:{acc[j + 1]}] (item {j}) is not block {block.id!r}'s span: {diff}",
                packed,
            )
    return f"index tensors {source}" + ("" if not emitted else f": {sorted(emitted)}")


def _ints(values: np.ndarray, limit: int = 12) -> str:
    flat = np.asarray(values).reshape(-1)
    text = " ".join(str(int(v)) for v in flat[:limit])
    return f"{np.asarray(values).dtype}[{text}{' ...' if flat.size > limit else ''}]"
