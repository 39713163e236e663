"""Arrow arrays from numpy arrays and Python lists, without pyarrow's pandas probe.

``pa.array`` asks its pandas shim about every numpy or list input (a Series? a Categorical?), and
the first question imports pandas: 1.2-1.8 s of one core and 60 MB in every command that writes a
Parquet file, spent while the lanes run (the writers are background threads sharing the GIL with
them), for a library the harness never uses. These build the same arrays from their buffers
(``pa.Array.from_buffers``): the same values and validity, so the same Parquet bytes (a test
compares them with ``pa.array``'s). An input they do not cover (another type, a value out of the
type's range, a string that is not UTF-8) goes to ``pa.array`` as before, with its errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from harness.data.parquet import items

_NUMPY: dict[pa.DataType, type[np.generic]] = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}
_INT32_MAX = 2**31 - 1


def numeric(values: np.ndarray | Sequence[Any], kind: pa.DataType) -> pa.Array:
    """A primitive array of ``kind``: a numpy array of exactly its dtype (no copy when contiguous), or
    a list of Python numbers and None (None: null)."""
    dtype = _NUMPY.get(kind)
    if dtype is None:
        return pa.array(values, kind)
    validity = None
    nulls = 0
    if isinstance(values, np.ndarray):
        if values.dtype != dtype or values.ndim != 1:
            return pa.array(values, kind)  # a cast: pyarrow's checks (range, safety) decide
        data = np.ascontiguousarray(values)
    else:
        mask = [v is None for v in values]
        nulls = sum(mask)
        if any(
            isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number))
            for v, m in zip(values, mask, strict=True)
            if not m
        ):
            return pa.array(values, kind)
        try:
            with np.errstate(all="raise"):
                data = np.array([0 if m else v for v, m in zip(values, mask, strict=True)], dtype=dtype)
        except (OverflowError, TypeError, ValueError, FloatingPointError):
            return pa.array(values, kind)
        if np.issubdtype(dtype, np.integer) and any(isinstance(v, float) for v in values):
            return pa.array(values, kind)  # a float for an int column: pyarrow says whether it truncates
        if nulls:
            validity = pa.py_buffer(np.packbits(~np.asarray(mask, dtype=bool), bitorder="little"))
    return pa.Array.from_buffers(kind, len(data), [validity, pa.py_buffer(data)], null_count=nulls)


def strings(values: Sequence[str] | np.ndarray, kind: pa.DataType = pa.string()) -> pa.Array:
    """A ``string`` array of Python strings (no nulls)."""
    items = values.tolist() if isinstance(values, np.ndarray) else values
    if kind != pa.string() or not all(isinstance(v, str) for v in items):
        return pa.array(items, kind)
    try:
        encoded = [v.encode("utf-8") for v in items]
    except UnicodeEncodeError:
        return pa.array(items, kind)  # a lone surrogate: pyarrow's own error
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        return pa.array(items, kind)
    return pa.Array.from_buffers(
        kind, len(encoded), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    )


def string_lists(values: Sequence[Sequence[str]], kind: pa.DataType = pa.list_(pa.string())) -> pa.Array:
    """A ``list<string>`` array of lists of Python strings (no nulls)."""
    if kind != pa.list_(pa.string()):
        return pa.array(values, kind)
    lengths = [len(v) for v in values]
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _INT32_MAX:
        return pa.array(values, kind)
    flat = strings([s for v in values for s in v])
    return pa.ListArray.from_arrays(numeric(offsets.astype(np.int32), pa.int32()), flat, type=kind)


def fixed_lists(flat: np.ndarray, size: int, kind: pa.DataType) -> pa.Array:
    """A fixed-size list array of ``size`` values of ``kind`` each, from their flat numpy array."""
    values = numeric(np.ascontiguousarray(flat).reshape(-1), kind)
    return pa.FixedSizeListArray.from_arrays(values, type=pa.list_(items(kind), size))


def column(values: Any, kind: pa.DataType) -> pa.Array:
    """One column of ``kind`` from a list or numpy array (an Arrow array is kept as it is)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if kind == pa.string():
        return strings(values)
    if kind == pa.list_(pa.string()):
        return string_lists(values)
    if kind == pa.bool_():
        return booleans(values)
    return numeric(values, kind)


def booleans(values: Sequence[Any] | np.ndarray) -> pa.Array:
    """A ``bool`` array of Python or numpy booleans (no nulls: anything else goes to ``pa.array``)."""
    items = values.tolist() if isinstance(values, np.ndarray) else values
    if not all(isinstance(v, (bool, np.bool_)) for v in items):
        return pa.array(items, pa.bool_())
    bits = np.packbits(np.asarray(items, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(items), [None, pa.py_buffer(bits)])


def table(data: Mapping[str, Any], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pydict(data, schema=schema)``, each column built by :func:`column`."""
    return pa.Table.from_pydict({f.name: column(data[f.name], f.type) for f in schema}, schema=schema)
