"""Arrow columns of the packer wire protocol: numpy arrays <-> list columns, dtypes checked exactly.

The codec's low level, kept apart from :mod:`harness.packers.wire` (the messages) so each stays
small: a list column per tensor, the layout as a list of structs, and readers that refuse any
type other than the contract's (never cast) and any null where the contract has none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal, overload

import numpy as np
import pyarrow as pa

from harness.packers.packer_errors import PackerAnswerError
from harness.packers.packing import Segment

SEGMENT_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("block_id", pa.string()),
    ("padding", pa.bool_()),
    ("span_start", pa.int64()),
    ("span_length", pa.int64()),
    ("window_start", pa.int64()),
    ("windows", pa.int64()),
    ("row_start", pa.int64()),
    ("rows", pa.int64()),
)
SEGMENT_TYPE = pa.struct([pa.field(n, t, nullable=False) for n, t in SEGMENT_FIELDS])


class WireError(PackerAnswerError):
    """A message that is framed correctly but does not follow the wire schema."""


def list_column(values: Sequence[np.ndarray | None], dtype: np.dtype, depth: int, width: int | None = None) -> pa.Array:
    """list<T> (depth 1) or list<fixed_size_list<T, F>> (depth 2: rows of [R, F] arrays); None -> null.

    A fixed-size inner list keeps F in the type, so a block with no rows still says its width;
    ``width`` is F when every row is null (OP 0's WEIGHTS: the geometry's F, not a guess).
    """
    dtype = np.dtype(dtype)
    arrow = pa.from_numpy_dtype(dtype)
    mask = np.array([v is None for v in values], dtype=bool)
    present = [np.asarray(v, dtype=dtype) for v in values if v is not None]
    lengths = np.array([0 if v is None else int(np.shape(v)[0]) for v in values], dtype=np.int64)
    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
    if depth == 1:
        flat = np.concatenate([v.reshape(-1) for v in present]) if present else np.zeros(0, dtype)
        inner = pa.array(flat, type=arrow)
    else:
        width = present[0].shape[1] if present else (width or 1)  # all null (OP 0): the geometry's F
        if any(v.ndim != 2 or v.shape[1] != width for v in present):
            raise ValueError(f"rows of one column must share a width, got {[v.shape for v in present]}")
        flat = np.concatenate([v.reshape(-1) for v in present]) if present else np.zeros(0, dtype)
        inner = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=arrow), width)
    return pa.ListArray.from_arrays(offsets, inner, mask=pa.array(mask) if mask.any() else None)


def segments_column(segments: Sequence[Segment]) -> pa.Array:
    struct = pa.StructArray.from_arrays(
        [pa.array([getattr(s, name) for s in segments], type) for name, type in SEGMENT_FIELDS],
        fields=list(SEGMENT_TYPE),
    )
    return pa.ListArray.from_arrays(pa.array([0, len(segments)], pa.int32()), struct)


def type_name(dtype: pa.DataType) -> str:
    """An Arrow type as the docs write it: list<int32>, list<fixed_size_list<float, 5>> (no child field names)."""
    if pa.types.is_fixed_size_list(dtype):
        return f"fixed_size_list<{type_name(dtype.value_type)}, {dtype.list_size}>"
    if pa.types.is_large_list(dtype):
        return f"large_list<{type_name(dtype.value_type)}>"
    if pa.types.is_list(dtype):
        return f"list<{type_name(dtype.value_type)}>"
    return str(dtype)


def column(t: pa.Table, name: str) -> pa.Array:
    if name not in t.column_names:
        raise WireError(f"column {name!r} is missing (has {t.column_names})")
    return t.column(name).combine_chunks()


def is_list(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_list(dtype) or pa.types.is_large_list(dtype))


def list_value_dtype(t: pa.Table, name: str, allowed: Sequence[np.dtype]) -> np.dtype:
    col = column(t, name)
    if not is_list(col.type) or not any(col.type.value_type == pa.from_numpy_dtype(a) for a in allowed):
        want = " or ".join(f"list<{pa.from_numpy_dtype(a)}>" for a in allowed)
        raise WireError(f"column {name!r} has type {type_name(col.type)}, expected {want}")
    found: np.dtype = np.dtype(col.type.value_type.to_pandas_dtype())
    return found


@overload
def read_lists(t: pa.Table, name: str, dtype: np.dtype, depth: int, nullable: Literal[False]) -> list[np.ndarray]: ...


@overload
def read_lists(t: pa.Table, name: str, dtype: np.dtype, depth: int, nullable: bool) -> list[np.ndarray | None]: ...


def read_lists(
    t: pa.Table, name: str, dtype: np.dtype, depth: int, nullable: bool
) -> list[np.ndarray] | list[np.ndarray | None]:
    """Each row of a list column as a numpy array of exactly ``dtype`` ([R, F] for depth 2), None for a null."""
    col = column(t, name)
    arrow = pa.from_numpy_dtype(dtype)
    inner_type = col.type.value_type if is_list(col.type) else None
    if depth == 1:
        ok = inner_type == arrow
        want = f"list<{arrow}>"
    else:
        ok = inner_type is not None and pa.types.is_fixed_size_list(inner_type) and inner_type.value_type == arrow
        want = f"list<fixed_size_list<{arrow}, F>>"
    if not ok:
        raise WireError(f"column {name!r} has type {type_name(col.type)}, expected {want}")
    out: list[np.ndarray | None] = []
    for i in range(len(col)):
        if not col[i].is_valid:
            if not nullable:
                raise WireError(f"column {name!r} row {i} is null")
            out.append(None)
            continue
        values = col[i].values
        if depth == 1:
            out.append(numpy_values(values, dtype, name))
            continue
        if values.null_count:
            raise WireError(f"column {name!r} row {i} holds null rows")
        assert inner_type is not None  # (ok above: a fixed_size_list)
        width = inner_type.list_size
        out.append(numpy_values(values.flatten(), dtype, name).reshape(len(values), width))
    return out


def numpy_values(values: pa.Array, dtype: np.dtype, name: str) -> np.ndarray:
    if values.null_count:
        raise WireError(f"column {name!r} holds null values")
    out: np.ndarray = np.ascontiguousarray(values.to_numpy(zero_copy_only=False), dtype=dtype)
    return out


def ints(t: pa.Table, name: str, dtype: type) -> np.ndarray:
    col = column(t, name)
    if col.type != pa.from_numpy_dtype(np.dtype(dtype)) or col.null_count:
        raise WireError(
            f"column {name!r} has type {type_name(col.type)}{' with nulls' if col.null_count else ''}, "
            f"expected non-null {pa.from_numpy_dtype(np.dtype(dtype))}"
        )
    values: np.ndarray = col.to_numpy(zero_copy_only=False)
    return values


def strings(t: pa.Table, name: str) -> list[str]:
    col = column(t, name)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) or col.null_count:
        raise WireError(f"column {name!r} has type {type_name(col.type)}, expected non-null utf8 strings")
    return [str(v) for v in col.to_pylist()]


def read_segments(t: pa.Table) -> list[tuple[Segment, ...]]:
    col = column(t, "segments")
    if not is_list(col.type) or not pa.types.is_struct(col.type.value_type):
        raise WireError(f"column 'segments' has type {type_name(col.type)}, expected list<{SEGMENT_TYPE}>")
    struct_type = col.type.value_type
    names = [struct_type.field(i).name for i in range(struct_type.num_fields)]
    for name, type in SEGMENT_FIELDS:
        if name not in names:
            raise WireError(f"column 'segments' lacks field {name!r} (has {names})")
        if struct_type.field(name).type != type:
            raise WireError(f"segments field {name!r} has type {struct_type.field(name).type}, expected {type}")
    entries = segment_entries(col.values)
    starts = col.offsets.to_pylist()
    out = []
    for i in range(len(col)):
        if not col[i].is_valid:
            raise WireError(f"column 'segments' row {i} is null")
        segs = []
        for j, k in enumerate(range(starts[i], starts[i + 1])):
            seg = entries[k]
            if seg is None:
                raise WireError(f"segments row {i} entry {j} has nulls: {col.values[k].as_py()}")
            segs.append(seg)
        out.append(tuple(segs))
    return out


def segment_entries(entries: pa.StructArray) -> list[Segment | None]:
    """Every entry of a segments struct array as a :class:`Segment`, None where the entry or one of the
    :data:`SEGMENT_FIELDS` is null. Read column by column, each struct field found by its wire name (fields
    not in the contract are ignored); the field types are the caller's to have checked."""
    children = dict(zip([f.name for f in entries.type], entries.flatten(), strict=True))
    fields = [children[f.name].to_pylist() for f in dataclasses.fields(Segment)]  # in the dataclass's order
    valid = entries.is_valid().to_pylist()
    return [
        Segment(*values) if ok and all(v is not None for v in values) else None
        for ok, values in zip(valid, zip(*fields, strict=True), strict=True)
    ]


def reshape(data: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != data.shape[0]:
        raise WireError(f"{where}: shape {list(shape)} does not hold {data.shape[0]} values")
    return data.reshape(shape)
