"""Parquet files of the harness (corpus, golden and run outputs): one way to write, one way to read.

Written atomically (a temporary name renamed into place), zstd (runs: uncompressed), with **page
checksums**; read with checksum verification, so one flipped byte is refused instead of silently
changing audio. Every reading failure becomes one line naming the file.

Written for speed as well as for any reader: dictionary encoding only for string columns (a float
column's dictionary is built, then thrown away: pure cost) and min/max statistics only for
scalar columns (nobody filters on a log-probability); list columns hold non-nullable items, so
no validity bitmap is decoded per element (files written with nullable items read the same).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.base.errors import HarnessError, check_interrupted, clean_up, one_line
from harness.base.fsio import atomic_file, fault, os_failure
from harness.base.writeback import start_writeback

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

COMPRESSION = "zstd"
# Runs are read once, right after, and float outputs shrink by under 10 % in zstd: speed over size.
RUN_COMPRESSION = "none"


class HashingFile(io.RawIOBase):
    """A write-only file that hashes its bytes on the way to disk: the manifest's sha256 of a file
    costs no second read."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._f = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.sha256 = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Buffer) -> int:
        self.sha256.update(data)
        self.size += memoryview(data).nbytes  # bytes, whatever the buffer's item size
        return self._f.write(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        if not self._f.closed:
            self._f.flush()

    def start_writeback(self) -> None:
        """Hand what is written so far to the disk now, without waiting (Linux ``sync_file_range``): the
        fsync of :func:`harness.base.fsio.atomic_files` at close then finds little left to write. A run's
        18 files were fsynced at its end with every byte still dirty, 0.76 s after the last network call
        at N = 256; elsewhere, or where the file system refuses, nothing is done."""
        start_writeback(self._f)

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()
        super().close()


class ParquetSink:
    """Appends row groups to one Parquet file, renamed into place only by :meth:`close`.

    After :meth:`close`, ``entry`` holds the file's sha256, size and rows (for a manifest)."""

    def __init__(
        self, path: Path, schema: pa.Schema, compression_level: int | None = None, compression: str = COMPRESSION
    ) -> None:
        self.path = Path(path)
        self.schema = schema
        self.rows = 0
        # the manifest's file entry (FileEntry's keys: sha256, bytes, rows), as JSON: the goldens' writers take it
        self.entry: dict[str, str | int] | None = None
        self._context = atomic_file(self.path)
        self._tmp = self._context.__enter__()
        with self._dropped_on_failure():
            self._file = HashingFile(self._tmp)
            self._writer = pq.ParquetWriter(
                self._file,
                schema,
                compression=compression,
                compression_level=compression_level if compression == "zstd" else None,
                write_page_checksum=True,
                use_dictionary=_strings(schema) or False,
                write_statistics=_scalars(schema) or False,
            )

    def write(self, table: pa.Table) -> None:
        with self._dropped_on_failure():
            check_interrupted()
            fault(f"parquet:{self.path.name}")
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
            self._file.start_writeback()  # in the writer's thread (a lane's: behind the lanes)
        self.rows += table.num_rows

    def close(self) -> int:
        with self._dropped_on_failure():
            self._writer.close()
            self._file.close()
        self._context.__exit__(None, None, None)
        self.entry = {"sha256": self._file.sha256.hexdigest(), "bytes": self._file.size, "rows": self.rows}
        return self.rows

    @contextlib.contextmanager
    def _dropped_on_failure(self) -> Iterator[None]:
        """Any failure drops the temporary file: an OS error becomes one line naming the file."""
        try:
            yield
        except OSError as exc:
            self._abort(exc)
            raise os_failure(self.path, exc) from None
        except BaseException as exc:
            self._abort(exc)
            raise

    def abort(self) -> None:
        """Drop the temporary file (a failure elsewhere)."""
        self._abort(RuntimeError("aborted"))

    def _abort(self, exc: BaseException) -> None:
        with clean_up():  # the temporary file is removed even if a second Ctrl-C comes meanwhile
            with contextlib.suppress(Exception):
                self._writer.close()
            with contextlib.suppress(Exception):
                self._file.close()
            with contextlib.suppress(BaseException):
                self._context.__exit__(type(exc), exc, None)


def _strings(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]


def _scalars(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if not pa.types.is_nested(f.type)]


def write_table(path: Path, table: pa.Table, compression_level: int | None = None) -> dict[str, str | int]:
    """Write one table; returns its manifest entry (sha256, bytes, rows)."""
    sink = ParquetSink(path, table.schema, compression_level)
    sink.write(table)
    sink.close()
    assert sink.entry is not None
    return sink.entry


def open_file(
    path: Path, what: str, error: type[HarnessError] = HarnessError, read_dictionary: list[str] | None = None
) -> pq.ParquetFile:
    """Open a Parquet file with page checksum verification, or one error line naming it.

    ``read_dictionary``: string columns to read dictionary-encoded (a block id repeated on every
    row of its block is then one string and an index per row)."""
    path = Path(path)
    try:
        return pq.ParquetFile(path, page_checksum_verification=True, read_dictionary=read_dictionary)
    except FileNotFoundError:
        raise error(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise error(f"{path}: {what} expected, found a directory") from None
    except (pa.ArrowException, OSError) as exc:
        raise error(f"{path}: not a readable Parquet {what} ({one_line(exc)})") from None


def read_row_group(
    file: pq.ParquetFile,
    i: int,
    path: Path,
    what: str,
    error: type[HarnessError] = HarnessError,
    columns: list[str] | None = None,
) -> pa.Table:
    check_interrupted()
    try:
        return file.read_row_group(i, columns=columns)
    except (pa.ArrowException, OSError) as exc:
        raise error(
            f"{path}: {what} is corrupt in row group {i} ({one_line(exc)}; a flipped byte fails its page checksum)"
        ) from None


def one_chunk(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A column as one array: a row group's column usually is one chunk already, taken as is
    (``combine_chunks`` would copy it)."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


_NUMPY = {
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


def to_numpy(arr: pa.Array) -> np.ndarray:
    """A primitive Arrow array as numpy: a read-only view of its buffer when it has no nulls.

    (pyarrow's own ``to_numpy`` imports pandas on first use, even for a zero-copy view: 60 MB and
    most of a second of every command that reads outputs.)"""
    dtype = _NUMPY.get(arr.type)
    if dtype is None or arr.null_count:
        return np.asarray(arr.to_numpy(zero_copy_only=False))
    data = arr.buffers()[1]
    if data is None:
        return np.zeros(0, dtype=dtype)
    return np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)


def schema_metadata(
    file: pq.ParquetFile, key: bytes, path: Path, what: str, error: type[HarnessError] = HarnessError
) -> object | None:
    """The JSON value stored under ``key`` in the file's schema metadata (None if absent)."""
    raw = (file.schema_arrow.metadata or {}).get(key)
    if raw is None:
        return None
    try:
        value: object = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{path}: {what} metadata {key.decode()!r} is not JSON") from None
    return value


def describe(schema: pa.Schema) -> str:
    return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"


def check_schema(
    file: pq.ParquetFile, expected: pa.Schema, path: Path, what: str, error: type[HarnessError] = HarnessError
) -> None:
    """The file's columns are ``expected``'s (list items may be nullable or not: the same data)."""
    got = file.schema_arrow.remove_metadata()
    if not _loose(got).equals(_loose(expected.remove_metadata())):
        raise error(f"{path}: {what} has schema {describe(got)}, expected {describe(expected)}")


def items(kind: pa.DataType) -> pa.Field:
    """The non-nullable item field of a list column of ``kind`` (see the module doc)."""
    return pa.field("item", kind, nullable=False)


def _loose(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(_loose_type(f.type)) for f in schema])


def _loose_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        return _loose_type(t.value_type)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field("item", _loose_type(t.value_type)), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(pa.field("item", _loose_type(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(pa.field("item", _loose_type(t.value_type)))
    return t
