"""Reading a capture file: checked up front (metadata, columns, types), then row group by row group.

Memory is bounded by a row group (two when reading ahead); every failure is one :class:`CaptureError`
line naming the file, the row (and request id) and the column. What the rows *mean* (do they obey the packing laws?) is
not judged here: :mod:`harness.capture.capture_laws` does that.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from harness.base.overlap import prefetch
from harness.capture.schema import (
    COLUMNS,
    LISTS,
    META_KEY,
    NULLABLE,
    OTHER_KINDS,
    STRINGS,
    CapturedRequest,
    CaptureError,
    CaptureMeta,
)
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.parquet import open_file, read_row_group, schema_metadata
from harness.data.schemas import validate
from harness.packers.columns import segment_entries
from harness.packers.packing import PackedRequest
from harness.packers.wire import SEGMENT_FIELDS, type_name


class CaptureReader:
    """A capture file, checked up front (metadata, columns, types), read row group by row group."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.file = open_file(self.path, "capture file", CaptureError)
        raw = schema_metadata(self.file, META_KEY, self.path, "capture", CaptureError)
        if raw is None:
            keys = set(self.file.schema_arrow.metadata or {})
            other = next((what for key, what in OTHER_KINDS.items() if key in keys), None)
            raise CaptureError(
                f"{self.path}: not a capture: no {META_KEY.decode()!r} metadata"
                + (f" (it is {other})" if other else "")
                + " (see docs/audit.md)"
            )
        self.meta = validate(CaptureMeta, raw, f"{self.path}: metadata {META_KEY.decode()!r}", CaptureError)
        try:
            self.geometry = Geometry(**self.meta.geometry.model_dump())
        except ValueError as exc:
            raise CaptureError(f"{self.path}: metadata {META_KEY.decode()!r}: geometry: {exc}") from None
        self._check_columns()
        if self.file.metadata.num_rows == 0:
            raise CaptureError(f"{self.path}: capture holds no requests")

    def __len__(self) -> int:
        return int(self.file.metadata.num_rows)

    def _check_columns(self) -> None:
        schema = self.file.schema_arrow
        for name in COLUMNS:
            if name not in schema.names:
                raise CaptureError(f"{self.path}: not a capture: missing column {name!r} (see docs/audit.md)")
            got = schema.field(name).type
            if not _type_ok(name, got, self.geometry.frames_per_window):
                raise CaptureError(
                    f"{self.path}: column {name!r} has type {type_name(got)}, expected "
                    f"{_expected(name, self.geometry.frames_per_window)}"
                )

    def requests(self, rows: range | None = None, ahead: bool = False) -> Generator[CapturedRequest, None, None]:
        """Every request in file order (or those of file ``rows``: a shard's, the row groups outside it
        not even read); refuses the first unreadable row (one line naming it).

        ``ahead``: the next row group is read and decoded in a thread while the caller works on this one
        (:func:`harness.base.overlap.prefetch`, one group ahead: a capture's row group is mostly SPAN audio,
        whose decoding releases the GIL). The requests, their order and the first refusal are the same."""
        if not ahead:
            seen: set[str] = set()  # a request id twice in one pass is refused
            for start, table in self._tables(rows):
                yield from _rows(table, self.geometry, str(self.path), start, seen)
            return
        for items, error in prefetch(self._groups(rows), name="capture-reader"):
            yield from items
            if error is not None:
                raise error

    def _tables(self, rows: range | None) -> Iterator[tuple[int, pa.Table]]:
        """(first file row, table) of each row group holding rows of ``rows``, sliced to them."""
        want = range(len(self)) if rows is None else rows
        row = 0
        for i in range(self.file.metadata.num_row_groups):
            size = self.file.metadata.row_group(i).num_rows
            start, stop = max(want.start, row), min(want.stop, row + size)
            if start < stop:
                table = read_row_group(self.file, i, self.path, "capture", CaptureError, columns=list(COLUMNS))
                yield start, table.slice(start - row, stop - start)
            row += size

    def _groups(self, rows: range | None) -> Iterator[tuple[list[CapturedRequest], CaptureError | None]]:
        """Each row group's requests, and the refusal that stopped it (the requests before it still count)."""
        seen: set[str] = set()
        got: list[CapturedRequest] = []
        try:
            for start, table in self._tables(rows):
                for request in _rows(table, self.geometry, str(self.path), start, seen):
                    got.append(request)
                yield got, None
                got = []
        except CaptureError as exc:
            yield got, exc

    def block_counts(self) -> np.ndarray:
        """The real (non-padding) blocks of every request, in file order, from the layout column alone:
        what cutting a capture in shards of even cost needs, without reading its tensors."""
        counts = []
        for i in range(self.file.metadata.num_row_groups):  # the capture file's "segments" column
            column = (
                read_row_group(self.file, i, self.path, "capture", CaptureError, columns=["segments"])
                .column("segments")
                .combine_chunks()
            )
            real = ~column.values.field("padding").to_numpy(zero_copy_only=False).astype(bool)
            ends = np.concatenate([[0], np.cumsum(real, dtype=np.int64)])
            offsets = column.offsets.to_numpy()
            counts.append(ends[offsets[1:]] - ends[offsets[:-1]])
        return np.concatenate(counts) if counts else np.zeros(0, np.int64)


