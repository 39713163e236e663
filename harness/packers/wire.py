"""The packer wire format (version 1): blocks in, a packed request out, as Arrow IPC streams.

A language-neutral protocol so the engine's own packer (Rust, arrow-rs) can be judged by the
packing laws and used by the fast lane. docs/packer-protocol.md is the reference for
implementers; this module is the harness's side of it, and both sides of the codec (so a
Python packer can be served over the wire too, see :mod:`harness.packers.serve`).

Framing: every message is one complete Arrow IPC *stream* (schema, record batches,
end-of-stream marker), written back to back on the packer's stdin (requests) and stdout
(answers). The schema metadata says what the message is: ``verb`` (``pack``, ``packed``,
``unpack``, ``unpacked``, ``error``) and ``version`` (``1``). Column names are DESIGN.md's wire
names (SPAN, OFFSETS, VALID, OP, WEIGHTS, IDX) plus the layout; dtypes are the contract's,
checked exactly on read (a list of float64 where SPAN must be float32 is refused, not cast).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from harness.blocks import Block
from harness.ops import Op
from harness.packers.errors import PackerAnswerError
from harness.packers.validate import BATCH_INPUT_NAMES
from harness.packing import PackedRequest, Segment

VERSION = "1"
PACK, PACKED, UNPACK, UNPACKED, ERROR = "pack", "packed", "unpack", "unpacked", "error"
VERBS = (PACK, PACKED, UNPACK, UNPACKED, ERROR)

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

# Tensor columns: (name, element dtype, nesting). WEIGHTS [R, F] is list<fixed_size_list<float32, F>>.
TENSORS: tuple[tuple[str, np.dtype, int], ...] = (
    ("SPAN", np.dtype(np.float32), 1),
    ("OFFSETS", np.dtype(np.int64), 1),
    ("VALID", np.dtype(np.int32), 1),
    ("WEIGHTS", np.dtype(np.float32), 2),
    ("IDX", np.dtype(np.int32), 1),
    ("speakers", np.dtype(np.int32), 1),
)
OUTPUT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


class WireError(PackerAnswerError):
    """A message that is framed correctly but does not follow the wire schema."""


@dataclass(frozen=True)
class Message:
    """One decoded message: its verb, its schema metadata (str -> str) and its table."""

    verb: str
    meta: dict[str, str]
    table: pa.Table


# ------------------------------------------------------------------ framing


def encode(verb: str, table: pa.Table | None = None, **meta: object) -> bytes:
    """One message as the bytes of one Arrow IPC stream (``table`` None: a schema with no columns)."""
    if verb not in VERBS:
        raise ValueError(f"unknown verb {verb!r}")
    table = pa.table({}) if table is None else table
    metadata = {"verb": verb, "version": VERSION, **{k: str(v) for k, v in meta.items() if v is not None}}
    table = table.replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        if table.num_columns:
            writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_message(source: BinaryIO | bytes, expect: Sequence[str] = VERBS) -> Message:
    """Read one message (one IPC stream) from ``source``; raise WireError if it is not one of ``expect``."""
    reader = pa.ipc.open_stream(source)
    table = reader.read_all()
    raw = table.schema.metadata or {}
    meta = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in raw.items()}
    verb = meta.get("verb")
    if meta.get("version") != VERSION:
        raise WireError(f"message has wire version {meta.get('version')!r}, expected {VERSION!r} "
                        "(schema metadata 'version')")
    if verb not in expect:
        raise WireError(f"message verb {verb!r}, expected {' or '.join(expect)} (schema metadata 'verb')")
    return Message(verb, meta, table)


# ------------------------------------------------------------------ pack: harness -> packer


def encode_pack(items: Sequence[Block], pad_to: int | None) -> bytes:
    """The ``pack`` request: one row per block, in pack order."""
    cols: dict[str, pa.Array] = {
        "block_id": pa.array([b.id for b in items], pa.string()),
        "OP": pa.array([int(b.op) for b in items], pa.int32()),
    }
    for name, dtype, depth in TENSORS:
        attr = name.lower()
        cols[name] = _list_column([getattr(b, attr) for b in items], dtype, depth)
    return encode(PACK, pa.table(cols), pad_to=pad_to)


def decode_pack(message: Message) -> tuple[list[Block], int | None]:
    """The blocks and ``pad_to`` of a ``pack`` request (for packers written in Python)."""
    t = message.table
    ids = _strings(t, "block_id")
    ops = _ints(t, "OP", np.int32)
    columns = {name: _read_lists(t, name, dtype, depth, nullable=name in ("WEIGHTS", "IDX", "speakers"))
               for name, dtype, depth in TENSORS}
    blocks = []
    for i, block_id in enumerate(ids):
        try:
            op = Op.parse(int(ops[i]))
        except ValueError as exc:
            raise WireError(f"pack row {i} ({block_id!r}): {exc}") from None
        blocks.append(Block(id=block_id, op=op, span=columns["SPAN"][i], offsets=columns["OFFSETS"][i],
                            valid=columns["VALID"][i], weights=columns["WEIGHTS"][i], idx=columns["IDX"][i],
                            speakers=columns["speakers"][i]))
    pad_to = message.meta.get("pad_to")
    return blocks, None if pad_to in (None, "") else int(pad_to)


# ------------------------------------------------------------------ packed: packer -> harness


def encode_packed(packed: PackedRequest) -> bytes:
    """The ``packed`` answer: one row holding the request's tensors and its layout."""
    cols: dict[str, pa.Array] = {"OP": pa.array([int(packed.op)], pa.int32())}
    for name, dtype, depth in TENSORS:
        cols[name] = _list_column([getattr(packed, name.lower())], dtype, depth)
    cols["segments"] = _segments_column(packed.segments)
    for name, value in (packed.batch_inputs or {}).items():
        cols[name] = _list_column([np.asarray(value).reshape(-1)], np.asarray(value).dtype, 1)
    return encode(PACKED, pa.table(cols))


