"""The production capture: one Parquet row per packed request the engine sent, with what it got back.

One row per *request* (not per block): the audit judges the request exactly as it went over the
wire (its rebased OFFSETS/IDX, its padding, its layout), and the served output belongs to the
request as a whole. Splitting it into block rows would store the engine's own unpacking instead
of what was sent. Each row carries the request's layout (``segments``) so it can be taken apart.

The columns are declared once, here (:data:`COLUMNS`: name, type, meaning; docs/audit.md's table is
:func:`columns_markdown`). List columns may be ``list`` or ``large_list``, child field names are
free, dtypes are checked exactly (never cast), unknown columns are ignored. Schema metadata
``harness.capture``: JSON ``{"version": 1, "engine": ..., "geometry": {...}}`` (:class:`CaptureMeta`).
Written atomically with page checksums (:mod:`harness.data.parquet`); read by :mod:`harness.capture.reader`.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Annotated, Final, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field

from harness.base.errors import HarnessError
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.parquet import ParquetSink
from harness.data.schemas import GeometryModel
from harness.data.schemas.base import Strict
from harness.packers.packing import PackedRequest
from harness.packers.wire import SEGMENT_FIELDS, SEGMENT_TYPE

VERSION: Final = 1
META_KEY = b"harness.capture"
OTHER_KINDS = {b"harness.corpus": "a corpus file", b"harness.data.outputs": "an output file of a golden or run"}
GROUP_BYTES = 64 << 20  # a row group holds at most about this much (and at most GROUP_REQUESTS requests)
GROUP_REQUESTS = 64
NULLABLE = ("WEIGHTS", "IDX", "speakers")


class CaptureError(HarnessError):
    """A capture file that cannot be read as one (exit 2): missing, corrupt, wrong schema or metadata."""


class CaptureMeta(Strict):
    """Schema metadata ``harness.capture`` of a capture file."""

    version: Literal[1] = Field(description="capture format version")
    engine: Annotated[str, Field(min_length=1)] = Field(description="what captured it (the engine's name)")
    geometry: GeometryModel = Field(description="the geometry the requests were cut for (the served model's)")


def capture_schema(frames_per_window: int) -> pa.Schema:
    """The Arrow schema the writer uses (WEIGHTS rows carry their width F in the type)."""
    segment = pa.list_(SEGMENT_TYPE)
    return pa.schema(
        [
            pa.field("request_id", pa.string(), nullable=False),
            pa.field("captured_at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("engine_version", pa.string(), nullable=False),
            pa.field("model_fingerprint", pa.string(), nullable=False),
            pa.field("device_kind", pa.string(), nullable=False),
            pa.field("OP", pa.int32(), nullable=False),
            pa.field("SPAN", pa.large_list(pa.float32()), nullable=False),
            pa.field("OFFSETS", pa.list_(pa.int64()), nullable=False),
            pa.field("VALID", pa.list_(pa.int32()), nullable=False),
            pa.field("WEIGHTS", pa.list_(pa.list_(pa.float32(), frames_per_window))),
            pa.field("IDX", pa.list_(pa.int32())),
            pa.field("speakers", pa.list_(pa.int32())),
            pa.field("segments", segment, nullable=False),
            pa.field("output", pa.large_list(pa.float32()), nullable=False),
            pa.field("output_shape", pa.list_(pa.int64()), nullable=False),
        ]
    )


# Every column: its type as docs/audit.md writes it ("list" also admits large_list) and what it holds.
COLUMNS: dict[str, tuple[str, str]] = {
    "request_id": ("string", "unique in the capture"),
    "captured_at": ("timestamp (any unit) with a time zone", "when the engine got the answer"),
    "engine_version": ("string", "the engine build that sent the request"),
    "model_fingerprint": ("string", "what the server says it served (the model's fingerprint, Triton's MODEL_INFO)"),
    "device_kind": ("string", "the server's device, e.g. `NVIDIA H100 80GB HBM3` (`cpu` for a CPU)"),
    "OP": ("int32", "0, 1 or 2"),
    "SPAN": ("list<float32>", "the packed SPAN, as sent"),
    "OFFSETS": ("list<int64>", "as sent: every window's start in the packed SPAN (rebased)"),
    "VALID": ("list<int32>", "as sent"),
    "WEIGHTS": (
        "list<fixed_size_list<float32, F>>",
        "OP 1/2: the [R, F] weights as sent; null for OP 0 (F = the geometry's frames_per_window)",
    ),
    "IDX": ("list<int32>", "OP 1/2: every row's window in the request, as sent (rebased); null for OP 0"),
    "speakers": (
        "list<int32>",
        "OP 1/2: the local speaker of each row (engine metadata, not a Triton tensor); "
        "null when unknown: rows are then matched by their index in the block",
    ),
    "segments": (
        "list<struct<...>>",
        "the layout: one entry per block, padding included, in request order "
        "(the wire protocol's `segments`: block_id, padding, span_start, span_length, window_start, "
        "windows, row_start, rows)",
    ),
    "output": ("list<float32>", "the served output, flattened row-major, as the server returned it"),
    "output_shape": ("list<int64>", "its shape: [N, F, C] for OP 0, [R, D] for OP 1/2"),
}
STRINGS = ("request_id", "engine_version", "model_fingerprint", "device_kind")
LISTS = {
    "SPAN": pa.float32(),
    "OFFSETS": pa.int64(),
    "VALID": pa.int32(),
    "IDX": pa.int32(),
    "speakers": pa.int32(),
    "output": pa.float32(),
    "output_shape": pa.int64(),
}


def columns_markdown() -> str:
    """The capture's column table of docs/audit.md (a test keeps the page in step)."""
    lines = ["| column | Arrow type | null | meaning |", "|---|---|---|---|"]
    for name, (kind, meaning) in COLUMNS.items():
        lines.append(f"| `{name}` | `{kind}` | {'yes' if name in NULLABLE else 'no'} | {meaning} |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, eq=False)
class CapturedRequest:
    """One captured request: what was sent (``packed``: tensors and layout) and what came back."""

    request_id: str
    packed: PackedRequest
    output: np.ndarray  # float32, [N, F, C] (OP 0) or [R, D] (OP 1/2)
    model_fingerprint: str
    device_kind: str
    engine_version: str
    captured_at: str  # ISO 8601, UTC
    row: int = 0  # row in the capture file (set by the reader)

    @property
    def op(self) -> Op:
        return self.packed.op


# ------------------------------------------------------------------------------------------ writing


class CaptureWriter:
    """Appends captured requests; the file appears (renamed into place) only on :meth:`close`.

    It records what it is given, right or wrong (a capture is a log: judging it is the audit's
    job), but refuses what could not be read back: a duplicate request id, a tensor of the wrong
    dtype, an output that is not float32 of the request's shape.
    """

    def __init__(self, path: str | Path, geometry: Geometry, engine: str) -> None:
        self.path, self.geometry = Path(path), geometry
        meta = CaptureMeta(version=VERSION, engine=engine, geometry=GeometryModel(**geometry.to_dict()))
        self.schema = capture_schema(geometry.frames_per_window).with_metadata(
            {META_KEY: json.dumps(meta.model_dump()).encode()}
        )
        self._ids: set[str] = set()
        self._pending: list[CapturedRequest] = []
        self._bytes = 0
        self._sink = ParquetSink(self.path, self.schema)

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None:
            self.abort()

    def add(self, request: CapturedRequest) -> None:
        p = request.packed
        where = f"{self.path}: request {request.request_id!r}"
        if request.request_id in self._ids:
            raise CaptureError(f"{where}: request id appears twice")
        for name, value, dtype in (
            ("SPAN", p.span, np.float32),
            ("OFFSETS", p.offsets, np.int64),
            ("VALID", p.valid, np.int32),
            ("WEIGHTS", p.weights, np.float32),
            ("IDX", p.idx, np.int32),
            ("speakers", p.speakers, np.int32),
            ("output", request.output, np.float32),
        ):
            if value is not None and (not isinstance(value, np.ndarray) or value.dtype != np.dtype(dtype)):
                raise CaptureError(f"{where}: {name} must be a {np.dtype(dtype)} array")
        if p.weights is not None and (p.weights.ndim != 2 or p.weights.shape[1] != self.geometry.frames_per_window):
            raise CaptureError(
                f"{where}: WEIGHTS must be [R, {self.geometry.frames_per_window}], got {list(p.weights.shape)}"
            )
        self._ids.add(request.request_id)
        self._pending.append(request)
        self._bytes += p.nbytes + int(request.output.nbytes)
        if self._bytes >= GROUP_BYTES or len(self._pending) >= GROUP_REQUESTS:
            self._flush()

    def close(self) -> int:
        """Rename the file into place; returns the number of requests written."""
        if not self._ids:
            self.abort()
            raise CaptureError(f"{self.path}: a capture needs at least one request")
        self._flush()
        return self._sink.close()

    def abort(self) -> None:
        self._sink.abort()

    def _flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending, self._bytes = self._pending, [], 0
        f = self.geometry.frames_per_window
        weights = [None if r.packed.weights is None else r.packed.weights.reshape(-1) for r in rows]
        cols = {
            "request_id": pa.array([r.request_id for r in rows], pa.string()),
            "captured_at": pa.array(
                [dt.datetime.fromisoformat(r.captured_at) for r in rows], pa.timestamp("us", tz="UTC")
            ),
            "engine_version": pa.array([r.engine_version for r in rows], pa.string()),
            "model_fingerprint": pa.array([r.model_fingerprint for r in rows], pa.string()),
            "device_kind": pa.array([r.device_kind for r in rows], pa.string()),
            "OP": pa.array([int(r.op) for r in rows], pa.int32()),
            "SPAN": _list([r.packed.span for r in rows], pa.float32(), large=True),
            "OFFSETS": _list([r.packed.offsets for r in rows], pa.int64()),
            "VALID": _list([r.packed.valid for r in rows], pa.int32()),
            "WEIGHTS": _list(weights, pa.float32(), width=f),
            "IDX": _list([r.packed.idx for r in rows], pa.int32()),
            "speakers": _list([r.packed.speakers for r in rows], pa.int32()),
            "segments": pa.array(
                [[{name: getattr(s, name) for name, _ in SEGMENT_FIELDS} for s in r.packed.segments] for r in rows],
                pa.list_(SEGMENT_TYPE),
            ),
            "output": _list([r.output.reshape(-1) for r in rows], pa.float32(), large=True),
            "output_shape": _list([np.array(r.output.shape, np.int64) for r in rows], pa.int64()),
        }
        self._sink.write(pa.Table.from_pydict(cols, schema=self.schema))


def _list(
    arrays: list[np.ndarray | None], value_type: pa.DataType, large: bool = False, width: int | None = None
) -> pa.Array:
    """list<T> (or list<fixed_size_list<T, width>> of flat row-major data) with None as null."""
    present = [a for a in arrays if a is not None]
    flat = np.concatenate(present) if present else np.zeros(0)
    values: pa.Array = pa.array(flat, value_type)
    per = 1
    if width is not None:
        values, per = pa.FixedSizeListArray.from_arrays(values, width), width
    lengths = np.array([0 if a is None else a.shape[0] // per for a in arrays], dtype=np.int64)
    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int64 if large else np.int32))
    mask = pa.array([a is None for a in arrays])
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(offsets, values, mask=mask if any(a is None for a in arrays) else None)
