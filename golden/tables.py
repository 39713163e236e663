"""Lane outputs <-> Parquet tables (zstd; arrays as fixed-size list columns).

The files are meant to be opened by anyone: pandas, polars and duckdb read them with no
help from this project. Layout:

``op0.parquet``: one row per (block, window)
    block_id string, window int32, valid int32,
    logprobs fixed_size_list<fixed_size_list<float32, classes>, frames>,
    top_class fixed_size_list<int8, frames>       argmax over the powerset classes per frame
    top_margin fixed_size_list<float32, frames>   top-1 minus top-2 log-probability per frame
    (the decisions are stored so scoring a run never recomputes the golden's: see scoring.py)

``op1.parquet`` / ``op2.parquet``: one row per voiceprint row (block, window, speaker)
    block_id string, row int32 (position in the block's request), window int32 (IDX),
    speaker int32, weights fixed_size_list<float32, frames> (WEIGHTS),
    embedding fixed_size_list<float32, embedding_dim>

File metadata ``harness.outputs`` holds JSON {"format", "op", "frames", "classes", "embedding_dim"}.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.errors import GoldenError
from harness.geometry import Geometry
from harness.ops import Op
from harness.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs

FORMAT = 1
META_KEY = b"harness.outputs"


def op_file(op: Op) -> str:
    return f"op{int(op)}.parquet"


def segmentation_schema(geometry: Geometry) -> pa.Schema:
    return pa.schema([
        pa.field("block_id", pa.string(), nullable=False),
        pa.field("window", pa.int32(), nullable=False),
        pa.field("valid", pa.int32(), nullable=False),
        pa.field("logprobs", pa.list_(pa.list_(pa.float32(), geometry.classes), geometry.frames_per_window),
                 nullable=False),
        pa.field("top_class", pa.list_(pa.int8(), geometry.frames_per_window), nullable=False),
        pa.field("top_margin", pa.list_(pa.float32(), geometry.frames_per_window), nullable=False),
    ])


def voiceprint_schema(geometry: Geometry) -> pa.Schema:
    return pa.schema([
        pa.field("block_id", pa.string(), nullable=False),
        pa.field("row", pa.int32(), nullable=False),
        pa.field("window", pa.int32(), nullable=False),
        pa.field("speaker", pa.int32(), nullable=False),
        pa.field("weights", pa.list_(pa.float32(), geometry.frames_per_window), nullable=False),
        pa.field("embedding", pa.list_(pa.float32(), geometry.embedding_dim), nullable=False),
    ])


def write_lane(directory: Path, outputs: LaneOutputs, geometry: Geometry) -> dict[str, int]:
    """Write one file per OP into ``directory``; returns rows per file name."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = {}
    seg = outputs.segmentation
    b, n = seg.valid.shape
    top_class, top_margin = seg.decisions()
    table = pa.table({
        "block_id": pa.array(np.repeat(np.array(seg.block_ids, dtype=object), n), pa.string()),
        "window": pa.array(np.tile(np.arange(n, dtype=np.int32), b)),
        "valid": pa.array(seg.valid.reshape(-1).astype(np.int32)),
        "logprobs": _fixed(seg.logprobs.reshape(-1), (geometry.frames_per_window, geometry.classes)),
        "top_class": _fixed(top_class.astype(np.int8), (geometry.frames_per_window,), pa.int8()),
        "top_margin": _fixed(top_margin, (geometry.frames_per_window,)),
    }, schema=_with_meta(segmentation_schema(geometry), Op.SEGMENTATION, geometry))
    rows[op_file(Op.SEGMENTATION)] = _write(table, directory / op_file(Op.SEGMENTATION))
    for op, vp in outputs.voiceprint.items():
        table = pa.table({
            "block_id": pa.array(vp.block_ids.astype(object), pa.string()),
            "row": pa.array(vp.row.astype(np.int32)),
            "window": pa.array(vp.window.astype(np.int32)),
            "speaker": pa.array(vp.speaker.astype(np.int32)),
            "weights": _fixed(vp.weights.reshape(-1), (geometry.frames_per_window,)),
            "embedding": _fixed(vp.embedding.reshape(-1), (geometry.embedding_dim,)),
        }, schema=_with_meta(voiceprint_schema(geometry), op, geometry))
        rows[op_file(op)] = _write(table, directory / op_file(op))
    return rows


