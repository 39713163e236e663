"""The one packer: k blocks -> one request, and the request's outputs -> k blocks' outputs.

Both lanes, every backend and the golden store use only this module to pack and unpack, so
a rebasing rule lives in exactly one place and the packing laws (:mod:`harness.laws`) cover
every path a fast-lane result can take.

:class:`Packer` is the seam for *another* packer (the engine's, in another language, over the
wire protocol of :mod:`harness.packers`): anything with ``pack``/``unpack`` of these
signatures can be judged by the same laws and used by the fast lane; :class:`HarnessPacker`
is this module's packer behind that seam.

Rules (docs/models.md, "Packing"): SPAN is the concatenation of the blocks' spans; each block's OFFSETS are
shifted by the total length of the spans before it; IDX by the number of windows before it;
VALID and WEIGHTS are concatenated. One OP per pack. Padding up to a fixed k (the
fixed-compiled-batch behaviour of seed 004) appends empty blocks: an empty span, VALID = 0
for every window, no voiceprint rows; their outputs are dropped on unpack.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from harness import __version__
from harness.data import ops
from harness.data.blocks import Block, concat_spans
from harness.data.errors import PackingError
from harness.data.ops import Op

PADDING_PREFIX = "<pad>"
# The largest list the packing laws pack unless the caller names its largest candidate k. Here, not in
# harness.laws (which re-exports it): the nightly's laws gate reads it without importing hypothesis.
LAWS_DEFAULT_MAX_BLOCKS = 64


@dataclass(frozen=True)
class Segment:
    """Where one block lives inside a packed request."""

    block_id: str
    span_start: int
    span_length: int
    window_start: int
    windows: int
    row_start: int
    rows: int
    padding: bool = False

    @property
    def span_slice(self) -> slice:
        return slice(self.span_start, self.span_start + self.span_length)

    @property
    def window_slice(self) -> slice:
        return slice(self.window_start, self.window_start + self.windows)

    @property
    def row_slice(self) -> slice:
        return slice(self.row_start, self.row_start + self.rows)


@dataclass(frozen=True, eq=False)
class PackedRequest:
    """One request carrying several blocks, plus the layout needed to take it apart again."""

    op: Op
    span: np.ndarray
    offsets: np.ndarray
    valid: np.ndarray
    weights: np.ndarray | None
    idx: np.ndarray | None
    speakers: np.ndarray | None
    segments: tuple[Segment, ...]
    # Triton's ragged-batching index tensors as the packer emitted them (None: it emitted none;
    # :meth:`ragged_index` derives them from the layout either way).
    batch_inputs: Mapping[str, np.ndarray] | None = None

    @property
    def k(self) -> int:
        """Blocks per call, padding included: the batch shape the network sees is 8 x k windows."""
        return len(self.segments)

    @property
    def block_ids(self) -> list[str]:
        return [s.block_id for s in self.segments if not s.padding]

    @property
    def windows(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def rows(self) -> int:
        return 0 if self.idx is None else int(self.idx.shape[0])

    def tensors(self) -> dict[str, np.ndarray]:
        """The wire request (names as in Triton)."""
        out = {
            ops.SPAN: self.span,
            ops.OFFSETS: self.offsets,
            ops.VALID: self.valid,
            ops.OP: np.array([int(self.op)], dtype=np.int32),
        }
        if self.op.is_voiceprint:
            # a None is left out (the same to check_request, which .get()s them): a foreign packer's or a
            # capture's request is refused there, naming the field, not here
            for name, tensor in ((ops.WEIGHTS, self.weights), (ops.IDX, self.idx)):
                if tensor is not None:
                    out[name] = tensor
        return out

    @property
    def nbytes(self) -> int:
        return sum(int(t.nbytes) for t in self.tensors().values())

    def ragged_index(self, dtype: type = np.int32) -> dict[str, np.ndarray]:
        """Triton's ragged-batching index tensors describing how SPAN was concatenated."""
        return ragged_batch_inputs([(s.span_length,) for s in self.segments], dtype=dtype)

    def split(self) -> list[Block]:
        """The blocks this request was packed from (padding excluded), un-rebased."""
        return [b for b, seg in zip(_parts(self), self.segments, strict=True) if not seg.padding]


@runtime_checkable
class Packer(Protocol):
    """What packs blocks into requests and takes the answers apart: the fast lane's seam.

    ``pack`` keeps the blocks' order; ``unpack`` returns one array per real (non-padding)
    block, in pack order. ``name`` and ``describe()`` are provenance (recorded with results);
    ``close()`` releases what the packer holds (an external process). Implementations:
    :class:`HarnessPacker` (this module), :class:`harness.packers.ExternalPacker` (a process
    speaking the wire protocol), :class:`harness.packers.CallablePacker` (a Python callable).
    """

    name: str

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest: ...

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