def decode_packed(message: Message) -> PackedRequest:
    """The packed request of a ``packed`` answer (types checked; content is checked by validate)."""
    t = message.table
    if t.num_rows != 1:
        raise WireError(f"a packed answer has exactly one row, this one has {t.num_rows}")
    op_value = int(_ints(t, "OP", np.int32)[0])
    try:
        op = Op.parse(op_value)
    except ValueError as exc:
        raise WireError(f"packed answer: {exc}") from None
    tensors = {name: _read_lists(t, name, dtype, depth, nullable=name in ("WEIGHTS", "IDX", "speakers"))[0]
               for name, dtype, depth in TENSORS}
    segments = _read_segments(t)[0]
    batch = {}
    for name in BATCH_INPUT_NAMES:
        if name in t.column_names:
            dtype = _list_value_dtype(t, name, (np.dtype(np.int32), np.dtype(np.int64)))
            batch[name] = _read_lists(t, name, dtype, 1, nullable=False)[0]
    if "BATCH_ITEM_SHAPE" in batch:
        batch["BATCH_ITEM_SHAPE"] = batch["BATCH_ITEM_SHAPE"].reshape(-1, 1)  # SPAN items are rank 1
    unknown = sorted(set(t.column_names) - {"OP", "segments", *(n for n, _, _ in TENSORS), *BATCH_INPUT_NAMES})
    if unknown:
        raise WireError(f"packed answer has unknown column(s) {unknown}")
    return PackedRequest(op, tensors["SPAN"], tensors["OFFSETS"], tensors["VALID"], tensors["WEIGHTS"], tensors["IDX"],
                         tensors["speakers"], segments, batch or None)


# ------------------------------------------------------------------ unpack: harness -> packer


