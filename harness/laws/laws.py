"""The packing laws: each one a function of a packer and blocks that raises LawBroken, saying what differed.

A law holds for every list of valid blocks of one OP. They judge any
:class:`~harness.packing.Packer` (the harness's own, the engine's behind the wire, a Python
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
associative          pack(a..b) ++ pack(c..d) == pack(a..d) (++: concatenation with DESIGN's
                     rebasing); a packer that takes packs must also give pack([pack(a..b), pack(c..d)])
padding-dropped      padded to k with empty blocks, the request holds k blocks, and ``unpack``
                     returns exactly the real blocks with their own outputs
ragged-index         Triton's batch-input index tensors (BATCH_ELEMENT_COUNT, ..._ACCUMULATED...,
                     ..._WITH_ZERO, BATCH_MAX_ELEMENT_COUNT_AS_SHAPE, BATCH_ITEM_SHAPE(_FLATTEN))
                     locate every block's span in SPAN
==================== =======================================================================

Every law but ``well-formed`` judges only requests that are well formed: on a malformed answer
it raises :class:`NotJudged` (that example belongs to ``well-formed``), so each broken law is
shown with a counterexample of its own kind of failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from harness import ops
from harness.blocks import Block
from harness.isolation import request_window
from harness.laws.strategies import LAW_GEOMETRY, W, block_lists
from harness.packers.errors import PackerAnswerError, PackerTimeout, PackerUnavailable
from harness.packers.validate import BATCH_INPUT_NAMES, check_packed
from harness.packing import PackedRequest, Packer, pack, ragged_batch_inputs

OUTPUT_WIDTH = 2  # trailing size of the random outputs of the round trip: [n, F, 2]
FATAL = (PackerUnavailable, PackerTimeout)  # the packer cannot be run: no law can be judged


class LawBroken(Exception):
    """A law does not hold for these blocks: ``what`` says what differed, ``packed`` is the request."""

    def __init__(self, law: str, what: str, packed: PackedRequest | None = None) -> None:
        self.law, self.what, self.packed = law, what, packed
        super().__init__(f"law {law} broken: {what}")


class NotJudged(Exception):
    """This example cannot judge the law (the packer's answer is not well formed)."""


# ------------------------------------------------------------------ calling the packer


def packed_by(packer: Packer, blocks: Sequence[Block], law: str, pad_to: int | None = None) -> PackedRequest:
    """The packer's (checked) request for ``blocks``; NotJudged if it failed or is malformed.

    A failure of the packer itself (it raised, refused, died, answered off the contract) is
    the ``well-formed`` law's to report; FATAL errors propagate (nothing can be judged).
    """
    try:
        packed = packer.pack(list(blocks), pad_to=pad_to)
        return check_packed(packed, blocks, pad_to, LAW_GEOMETRY, f"packer {packer.name!r}")
    except FATAL:
        raise
    except Exception as exc:
        raise NotJudged(f"{law}: {exc}") from exc


def unpacked_by(packer: Packer, packed: PackedRequest, output: np.ndarray, law: str) -> list[np.ndarray]:
    """The packer's ``unpack`` of ``output``; any failure of it breaks ``law``."""
    try:
        return packer.unpack(packed, {packed.op.output_name: output})
    except FATAL:
        raise
    except Exception as exc:
        raise LawBroken(law, f"unpack failed: {type(exc).__name__}: {exc}", packed) from exc


# ------------------------------------------------------------------ helpers


def window_fn(samples: np.ndarray) -> np.ndarray:
    """A per-window function sensitive to every sample and its position (float32, like a network)."""
    pos = np.arange(samples.shape[0], dtype=np.float64) + 1.0
    x = samples.astype(np.float64)
    return np.array([x.sum(), (x * pos).sum(), np.abs(x).max(initial=0.0)], dtype=np.float32)


def model_fn(request: Mapping[str, np.ndarray]) -> np.ndarray:
    """``window_fn`` per window (OP 0: [N, 3]) or per voiceprint row (OP 1/2: [R, 3]) of any request."""
    n = request[ops.OFFSETS].shape[0]
    per_window = (np.stack([window_fn(request_window(request, i, W)) for i in range(n)]) if n
                  else np.zeros((0, 3), np.float32))
    if int(request[ops.OP][0]) == 0:
        return per_window
    weights = request[ops.WEIGHTS]
    return (per_window[request[ops.IDX]] * weights.sum(axis=1, keepdims=True, dtype=np.float32)).astype(np.float32)


def _first_difference(got: np.ndarray, want: np.ndarray) -> str:
    if got.shape != want.shape:
        return f"shape {list(got.shape)} instead of {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} instead of {want.dtype}"
    diff = np.argwhere(got != want)  # NaN never equals: none is drawn, and none may be invented
    if not diff.size:
        return ""
    at = tuple(int(v) for v in diff[0])
    where = ",".join(str(v) for v in at)
    return (f"{len(diff)} of {got.size} values differ, first at [{where}]: {_value(got[at])} instead of "
            f"{_value(want[at])}")


def _value(x: np.generic) -> str:
    return f"{float(x):.7g}" if np.asarray(x).dtype.kind == "f" else str(x.item())


def _segments(packed: PackedRequest) -> list:
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
    try:
        packed = packer.pack(list(blocks), pad_to=pad_to)
    except FATAL:
        raise
    except PackerAnswerError as exc:
        raise LawBroken("well-formed", str(exc), getattr(exc, "packed", None)) from exc
    except Exception as exc:
        raise LawBroken("well-formed", f"the packer failed on valid blocks: {type(exc).__name__}: {exc}") from exc
    try:
        check_packed(packed, blocks, pad_to, LAW_GEOMETRY, "the request")
    except PackerAnswerError as exc:
        raise LawBroken("well-formed", str(exc), packed if isinstance(packed, PackedRequest) else None) from exc


def law_round_trip(packer: Packer, blocks: Sequence[Block]) -> None:
    """Split by its layout, the request gives back every block exactly; unpack returns each block's outputs."""
    packed = packed_by(packer, blocks, "round-trip")
    for original, back in zip(blocks, packed.split(), strict=True):
        for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
            x, y = getattr(back, name), getattr(original, name)
            if (x is None) != (y is None):
                raise LawBroken("round-trip", f"block {original.id!r}: {name.upper()} is "
                                f"{'lost' if x is None else 'invented'} by the packed request", packed)
            if x is not None and (diff := _first_difference(x, y)):
                raise LawBroken("round-trip", f"block {original.id!r} split back from the request by its layout: "
                                f"{name.upper()} {diff}", packed)
    rng = np.random.default_rng(0)
    outputs = [rng.standard_normal((b.rows if b.op.is_voiceprint else b.windows, LAW_GEOMETRY.frames_per_window,
                                    OUTPUT_WIDTH)).astype(np.float32) for b in blocks]
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
                raise LawBroken("own-samples", f"{_where_window(packed, seg.window_start + i)} sees other samples "
                                f"packed than alone (OFFSETS {int(packed.offsets[seg.window_start + i])}, VALID "
                                f"{int(packed.valid[seg.window_start + i])} packed; OFFSETS {int(block.offsets[i])}, "
                                f"VALID {int(block.valid[i])} alone): {diff}", packed)


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
            raise LawBroken("rebased-inside", f"{_where_window(packed, seg.window_start + i)} reads SPAN "
                            f"[{int(offs[i])}, {int(end[i])}), outside its block's part "
                            f"[{seg.span_start}, {seg.span_start + seg.span_length})", packed)
        if packed.op.is_voiceprint:
            idx = packed.idx[seg.row_slice]
            bad = np.flatnonzero((idx < seg.window_start) | (idx >= seg.window_start + seg.windows))
            if bad.size:
                r = int(bad[0])
                raise LawBroken("rebased-inside", f"row {r} of block {seg.block_id!r} (row {seg.row_start + r} of "
                                f"the request) has IDX {int(idx[r])}, outside its block's windows "
                                f"[{seg.window_start}, {seg.window_start + seg.windows})", packed)


def law_per_window_function(packer: Packer, blocks: Sequence[Block]) -> None:
    """A per-window/per-row function of the request, unpacked, equals the function of each block alone."""
    packed = packed_by(packer, blocks, "per-window-function")
    got = unpacked_by(packer, packed, model_fn(packed.tensors()), "per-window-function")
    if len(got) != len(blocks):
        raise LawBroken("per-window-function", f"unpack returned {len(got)} arrays for {len(blocks)} blocks", packed)
    for block, part in zip(blocks, got, strict=True):
        if diff := _first_difference(np.asarray(part), model_fn(block.tensors())):
            unit = "row" if block.op.is_voiceprint else "window"
            raise LawBroken("per-window-function", f"block {block.id!r}: f per {unit} of the packed request, "
                            f"unpacked, differs from f of the block alone: {diff}", packed)


def law_associative(packer: Packer, blocks: Sequence[Block], cut: int) -> None:
    """pack(a..b) ++ pack(c..d) == pack(a..d); and, for a packer that takes packs, the nested form too."""
    whole = packed_by(packer, blocks, "associative")
    left = packed_by(packer, blocks[:cut], "associative")
    right = packed_by(packer, blocks[cut:], "associative")
    joined = pack([left, right])  # the harness's concatenation: DESIGN's rebasing of two requests
    span = f"{blocks[0].id}..{blocks[cut - 1].id}", f"{blocks[cut].id}..{blocks[-1].id}"
    if diff := _same_request(joined, whole):
        raise LawBroken("associative", f"pack({span[0]}) ++ pack({span[1]}) differs from "
                        f"pack({blocks[0].id}..{blocks[-1].id}): {diff}", whole)
    if getattr(packer, "accepts_packs", False):
        try:
            nested = packer.pack([left, right])
        except FATAL:
            raise
        except Exception as exc:
            raise LawBroken("associative", f"the packer says it takes packs but failed on two: {exc}", whole) from exc
        if diff := _same_request(nested, whole):
            raise LawBroken("associative", f"pack([pack({span[0]}), pack({span[1]})]) (the request shown) differs "
                            f"from pack({blocks[0].id}..{blocks[-1].id}): {diff}", nested)


def law_padding_dropped(packer: Packer, blocks: Sequence[Block], extra: int) -> None:
    """Padded to k, the request holds k blocks; unpack returns exactly the real ones, with their own outputs."""
    k = len(blocks) + extra
    packed = packed_by(packer, blocks, "padding-dropped", pad_to=k)
    if packed.k != k or packed.block_ids != [b.id for b in blocks]:
        raise LawBroken("padding-dropped", f"padded to k={k}, the request holds {packed.k} blocks, real ones "
                        f"{packed.block_ids}", packed)
    got = unpacked_by(packer, packed, model_fn(packed.tensors()), "padding-dropped")
    if len(got) != len(blocks):
        raise LawBroken("padding-dropped", f"unpack returned {len(got)} arrays for {len(blocks)} real blocks "
                        f"(k={k})", packed)
    for block, part in zip(blocks, got, strict=True):
        if diff := _first_difference(np.asarray(part), model_fn(block.tensors())):
            raise LawBroken("padding-dropped", f"block {block.id!r} in a request padded to k={k}: {diff}", packed)


def law_ragged_index(packer: Packer, blocks: Sequence[Block]) -> str:
    """Triton's batch-input index tensors locate every block's span in SPAN (the packer's own, if it emits them).

    Returns where the tensors came from (the runner reports it: a packer that emits none is
    judged on the harness's derivation from its layout, and the report says so).
    """
    packed = packed_by(packer, blocks, "ragged-index")
    emitted = dict(packed.batch_inputs or {})
    index = emitted or packed.ragged_index()
    source = "emitted by the packer" if emitted else "derived from the packer's layout"
    lengths = [int(b.span.shape[0]) for b in blocks]
    want = ragged_batch_inputs([(n,) for n in lengths], dtype=np.int64)
    for name in BATCH_INPUT_NAMES:
        if name not in index:
            continue
        got = np.asarray(index[name]).astype(np.int64)
        if name == "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE":  # only its shape carries meaning
            if got.shape != want[name].shape:
                raise LawBroken("ragged-index", f"{name} ({source}) has shape {list(got.shape)}, expected "
                                f"{list(want[name].shape)} (the longest span)", packed)
            continue
        if diff := _first_difference(got.reshape(want[name].shape) if got.size == want[name].size else got,
                                     want[name]):
            raise LawBroken("ragged-index", f"{name} ({source}) for spans of {lengths} samples: {diff}", packed)
    if "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO" in index:
        acc = np.asarray(index["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"]).astype(np.int64)
        for j, block in enumerate(blocks):
            if diff := _first_difference(packed.span[acc[j]: acc[j + 1]], block.span):
                raise LawBroken("ragged-index", f"SPAN[{acc[j]}:{acc[j + 1]}] ({source}) is not block "
                                f"{block.id!r}'s span: {diff}", packed)
    return f"index tensors {source}" + ("" if not emitted else f": {sorted(emitted)}")


# ------------------------------------------------------------------ the registry


@dataclass(frozen=True)
class Law:
    """One law: its name, what it states, its check and the examples it is judged on."""

    name: str
    statement: str
    check: Callable[..., str | None]  # raises LawBroken / NotJudged; may return a note for the report
    examples: Callable[[], st.SearchStrategy]  # -> (blocks, params)
    note: Callable[[Packer], str] = field(default=lambda packer: "")  # what the report must say up front

    def __call__(self, packer: Packer, blocks: Sequence[Block], **params: object) -> str | None:
        return self.check(packer, blocks, **params)


def _plain(max_k: int = 64) -> Callable[[], st.SearchStrategy]:
    return lambda: block_lists(max_k=max_k).map(lambda blocks: (blocks, {}))


@st.composite
def _well_formed_examples(draw):
    blocks = draw(block_lists())
    extra = draw(st.one_of(st.none(), st.integers(0, 8)), label="padding")
    return blocks, {"pad_to": None if extra is None else len(blocks) + extra}


@st.composite
def _cut_examples(draw):
    blocks = draw(block_lists(min_k=2, max_k=24))
    return blocks, {"cut": draw(st.integers(1, len(blocks) - 1), label="cut")}


@st.composite
def _padding_examples(draw):
    blocks = draw(block_lists(max_k=24))
    return blocks, {"extra": draw(st.integers(0, 8), label="padding blocks")}


def _associative_note(packer: Packer) -> str:
    if getattr(packer, "accepts_packs", False):
        return "concatenation and nested forms"
    return ("concatenation form only: the nested form pack([pack(a..b), pack(c..d)]) needs a packer that takes "
            "packs, and this one takes blocks")


LAWS: tuple[Law, ...] = (
    Law("well-formed", "the packer answers every valid request with a request that meets the contract "
        "(names, dtypes, OFFSETS + VALID inside SPAN, IDX in range) and a consistent layout", law_well_formed,
        lambda: _well_formed_examples()),
    Law("round-trip", "split by its layout, the request gives back every block exactly (SPAN, OFFSETS, VALID, "
        "WEIGHTS, IDX, speakers), and unpack returns each block's own outputs", law_round_trip, _plain()),
    Law("own-samples", "every window sees exactly the samples it sees when its block is sent alone (zeros past "
        "VALID, never another block's audio)", law_own_samples, _plain()),
    Law("rebased-inside", "each block's OFFSETS + VALID stay inside its own part of SPAN and its IDX inside its "
        "own windows", law_rebased_inside, _plain()),
    Law("per-window-function", "a per-window (OP 0) / per-row (OP 1/2) function of the packed request, "
        "unpacked, equals the function of each block alone", law_per_window_function, _plain()),
    Law("associative", "pack(a..b) ++ pack(c..d) == pack(a..d), ++ being DESIGN's rebasing concatenation",
        law_associative, lambda: _cut_examples(), _associative_note),
    Law("padding-dropped", "padded to k with empty blocks, the request holds k blocks and unpack returns exactly "
        "the real ones, with their own outputs", law_padding_dropped, lambda: _padding_examples()),
    Law("ragged-index", "Triton's batch-input index tensors (element counts, accumulated counts with and without "
        "zero, max element count as shape, item shapes) locate every block's span in SPAN", law_ragged_index,
        _plain()),
)
LAWS_BY_NAME: dict[str, Law] = {law.name: law for law in LAWS}