class HarnessPacker:
    """The harness's own packer (:func:`pack` / :func:`unpack`) as a :class:`Packer`.

    ``accepts_packs``: :meth:`pack` also takes packed requests (packing is associative), which
    the nested form of the associativity law uses; packers behind the wire take blocks only.
    """

    name = "harness"
    accepts_packs = True

    def pack(self, items: Sequence[Block | PackedRequest], pad_to: int | None = None) -> PackedRequest:
        return pack(items, pad_to=pad_to)

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return unpack(packed, outputs)

    def describe(self) -> dict[str, Any]:
        """Provenance; ``identity`` is what a promotion is keyed by (bound to this module's source)."""
        return {"name": self.name, "kind": "harness", "module": __name__, "identity": harness_identity()}

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> HarnessPacker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@functools.cache
def harness_identity() -> str:
    """``harness/<package version>+<12 hex of sha256 of this file>``: the name and version, bound to the code.

    A change to the packing rules (this file) is another packer: its shapes must be promoted again.
    """
    return f"harness/{__version__}+{hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}"


def pack(items: Sequence[Block | PackedRequest], pad_to: int | None = None) -> PackedRequest:
    """Pack blocks (or packs: packing is associative) into one request of one OP.

    ``pad_to`` appends empty blocks until the request holds exactly that many blocks.
    """
    if not items:
        raise PackingError("nothing to pack: give at least one block")
    parts: list[Block] = []
    pads: list[bool] = []
    for item in items:
        if isinstance(item, PackedRequest):
            parts.extend(_parts(item))
            pads.extend(s.padding for s in item.segments)
        elif isinstance(item, Block):
            parts.append(item)
            pads.append(False)
        else:
            raise PackingError(f"cannot pack a {type(item).__name__}: expected Block or PackedRequest")

    op = parts[0].op
    for part in parts[1:]:
        if part.op is not op:
            raise PackingError(
                f"cannot mix OPs in one request: block {parts[0].id!r} is OP {int(op)}, "
                f"block {part.id!r} is OP {int(part.op)}"
            )
    seen: set[str] = set()
    for part, pad in zip(parts, pads, strict=True):
        if not pad and part.id in seen:
            raise PackingError(f"block {part.id!r} appears twice in one pack")
        seen.add(part.id)

    if pad_to is not None:
        real = sum(not p for p in pads)
        if pad_to < len(parts):
            raise PackingError(f"cannot pad {len(parts)} blocks down to k={pad_to}")
        windows = parts[0].windows
        frames = _voiceprint(parts[0].weights, ops.WEIGHTS, parts[0].id).shape[1] if op.is_voiceprint else 0
        for j in range(pad_to - len(parts)):
            parts.append(_padding_block(f"{PADDING_PREFIX}{real + j}", op, windows, frames))
            pads.append(True)

    segments: list[Segment] = []
    span_at = window_at = row_at = 0
    for part, pad in zip(parts, pads, strict=True):
        seg = Segment(part.id, span_at, int(part.span.shape[0]), window_at, part.windows, row_at, part.rows, pad)
        segments.append(seg)
        span_at += seg.span_length
        window_at += seg.windows
        row_at += seg.rows
    if window_at > np.iinfo(np.int32).max:
        raise PackingError(f"{window_at} windows do not fit IDX (int32)")

    span = concat_spans([p.span for p in parts])
    offsets = np.concatenate(
        [p.offsets + np.int64(s.span_start) for p, s in zip(parts, segments, strict=True)]
    ).astype(np.int64, copy=False)
    valid = np.concatenate([p.valid for p in parts]).astype(np.int32, copy=False)
    weights = idx = speakers = None
    if op.is_voiceprint:
        weights = np.concatenate([_voiceprint(p.weights, ops.WEIGHTS, p.id) for p in parts]).astype(
            np.float32, copy=False)
        idx = np.concatenate(
            [_voiceprint(p.idx, ops.IDX, p.id).astype(np.int64) + s.window_start
             for p, s in zip(parts, segments, strict=True)]
        ).astype(np.int32)
        part_speakers = [p.speakers for p in parts]
        if all(sp is not None for sp in part_speakers):
            speakers = np.concatenate([sp for sp in part_speakers if sp is not None]).astype(np.int32, copy=False)
    return PackedRequest(op, span, offsets, valid, weights, idx, speakers, tuple(segments))