def encode_unpack(packed: PackedRequest, output_name: str, output: np.ndarray) -> bytes:
    """The ``unpack`` request: the request's OP and layout, and the network's output (flat + shape)."""
    if output.dtype not in OUTPUT_DTYPES:
        raise PackerAnswerError(f"output {output_name} has dtype {output.dtype}: the wire carries float32 or float64")
    table = pa.table({
        "OP": pa.array([int(packed.op)], pa.int32()),
        "segments": _segments_column(packed.segments),
        "data": _list_column([np.ascontiguousarray(output).reshape(-1)], output.dtype, 1),
        "shape": _list_column([np.array(output.shape, np.int64)], np.dtype(np.int64), 1),
    })
    return encode(UNPACK, table, output=output_name)


def decode_unpack(message: Message) -> tuple[Op, tuple[Segment, ...], str, np.ndarray]:
    """OP, layout, output name and output tensor of an ``unpack`` request."""
    t = message.table
    op = Op.parse(int(_ints(t, "OP", np.int32)[0]))
    segments = _read_segments(t)[0]
    dtype = _list_value_dtype(t, "data", OUTPUT_DTYPES)
    data = _read_lists(t, "data", dtype, 1, nullable=False)[0]
    shape = tuple(int(v) for v in _read_lists(t, "shape", np.dtype(np.int64), 1, nullable=False)[0])
    return op, segments, message.meta.get("output", op.output_name), _reshape(data, shape, "unpack")


# ------------------------------------------------------------------ unpacked: packer -> harness


def encode_unpacked(block_ids: Sequence[str], parts: Sequence[np.ndarray]) -> bytes:
    """The ``unpacked`` answer: one row per real block, in pack order (flat data + shape)."""
    dtype = parts[0].dtype if parts else np.dtype(np.float32)
    table = pa.table({
        "block_id": pa.array(list(block_ids), pa.string()),
        "data": _list_column([np.ascontiguousarray(p).reshape(-1) for p in parts], dtype, 1),
        "shape": _list_column([np.array(p.shape, np.int64) for p in parts], np.dtype(np.int64), 1),
    })
    return encode(UNPACKED, table)


def decode_unpacked(message: Message, dtype: np.dtype) -> tuple[list[str], list[np.ndarray]]:
    """Block ids and per-block arrays of an ``unpacked`` answer (``dtype``: the output's, checked)."""
    t = message.table
    if t.num_columns == 0:
        return [], []
    ids = _strings(t, "block_id")
    _list_value_dtype(t, "data", (np.dtype(dtype),))
    data = _read_lists(t, "data", np.dtype(dtype), 1, nullable=False)
    shapes = _read_lists(t, "shape", np.dtype(np.int64), 1, nullable=False)
    parts = [_reshape(d, tuple(int(v) for v in s), f"unpacked block {i!r}") for i, d, s in zip(ids, data, shapes,
                                                                                                strict=True)]
    return ids, parts


# ------------------------------------------------------------------ error: packer -> harness


def encode_error(text: str) -> bytes:
    """The ``error`` answer: the packer declines; ``message`` says why (one line)."""
    return encode(ERROR, None, message=" ".join(text.split()))


def error_text(message: Message) -> str:
    return message.meta.get("message", "(no message)")


# ------------------------------------------------------------------ helpers