def _type_ok(name: str, got: pa.DataType, frames: int) -> bool:
    is_list = bool(pa.types.is_list(got) or pa.types.is_large_list(got))
    if name in STRINGS:
        return bool(pa.types.is_string(got) or pa.types.is_large_string(got))
    if name == "captured_at":
        return bool(pa.types.is_timestamp(got) and got.tz is not None)
    if name == "OP":
        return bool(got == pa.int32())
    if name == "WEIGHTS":
        inner = got.value_type if is_list else None
        return bool(
            inner is not None
            and pa.types.is_fixed_size_list(inner)
            and inner.list_size == frames
            and inner.value_type == pa.float32()
        )
    if name == "segments":
        if not is_list or not pa.types.is_struct(got.value_type):
            return False
        struct = got.value_type
        names = [struct.field(i).name for i in range(struct.num_fields)]
        return all(n in names and struct.field(n).type == t for n, t in SEGMENT_FIELDS)
    return is_list and bool(got.value_type == LISTS[name])


def _expected(name: str, frames: int) -> str:
    if name in STRINGS:
        return "string"
    if name == "captured_at":
        return "timestamp with a time zone (UTC)"
    if name == "OP":
        return "int32"
    if name == "WEIGHTS":
        return f"list<fixed_size_list<float, {frames}>> (F = the geometry's frames_per_window)"
    if name == "segments":
        return "list<struct<" + ", ".join(f"{n}: {t}" for n, t in SEGMENT_FIELDS) + ">>"
    return f"list<{LISTS[name]}>"


def _rows(table: pa.Table, g: Geometry, where: str, first: int, seen: set[str]) -> Iterator[CapturedRequest]:
    """The capture file's rows as requests: its columns and its segments' struct fields are read by their names
    here, at the file's boundary (harness.capture.schema), and typed at once."""
    ids = _plain(table, "request_id", where, first)
    names = [f"row {first + j} (request {ids[j]!r})" for j in range(len(ids))]
    stamps = table.column("captured_at").cast(pa.timestamp("us", tz="UTC"), safe=False)
    times = [
        t.astimezone(dt.UTC).isoformat(timespec="microseconds") if t is not None else None for t in stamps.to_pylist()
    ]
    # each column read once, in the order a null is refused in (STRINGS, then OP; then LISTS)
    versions, fingerprints, devices, ops = (_plain(table, n, where, first, names) for n in (*STRINGS[1:], "OP"))
    lists = {name: _Lists(table, name, where, names) for name in LISTS}  # SPAN, ..., output_shape
    span, offsets, valid, idx, speakers, output, output_shape = lists.values()  # LISTS' order
    weights = _Lists(table, "WEIGHTS", where, names, width=g.frames_per_window)
    column = table.column("segments").combine_chunks()
    entries, starts = segment_entries(column.values), column.offsets.to_pylist()
    no_layout = column.is_null().to_pylist()
    for j, request_id in enumerate(ids):
        name = names[j]
        if request_id in seen:
            raise CaptureError(f"{where}: {name}: request id appears twice")
        seen.add(request_id)
        stamp = times[j]
        if stamp is None or no_layout[j]:
            raise CaptureError(f"{where}: {name}: null {'captured_at' if stamp is None else 'segments'}")
        try:
            op = Op.parse(int(ops[j]))
        except ValueError as exc:
            raise CaptureError(f"{where}: {name}: {exc}") from None
        segs = []
        for k in range(starts[j], starts[j + 1]):
            seg = entries[k]
            if seg is None:
                raise CaptureError(f"{where}: {name}: a segments entry has nulls: {column.values[k].as_py()}")
            segs.append(seg)
        packed = PackedRequest(
            op,
            span.value(j),
            offsets.value(j),
            valid.value(j),
            weights.row(j),
            idx.row(j),
            speakers.row(j),
            tuple(segs),
        )
        served = _output(output.value(j), output_shape.value(j), packed, g, f"{where}: {name}")
        yield CapturedRequest(request_id, packed, served, fingerprints[j], devices[j], versions[j], stamp, first + j)