def unpack(packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Slice a packed call's output back into one array (a view) per real block, in pack order.

    The output must cover exactly the request's windows (OP 0) or rows (OP 1/2): anything
    else means the model answered another question, and is refused rather than sliced.
    """
    name = packed.op.output_name
    if name not in outputs:
        raise PackingError(f"OP {int(packed.op)} answer lacks output {name!r} (got {sorted(outputs)})")
    out = np.asarray(outputs[name])
    expected = packed.windows if packed.op is Op.SEGMENTATION else packed.rows
    unit = "windows" if packed.op is Op.SEGMENTATION else "rows"
    if out.ndim < 1 or out.shape[0] != expected:
        raise PackingError(
            f"output {name} has shape {list(out.shape)}: expected {expected} {unit} "
            f"for blocks {packed.block_ids[:3]}{'...' if len(packed.block_ids) > 3 else ''}"
        )
    result = []
    for seg in packed.segments:
        if seg.padding:
            continue
        # a view of the answer (each call's answer is its own array; the lanes copy every block's
        # part once, into their group's arrays)
        result.append(out[seg.window_slice] if packed.op is Op.SEGMENTATION else out[seg.row_slice])
    return result


def ragged_batch_inputs(
    item_shapes: Sequence[Sequence[int]], dtype: type = np.int32, batch_dim: bool = False
) -> dict[str, np.ndarray]:
    """The batch inputs Triton's ragged batching would generate for items of these shapes.

    With ``batch_dim`` the first dimension of each shape is the request's batch dimension
    and is left out of the item shapes (as Triton does for models with max_batch_size > 0).
    """
    if not item_shapes:
        raise PackingError("ragged batch inputs need at least one item")
    shapes = [tuple(int(d) for d in s) for s in item_shapes]
    if len({len(s) for s in shapes}) != 1:
        raise PackingError(f"ragged items must share a rank, got shapes {shapes}")
    counts = np.array([int(np.prod(s, dtype=np.int64)) for s in shapes], dtype=np.int64)
    item = np.array([s[1:] if batch_dim else s for s in shapes], dtype=np.int64)
    accumulated = np.cumsum(counts)
    return {
        "BATCH_ELEMENT_COUNT": counts.astype(dtype),
        "BATCH_ACCUMULATED_ELEMENT_COUNT": accumulated.astype(dtype),
        "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO": np.r_[0, accumulated].astype(dtype),
        # Triton leaves this tensor's data uninitialised; only its shape carries meaning.
        "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE": np.zeros(int(counts.max()), dtype=dtype),
        "BATCH_ITEM_SHAPE": item.astype(dtype),
        "BATCH_ITEM_SHAPE_FLATTEN": item.reshape(-1).astype(dtype),
    }


def _padding_block(block_id: str, op: Op, windows: int, frames: int) -> Block:
    # Built directly (not via Block.create): an empty span is illegal for a real block.
    zeros_i64 = np.zeros(windows, dtype=np.int64)
    return Block(
        id=block_id,
        op=op,
        span=np.zeros(0, dtype=np.float32),
        offsets=zeros_i64,
        valid=np.zeros(windows, dtype=np.int32),
        weights=np.zeros((0, frames), dtype=np.float32) if op.is_voiceprint else None,
        idx=np.zeros(0, dtype=np.int32) if op.is_voiceprint else None,
        speakers=np.zeros(0, dtype=np.int32) if op.is_voiceprint else None,
    )


def _voiceprint(tensor: np.ndarray | None, name: str, owner: str) -> np.ndarray:
    """An OP 1/2 tensor the Block/PackedRequest contract guarantees (Block.create checks it); one
    built around that contract is refused as a packing error, not an AttributeError on None."""
    if tensor is None:
        raise PackingError(f"{owner}: an OP 1/2 request needs {name}, it has none")
    return tensor


def _parts(packed: PackedRequest) -> list[Block]:
    """Every segment of a pack as a Block with local offsets/IDX (padding included)."""
    parts = []
    for seg in packed.segments:
        weights = idx = speakers = None
        if packed.op.is_voiceprint:
            weights = _voiceprint(packed.weights, ops.WEIGHTS, "packed request")[seg.row_slice]
            idx = (_voiceprint(packed.idx, ops.IDX, "packed request")[seg.row_slice].astype(np.int64)
                   - seg.window_start).astype(np.int32)
            if packed.speakers is not None:
                speakers = packed.speakers[seg.row_slice]
        parts.append(
            Block(
                id=seg.block_id,
                op=packed.op,
                span=packed.span[seg.span_slice],
                offsets=packed.offsets[seg.window_slice] - np.int64(seg.span_start),
                valid=packed.valid[seg.window_slice],
                weights=weights,
                idx=idx,
                speakers=speakers,
            )
        )
    return parts


HARNESS_PACKER = HarnessPacker()
