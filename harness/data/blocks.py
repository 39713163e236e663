"""The block: the unit the engine sends, and the contract every lane and backend relies on.

A block is 8 overlapping windows of one contiguous span of audio (docs/models.md). Everything
that enters the harness (corpus rows, derived voiceprint requests, wire requests arriving at
a model) goes through the same field checks here, so a malformed input fails at the door
with one :class:`BlockError` naming the block, the field and the offending value, instead of
turning into a wrong golden later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.base.errors import BlockError
from harness.data import ops
from harness.data.geometry import Geometry
from harness.data.ops import Op


@dataclass(frozen=True, eq=False)
class BlockRows:
    """An OP 1/2 block's voiceprint rows as given to :meth:`Block.create` (normalised and checked there):
    WEIGHTS, IDX and the local speaker of each row (metadata, not a wire tensor)."""

    weights: object
    idx: object
    speakers: object | None = None


NO_ROWS = BlockRows(None, None)  # an OP 0 block's


@dataclass(frozen=True, eq=False)
class Block:
    """One block as the engine sends it (fields normalised, validated).

    ``speakers`` is metadata, not a wire tensor: the local speaker of each voiceprint row,
    so that rows can be matched by (block, window, speaker) rather than by position.
    """

    id: str
    op: Op
    span: np.ndarray
    offsets: np.ndarray
    valid: np.ndarray
    weights: np.ndarray | None = None
    idx: np.ndarray | None = None
    speakers: np.ndarray | None = None

    @classmethod
    def create(
        cls,
        id: str,
        op: object,
        span: object,
        offsets: object,
        valid: object,
        geometry: Geometry,
        rows: BlockRows = NO_ROWS,
    ) -> Block:
        """Normalise dtypes/shapes and validate against ``geometry``; raise BlockError. ``rows``: an OP 1/2
        block's WEIGHTS, IDX and speakers."""
        block_id = str(id)
        fields = check_fields(
            block_id,
            {
                ops.SPAN: span,
                ops.OFFSETS: offsets,
                ops.VALID: valid,
                ops.OP: op,
                ops.WEIGHTS: rows.weights,
                ops.IDX: rows.idx,
            },
            geometry,
        )
        n = fields.offsets.shape[0]
        if n != geometry.windows_per_block:
            raise BlockError(
                block_id,
                "OFFSETS",
                f"{n} windows",
                f"a block holds exactly {geometry.windows_per_block} windows in this release",
            )
        speaker_arr = _check_speakers(block_id, rows.speakers, fields.idx, geometry)
        return cls(
            id=block_id,
            op=fields.op,
            span=fields.span,
            offsets=fields.offsets,
            valid=fields.valid,
            weights=fields.weights,
            idx=fields.idx,
            speakers=speaker_arr,
        )

    @property
    def windows(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def rows(self) -> int:
        return 0 if self.idx is None else int(self.idx.shape[0])

    def tensors(self) -> dict[str, np.ndarray]:
        """The wire request for this block alone (what the exact lane sends)."""
        out = {
            ops.SPAN: self.span,
            ops.OFFSETS: self.offsets,
            ops.VALID: self.valid,
            ops.OP: np.array([int(self.op)], dtype=np.int32),
        }
        if self.op.is_voiceprint:
            assert self.weights is not None and self.idx is not None, "create() requires both for OP 1/2"
            out[ops.WEIGHTS] = self.weights
            out[ops.IDX] = self.idx
        return out

    def with_voiceprint(
        self, op: Op, weights: np.ndarray, idx: np.ndarray, speakers: np.ndarray, geometry: Geometry
    ) -> Block:
        """The OP 1/2 request of this block's audio, validated like any other block.

        The audio was validated when this block was created: only what is new (OP, WEIGHTS, IDX,
        speakers) and the cheap window checks are done again, not a second pass over SPAN."""
        if not isinstance(op, Op) or not op.is_voiceprint or self.op is not Op.SEGMENTATION:
            return Block.create(
                self.id, op, self.span, self.offsets, self.valid, geometry, BlockRows(weights, idx, speakers)
            )
        n = self.windows
        if n != geometry.windows_per_block:
            raise BlockError(
                self.id,
                "OFFSETS",
                f"{n} windows",
                f"a block holds exactly {geometry.windows_per_block} windows in this release",
            )
        _check_offsets(self.id, self.offsets, self.valid, int(self.span.shape[0]), geometry.window_samples)
        w, i = _check_voiceprint(self.id, op, weights, idx, n, geometry)
        return Block(
            self.id, op, self.span, self.offsets, self.valid, w, i, _check_speakers(self.id, speakers, i, geometry)
        )


# the wire request by its names (the model API): every value an array, but WEIGHTS and IDX None for OP 0;
# ``Any`` values, because the models read the fields of the OP they were asked for as Mapping[str, np.ndarray]
def check_request(tensors: Mapping[str, object], geometry: Geometry, where: str = "request") -> dict[str, Any]:
    """Validate a wire request (one block or a packed one): every rule but the window count; returns the
    request normalised, by its wire names."""
    unknown = sorted(set(tensors) - set(ops.INPUT_NAMES))
    if unknown:
        raise BlockError(where, unknown[0], "given", f"not an input of the contract {list(ops.INPUT_NAMES)}")
    for name in (ops.SPAN, ops.OFFSETS, ops.VALID, ops.OP):
        if name not in tensors:
            raise BlockError(where, name, None, "required input is missing")
    fields = check_fields(where, tensors, geometry)
    return {
        ops.SPAN: fields.span,
        ops.OFFSETS: fields.offsets,
        ops.VALID: fields.valid,
        ops.OP: np.array([int(fields.op)], dtype=np.int32),
        ops.WEIGHTS: fields.weights,
        ops.IDX: fields.idx,
    }


@dataclass(frozen=True, eq=False)
class CheckedFields:
    """Every contract field of one request, normalised and checked (WEIGHTS and IDX None for OP 0)."""

    span: np.ndarray
    offsets: np.ndarray
    valid: np.ndarray
    op: Op
    weights: np.ndarray | None
    idx: np.ndarray | None


def check_fields(owner: str, tensors: Mapping[str, object], geometry: Geometry) -> CheckedFields:
    """Normalise and check every contract field of one request; see Block.create. The request's tensors
    come by their wire names (the contract's inputs, ``ops.INPUT_NAMES``): what a model and a packer exchange."""
    span = _as_float(owner, ops.SPAN, tensors[ops.SPAN], rank=1)
    if span.shape[0] == 0:
        raise BlockError(owner, ops.SPAN, "length 0", "SPAN is empty")
    _require_finite(owner, ops.SPAN, span)
    op_arr = _as_int(owner, ops.OP, tensors[ops.OP], np.int32, rank=None).reshape(-1)
    if op_arr.shape[0] != 1:
        raise BlockError(owner, ops.OP, op_arr.tolist(), "OP must hold exactly one value")
    try:
        op = Op.parse(op_arr[0])
    except ValueError as exc:
        raise BlockError(owner, ops.OP, int(op_arr[0]), str(exc)) from None
    offsets = _as_int(owner, ops.OFFSETS, tensors[ops.OFFSETS], np.int64, rank=1)
    valid = _as_int(owner, ops.VALID, tensors[ops.VALID], np.int32, rank=1)
    n = offsets.shape[0]
    if n == 0:
        raise BlockError(owner, ops.OFFSETS, "0 windows", "a request needs at least one window")
    if valid.shape[0] != n:
        raise BlockError(owner, ops.VALID, f"{valid.shape[0]} values", f"must have one value per window ({n})")
    _check_offsets(owner, offsets, valid, span.shape[0], geometry.window_samples)

    weights, idx = _check_voiceprint(owner, op, tensors.get(ops.WEIGHTS), tensors.get(ops.IDX), n, geometry)
    return CheckedFields(span, offsets, valid, op, weights, idx)


def _check_voiceprint(
    owner: str, op: Op, weights_in: object, idx_in: object, n: int, geometry: Geometry
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """WEIGHTS and IDX of a request of ``n`` windows: none for OP 0, required and checked for OP 1/2."""
    if op is Op.SEGMENTATION:
        for name, value in ((ops.WEIGHTS, weights_in), (ops.IDX, idx_in)):
            if value is not None:
                raise BlockError(owner, name, "given", "OP 0 (segmentation) takes no WEIGHTS or IDX")
        return None, None
    for name, value in ((ops.WEIGHTS, weights_in), (ops.IDX, idx_in)):
        if value is None:
            raise BlockError(owner, name, None, f"OP {int(op)} (voiceprint) requires {name}")
    weights = _as_float(owner, ops.WEIGHTS, weights_in, rank=2)
    if weights.shape[1] != geometry.frames_per_window:
        raise BlockError(
            owner, ops.WEIGHTS, f"width {weights.shape[1]}", f"must be frames per window ({geometry.frames_per_window})"
        )
    _require_finite(owner, ops.WEIGHTS, weights)
    if weights.size and weights.min() < 0:
        r, f = (int(v) for v in np.argwhere(weights < 0)[0])
        raise BlockError(owner, f"WEIGHTS[{r},{f}]", float(weights[r, f]), "weights must be >= 0")
    idx = _as_int(owner, ops.IDX, idx_in, np.int32, rank=1)
    if idx.shape[0] != weights.shape[0]:
        raise BlockError(
            owner, ops.IDX, f"{idx.shape[0]} rows", f"must have one entry per WEIGHTS row ({weights.shape[0]})"
        )
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = np.flatnonzero((idx < 0) | (idx >= n))
        raise BlockError(owner, f"IDX[{bad[0]}]", int(idx[bad[0]]), f"window index out of range 0..{n - 1}")
    return weights, idx


def _check_speakers(
    owner: str, speakers: object | None, idx: np.ndarray | None, geometry: Geometry
) -> np.ndarray | None:
    """The local speaker of each voiceprint row (metadata, not a wire tensor)."""
    if speakers is None:
        return None
    if idx is None:
        raise BlockError(owner, "SPEAKERS", speakers, "speaker labels given without voiceprint rows")
    speaker_arr = _as_int(owner, "SPEAKERS", speakers, np.int32, rank=1)
    if speaker_arr.shape[0] != idx.shape[0]:
        raise BlockError(
            owner, "SPEAKERS", f"{speaker_arr.shape[0]} labels", f"must have one label per IDX row ({idx.shape[0]})"
        )
    if speaker_arr.size and (speaker_arr.min() < 0 or speaker_arr.max() >= geometry.speakers):
        bad = np.flatnonzero((speaker_arr < 0) | (speaker_arr >= geometry.speakers))
        raise BlockError(
            owner,
            f"SPEAKERS[{bad[0]}]",
            int(speaker_arr[bad[0]]),
            f"local speaker must be in 0..{geometry.speakers - 1}",
        )
    return speaker_arr


def _check_offsets(owner: str, offsets: np.ndarray, valid: np.ndarray, span_len: int, window: int) -> None:
    if offsets.size == 0 or (
        offsets[0] >= 0
        and bool((offsets[1:] >= offsets[:-1]).all())
        and offsets[-1] <= span_len
        and valid.min() >= 0
        and valid.max() <= window
        and (offsets + valid).max() <= span_len
    ):
        return  # the common case, in a few reductions; the first broken rule is named below
    checks = (
        (offsets < 0, ops.OFFSETS, offsets, "offset is negative"),
        (np.r_[False, np.diff(offsets) < 0], ops.OFFSETS, offsets, "offsets decrease"),
        (offsets > span_len, ops.OFFSETS, offsets, f"offset is past the end of SPAN (length {span_len})"),
        (valid < 0, ops.VALID, valid, "VALID is negative"),
        (valid > window, ops.VALID, valid, f"VALID exceeds the window ({window} samples)"),
        (
            offsets + valid > span_len,
            ops.VALID,
            valid,
            f"OFFSETS + VALID runs past the end of SPAN (length {span_len})",
        ),
    )
    for bad_mask, name, values, reason in checks:
        bad = np.flatnonzero(bad_mask)
        if bad.size:
            i = int(bad[0])
            detail = f" (offset {int(offsets[i])})" if name == ops.VALID and "OFFSETS" in reason else ""
            raise BlockError(owner, f"{name}[{i}]", int(values[i]), reason + detail)


def _as_array(owner: str, name: str, value: object) -> np.ndarray:
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise BlockError(owner, name, type(value).__name__, f"cannot be read as an array ({exc})") from None


def _check_rank(owner: str, name: str, arr: np.ndarray, rank: int | None) -> None:
    if rank is not None and arr.ndim != rank:
        raise BlockError(owner, name, f"shape {list(arr.shape)}", f"wrong rank: expected {rank}-D")


def _as_float(owner: str, name: str, value: object, rank: int) -> np.ndarray:
    arr = _as_array(owner, name, value)
    if arr.dtype.kind != "f":
        raise BlockError(owner, name, f"dtype {arr.dtype}", "wrong dtype: expected floating point (FP32)")
    _check_rank(owner, name, arr, rank)
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(arr, dtype=np.float32)


def _as_int(owner: str, name: str, value: object, dtype: type, rank: int | None) -> np.ndarray:
    arr = _as_array(owner, name, value)
    if arr.dtype.kind not in "iu":
        raise BlockError(owner, name, f"dtype {arr.dtype}", f"wrong dtype: expected integers ({np.dtype(dtype)})")
    _check_rank(owner, name, arr, rank)
    if arr.dtype == dtype:
        return np.ascontiguousarray(arr)
    info = np.iinfo(dtype)
    if arr.size and (arr.min() < info.min or arr.max() > info.max):
        raise BlockError(owner, name, int(arr.max()), f"does not fit {np.dtype(dtype)}")
    return np.ascontiguousarray(arr, dtype=dtype)


def _require_finite(owner: str, name: str, arr: np.ndarray) -> None:
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.add.reduce(arr, axis=None)):
            # a finite sum has no NaN or Inf in it (they survive any addition): one read-only pass, a
            # third cheaper than isfinite's; a sum that overflowed takes the exact check below
            return
    if not np.isfinite(arr).all():
        where = tuple(int(v) for v in np.argwhere(~np.isfinite(arr))[0])
        index = ",".join(str(v) for v in where)
        raise BlockError(owner, f"{name}[{index}]", float(arr[where]), "NaN or Inf is not audio/weight data")


def concat_spans(spans: Sequence[np.ndarray]) -> np.ndarray:
    """The concatenation of float32 spans; without a copy when they already lie end to end in one
    buffer (consecutive blocks read from one corpus row group do), else copied.

    A packed SPAN is large (k blocks of audio) and packing is the fast lane's main cost, so the copy
    is skipped whenever the bytes are already where the concatenation would put them."""
    view = _adjacent_view(spans)
    if view is not None:
        return view
    return np.concatenate(spans).astype(np.float32, copy=False)


def _adjacent_view(spans: Sequence[np.ndarray]) -> np.ndarray | None:
    """A view of the one buffer holding ``spans`` back to back, or None."""
    parts = [a for a in spans if a.shape[0]]
    if not parts or not all(a.dtype == np.float32 and a.ndim == 1 and a.flags.c_contiguous for a in parts):
        return None
    if len(parts) == 1:
        return parts[0]  # one block (and padding, which adds no audio)
    addresses = [a.ctypes.data for a in parts]  # where each buffer starts
    for a, start, nxt in zip(parts, addresses, addresses[1:], strict=False):
        if start + a.nbytes != nxt:
            return None
    root = parts[0]
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.dtype != np.float32 or not root.flags.c_contiguous:
        return None
    root = root.reshape(-1)  # a view: the buffer as one line of floats
    root_start = root.ctypes.data
    first, end = addresses[0], addresses[-1] + parts[-1].nbytes
    if first < root_start or end > root_start + root.nbytes:
        return None
    return root[(first - root_start) // 4 : (end - root_start) // 4]