def _list_column(values: Sequence[np.ndarray | None], dtype: np.dtype, depth: int) -> pa.Array:
    """list<T> (depth 1) or list<fixed_size_list<T, F>> (depth 2: rows of [R, F] arrays); None -> null.

    A fixed-size inner list keeps F in the type, so a block with no rows still says its width.
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
        width = present[0].shape[1] if present else 1  # all null (OP 0): any width will do
        if any(v.ndim != 2 or v.shape[1] != width for v in present):
            raise ValueError(f"rows of one column must share a width, got {[v.shape for v in present]}")
        flat = np.concatenate([v.reshape(-1) for v in present]) if present else np.zeros(0, dtype)
        inner = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=arrow), width)
    return pa.ListArray.from_arrays(offsets, inner, mask=pa.array(mask) if mask.any() else None)


def _segments_column(segments: Sequence[Segment]) -> pa.Array:
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


def _column(t: pa.Table, name: str) -> pa.Array:
    if name not in t.column_names:
        raise WireError(f"column {name!r} is missing (has {t.column_names})")
    return t.column(name).combine_chunks()


def _is_list(dtype: pa.DataType) -> bool:
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype)


def _list_value_dtype(t: pa.Table, name: str, allowed: Sequence[np.dtype]) -> np.dtype:
    col = _column(t, name)
    if not _is_list(col.type) or not any(col.type.value_type == pa.from_numpy_dtype(a) for a in allowed):
        want = " or ".join(f"list<{pa.from_numpy_dtype(a)}>" for a in allowed)
        raise WireError(f"column {name!r} has type {type_name(col.type)}, expected {want}")
    return np.dtype(col.type.value_type.to_pandas_dtype())


def _read_lists(t: pa.Table, name: str, dtype: np.dtype, depth: int, nullable: bool) -> list[np.ndarray | None]:
    """Each row of a list column as a numpy array of exactly ``dtype`` ([R, F] for depth 2), None for a null."""
    col = _column(t, name)
    arrow = pa.from_numpy_dtype(dtype)
    inner_type = col.type.value_type if _is_list(col.type) else None
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
            out.append(_numpy(values, dtype, name))
            continue
        if values.null_count:
            raise WireError(f"column {name!r} row {i} holds null rows")
        width = inner_type.list_size
        out.append(_numpy(values.flatten(), dtype, name).reshape(len(values), width))
    return out


def _numpy(values: pa.Array, dtype: np.dtype, name: str) -> np.ndarray:
    if values.null_count:
        raise WireError(f"column {name!r} holds null values")
    return np.ascontiguousarray(values.to_numpy(zero_copy_only=False), dtype=dtype)


def _ints(t: pa.Table, name: str, dtype: type) -> np.ndarray:
    col = _column(t, name)
    if col.type != pa.from_numpy_dtype(np.dtype(dtype)) or col.null_count:
        raise WireError(f"column {name!r} has type {type_name(col.type)}{' with nulls' if col.null_count else ''}, "
                        f"expected non-null {pa.from_numpy_dtype(np.dtype(dtype))}")
    return col.to_numpy(zero_copy_only=False)


def _strings(t: pa.Table, name: str) -> list[str]:
    col = _column(t, name)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)) or col.null_count:
        raise WireError(f"column {name!r} has type {type_name(col.type)}, expected non-null utf8 strings")
    return [str(v) for v in col.to_pylist()]


def _read_segments(t: pa.Table) -> list[tuple[Segment, ...]]:
    col = _column(t, "segments")
    if not _is_list(col.type) or not pa.types.is_struct(col.type.value_type):
        raise WireError(f"column 'segments' has type {type_name(col.type)}, expected list<{SEGMENT_TYPE}>")
    struct_type = col.type.value_type
    names = [struct_type.field(i).name for i in range(struct_type.num_fields)]
    for name, type in SEGMENT_FIELDS:
        if name not in names:
            raise WireError(f"column 'segments' lacks field {name!r} (has {names})")
        if struct_type.field(name).type != type:
            raise WireError(f"segments field {name!r} has type {struct_type.field(name).type}, expected {type}")
    out = []
    for i in range(len(col)):
        if not col[i].is_valid:
            raise WireError(f"column 'segments' row {i} is null")
        rows = col[i].values.to_pylist()
        segs = []
        for j, row in enumerate(rows):
            if row is None or any(row.get(name) is None for name, _ in SEGMENT_FIELDS):
                raise WireError(f"segments row {i} entry {j} has nulls: {row}")
            segs.append(Segment(str(row["block_id"]), int(row["span_start"]), int(row["span_length"]),
                                int(row["window_start"]), int(row["windows"]), int(row["row_start"]),
                                int(row["rows"]), bool(row["padding"])))
        out.append(tuple(segs))
    return out


def _reshape(data: np.ndarray, shape: tuple[int, ...], where: str) -> np.ndarray:
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != data.shape[0]:
        raise WireError(f"{where}: shape {list(shape)} does not hold {data.shape[0]} values")
    return data.reshape(shape)