def read_lane(directory: Path, geometry: Geometry, ops: list[Op], where: str) -> LaneOutputs:
    seg_table = read_checked(directory / op_file(Op.SEGMENTATION), segmentation_schema(geometry), where)
    ids = np.asarray(seg_table.column("block_id").to_pylist(), dtype=object)
    n = geometry.windows_per_block
    if ids.size % n:
        raise GoldenError(f"{where}/{op_file(Op.SEGMENTATION)}: {ids.size} rows is not a whole number of blocks")
    block_ids = ids[::n]
    windows = seg_table.column("window").to_numpy().reshape(-1, n)
    if not (np.all(ids.reshape(-1, n) == block_ids[:, None]) and np.all(windows == np.arange(n))):
        raise GoldenError(f"{where}/{op_file(Op.SEGMENTATION)}: rows are not whole blocks in window order")
    logprobs = _unfixed(seg_table.column("logprobs"), 2).reshape(
        -1, n, geometry.frames_per_window, geometry.classes)
    seg = SegmentationOutputs([str(b) for b in block_ids], seg_table.column("valid").to_numpy().reshape(-1, n)
                              .astype(np.int32), logprobs)
    seg.set_decisions(_unfixed(seg_table.column("top_class"), 1, np.int8).astype(np.int64),
                      _unfixed(seg_table.column("top_margin"), 1))
    vps = {}
    for op in ops:
        if op is Op.SEGMENTATION:
            continue
        t = read_checked(directory / op_file(op), voiceprint_schema(geometry), where)
        vps[op] = VoiceprintOutputs(
            op=op,
            block_ids=np.asarray(t.column("block_id").to_pylist(), dtype=object),
            row=t.column("row").to_numpy().astype(np.int32),
            window=t.column("window").to_numpy().astype(np.int32),
            speaker=t.column("speaker").to_numpy().astype(np.int32),
            weights=_unfixed(t.column("weights"), 1).reshape(-1, geometry.frames_per_window),
            embedding=_unfixed(t.column("embedding"), 1).reshape(-1, geometry.embedding_dim),
        )
    return LaneOutputs(seg, vps)


def read_checked(path: Path, schema: pa.Schema, where: str) -> pa.Table:
    """Read a Parquet file and refuse it unless its columns are exactly ``schema``'s."""
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise GoldenError(f"{where}: {path.name} is missing") from None
    except (pa.ArrowException, OSError) as exc:
        raise GoldenError(f"{where}: {path.name} is not readable Parquet ({exc})") from None
    got = table.schema.remove_metadata()
    if not got.equals(schema.remove_metadata()):
        raise GoldenError(f"{where}: {path.name} has schema {_describe(got)}, expected {_describe(schema)}")
    return table


def _describe(schema: pa.Schema) -> str:
    return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"


def _fixed(flat: np.ndarray, dims: tuple[int, ...], kind: pa.DataType | None = None) -> pa.Array:
    arr: pa.Array = pa.array(np.ascontiguousarray(flat, dtype=np.float32 if kind is None else flat.dtype), kind)
    for size in reversed(dims):
        arr = pa.FixedSizeListArray.from_arrays(arr, size)
    return arr


def _unfixed(column: pa.ChunkedArray, depth: int, dtype: type = np.float32) -> np.ndarray:
    arr = column.combine_chunks()
    for _ in range(depth):
        arr = arr.flatten()
    return np.ascontiguousarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)


def _with_meta(schema: pa.Schema, op: Op, geometry: Geometry) -> pa.Schema:
    meta = {"format": FORMAT, "op": int(op), "frames": geometry.frames_per_window, "classes": geometry.classes,
            "embedding_dim": geometry.embedding_dim}
    return schema.with_metadata({META_KEY: json.dumps(meta).encode()})


def _write(table: pa.Table, path: Path) -> int:
    pq.write_table(table, path, compression="zstd")
    return table.num_rows


def write_calls(path: Path, calls: list) -> int:
    columns = ("lane", "shape", "op", "blocks", "windows", "rows", "request_bytes", "wall_s",
               "peak_device_bytes", "replica")
    data = {c: [r[c] if isinstance(r, dict) else getattr(r, c) for r in calls] for c in columns}
    table = pa.table({
        "lane": pa.array(data["lane"], pa.string()),
        **{c: pa.array(data[c], pa.int64()) for c in ("shape", "op", "blocks", "windows", "rows", "request_bytes",
                                                     "replica")},
        "wall_s": pa.array(data["wall_s"], pa.float64()),
        "peak_device_bytes": pa.array(data["peak_device_bytes"], pa.int64()),
    })
    return _write(table, path)


def read_calls(path: Path, where: str) -> list[dict]:
    try:
        return pq.read_table(path).to_pylist()
    except (FileNotFoundError, pa.ArrowException, OSError) as exc:
        raise GoldenError(f"{where}: {path.name} is not readable ({exc})") from None