def _plain(table: pa.Table, name: str, where: str, first: int, names: list[str] | None = None) -> list[Any]:
    values: list[Any] = table.column(name).to_pylist()
    for j, v in enumerate(values):
        if v is None:
            raise CaptureError(f"{where}: {names[j] if names else f'row {first + j}'}: null {name}")
    return values


class _Lists:
    """One list column of a row group as flat numpy values + offsets: each row a view, no per-row Arrow call."""

    def __init__(self, table: pa.Table, name: str, where: str, names: list[str], width: int | None = None) -> None:
        self.name, self.where, self.names, self.width = name, where, names, width
        column = table.column(name).combine_chunks()
        self.nulls: np.ndarray = column.is_null().to_numpy(zero_copy_only=False)
        self.offsets: np.ndarray = column.offsets.to_numpy()
        values = column.values
        if width is not None:
            if values.null_count:
                self._refuse_null_inside(values)
            values = values.flatten()
        if values.null_count:
            self._refuse_null_inside(values, per=width or 1)
        self.flat: np.ndarray = values.to_numpy(zero_copy_only=False)
        if name not in NULLABLE and self.nulls.any():
            raise CaptureError(f"{where}: {names[int(np.flatnonzero(self.nulls)[0])]}: null {name}")

    def row(self, j: int) -> np.ndarray | None:
        if self.nulls[j]:
            return None
        a, b = int(self.offsets[j]), int(self.offsets[j + 1])
        if self.width is None:
            return self.flat[a:b]
        return self.flat[a * self.width : b * self.width].reshape(b - a, self.width)

    def value(self, j: int) -> np.ndarray:
        """Row ``j`` of a column that holds no null (refused when it was read: not in NULLABLE)."""
        row = self.row(j)
        assert row is not None, f"{self.name} is not nullable: its nulls were refused"
        return row

    def _refuse_null_inside(self, values: pa.Array, per: int = 1) -> None:
        inner = int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0]) // per
        j = int(np.searchsorted(self.offsets, inner, side="right") - 1)
        raise CaptureError(f"{self.where}: {self.names[j]}: null value inside {self.name}")


def _output(data: np.ndarray, shape: np.ndarray, packed: PackedRequest, g: Geometry, where: str) -> np.ndarray:
    """The served output as its tensor; it must answer the request (one row per window, or per IDX row)."""
    dims = tuple(int(d) for d in shape)
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) != data.shape[0]:
        raise CaptureError(f"{where}: output_shape {list(dims)} does not hold the {data.shape[0]} output values")
    if packed.op is Op.SEGMENTATION:
        want: tuple[int, ...] = (packed.windows, g.frames_per_window, g.classes)
        unit = f"{packed.windows} windows"
    else:
        want = (packed.rows, g.embedding_dim)
        unit = f"{packed.rows} IDX rows"
    if dims != want:
        raise CaptureError(
            f"{where}: the served output has shape {list(dims)}, but an OP {int(packed.op)} request of "
            f"{unit} is answered with {list(want)}: it does not answer this request"
        )
    return data.reshape(dims)
