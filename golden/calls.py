"""The call log (``calls.parquet``): every network call of a recording or run, written as it grows.

One row per call: lane, shape, OP, blocks/windows/rows, request bytes, wall time, peak device
memory, replica, which blocks it carried (the ids as sent: a variant's second copy of a block is
``id~1``), and ``variant``: the lane of a variant (:mod:`lanes.running.variants`) whose call it was, "" for
a plain lane and the exact lane (a log written before variants reads as "" throughout). A corpus
of 100,000 blocks makes about a million calls: the log is written in row groups of ``CALL_GROUP``
calls as they happen and read back row group by row group, so neither side holds it whole; each row
is read back once as a :class:`harness.data.call_record.CallRecord`, by attribute.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.base.errors import GoldenError
from harness.data import arrow_build
from harness.data.call_record import CALL_COLUMNS, CallRecord
from harness.data.parquet import ParquetSink, check_schema, open_file, read_row_group

CALL_GROUP = 8192

CALL_SCHEMA = pa.schema(
    [
        pa.field("lane", pa.string(), nullable=False),
        pa.field("shape", pa.int64(), nullable=False),
        pa.field("op", pa.int64(), nullable=False),
        pa.field("blocks", pa.int64(), nullable=False),
        pa.field("windows", pa.int64(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("request_bytes", pa.int64(), nullable=False),
        pa.field("wall_s", pa.float64(), nullable=False),
        pa.field("peak_device_bytes", pa.int64()),
        pa.field("replica", pa.int64(), nullable=False),
        pa.field("block_ids", pa.list_(pa.string()), nullable=False),
        pa.field(
            "variant", pa.string(), nullable=False
        ),  # a variant's lane (lanes.running.variants), "" for a plain lane
    ]
)
assert tuple(CALL_SCHEMA.names) == CALL_COLUMNS  # a row's columns are a CallRecord's fields, in their order
_SCALARS = [f.name for f in CALL_SCHEMA if f.name != "block_ids"]
_IDS_AT = CALL_COLUMNS.index("block_ids")  # the list column: a record holds it as a tuple
# a log written before variants (no "variant" column) reads as every call of a plain lane
_BEFORE_VARIANTS = pa.schema([f for f in CALL_SCHEMA if f.name != "variant"])


class CallLog:
    """Appends calls (``harness.data.call_record.CallRecord`` objects or their dicts) to a call log file, a row
    group every ``group`` calls; the file appears (renamed) only on :meth:`close`."""

    def __init__(self, path: Path, group: int = CALL_GROUP) -> None:
        self.path, self.group = Path(path), group
        self._sink = ParquetSink(self.path, CALL_SCHEMA)
        self._pending: list = []
        self._written = 0

    def append(self, call: object) -> None:
        self._pending.append(call)
        if len(self._pending) >= self.group:
            self._flush()

    def extend(self, calls: Iterable[object]) -> None:
        for call in calls:
            self.append(call)

    def __len__(self) -> int:
        return self._written + len(self._pending)

    def close(self) -> dict:
        """The file's manifest entry (sha256, bytes, rows)."""
        try:
            if self._pending or not self._written:
                self._flush()
            self._sink.close()
        except BaseException:
            self.abort()
            raise
        assert self._sink.entry is not None
        return self._sink.entry

    def abort(self) -> None:
        self._sink.abort()

    def _flush(self) -> None:
        rows, self._pending = self._pending, []
        get = _item if rows and isinstance(rows[0], dict) else getattr
        data = {name: [get(r, name) for r in rows] for name in _SCALARS}
        data["block_ids"] = [list(get(r, "block_ids") or ()) for r in rows]  # the call log's Arrow column
        self._sink.write(arrow_build.table(data, CALL_SCHEMA))  # not pa.array: it imports pandas
        self._written += len(rows)


def _item(row: dict, key: str) -> Any:
    return row.get(key, "") if key == "variant" else row[key]  # a dict of a plain call may omit it


def write_calls(path: Path, calls: Iterable[object]) -> dict:
    """Write a whole call log at once; its manifest entry."""
    log = CallLog(path)
    try:
        log.extend(calls)
    except BaseException:
        log.abort()
        raise
    return log.close()


def iter_calls(path: Path, where: str) -> Iterator[CallRecord]:
    """Every call of a log as a record (a read-only mapping of its columns too), row group by row group."""
    f = open_file(path, f"{where} call log", GoldenError)
    legacy = "variant" not in f.schema_arrow.names  # a log before variants: each call's variant is ""
    check_schema(f, _BEFORE_VARIANTS if legacy else CALL_SCHEMA, path, f"{where} call log", GoldenError)
    names = _BEFORE_VARIANTS.names if legacy else CALL_SCHEMA.names
    for i in range(f.metadata.num_row_groups):
        table = read_row_group(f, i, path, "call log", GoldenError)
        columns = [table.column(name).to_pylist() for name in names]  # the call log's Arrow columns, by name
        for values in zip(*columns, strict=True):
            row = list(values)
            row[_IDS_AT] = tuple(row[_IDS_AT])
            yield CallRecord(*row)


def read_calls(path: Path, where: str) -> list[CallRecord]:
    return list(iter_calls(path, where))
