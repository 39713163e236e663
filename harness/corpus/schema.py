"""The corpus Parquet schema (one row per block) and its atomic, validating reader/writer.

Schema (documented in docs/corpus.md so another program, e.g. the engine, can write it):

    block_id    string            unique per corpus
    source      string            "synth" | "wav" | "capture" | free text
    span        large_list<float> mono audio at the model's sample rate
    offsets     list<int64>       start sample of each window in span
    valid       list<int32>       valid samples of each window (0 = padding window)
    provenance  string            JSON object: where the block came from

File metadata key ``harness.corpus`` holds JSON: {"version": 1, "sample_rate",
"window_samples", "windows_per_block"}. Every row must pass the block contract; a corpus
with one bad row is refused whole, naming the first bad block.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.blocks import Block
from harness.errors import BlockError, CorpusError
from harness.geometry import Geometry
from harness.ops import Op

SCHEMA_VERSION = 1
META_KEY = b"harness.corpus"
SCHEMA = pa.schema([
    pa.field("block_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("span", pa.large_list(pa.float32()), nullable=False),
    pa.field("offsets", pa.list_(pa.int64()), nullable=False),
    pa.field("valid", pa.list_(pa.int32()), nullable=False),
    pa.field("provenance", pa.string(), nullable=False),
])
GEOMETRY_KEYS = ("sample_rate", "window_samples", "windows_per_block")


@dataclass
class Corpus:
    """Blocks (OP 0 requests of real audio) with their source and provenance."""

    blocks: list[Block]
    sources: list[str]
    provenance: list[dict]
    geometry_meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def ids(self) -> list[str]:
        return [b.id for b in self.blocks]

    def subset(self, indices: list[int]) -> Corpus:
        return Corpus([self.blocks[i] for i in indices], [self.sources[i] for i in indices],
                      [self.provenance[i] for i in indices], dict(self.geometry_meta))

    def summary(self) -> dict:
        windows = sum(int((b.valid > 0).sum()) for b in self.blocks)
        short = sum(int(((b.valid > 0) & (b.valid < self.geometry_meta.get("window_samples", 0))).sum())
                    for b in self.blocks)
        seconds = sum(b.span.shape[0] for b in self.blocks) / max(1, self.geometry_meta.get("sample_rate", 1))
        return {"blocks": len(self.blocks), "audio_windows": windows, "short_windows": short,
                "padding_windows": sum(int((b.valid == 0).sum()) for b in self.blocks),
                "span_seconds": round(seconds, 3), "sources": sorted(set(self.sources))}


def write_corpus(path: str | Path, corpus: Corpus, geometry: Geometry) -> Path:
    """Validate every block, then write atomically (a temporary file renamed into place)."""
    path = Path(path)
    ids = set()
    for block in corpus.blocks:
        _revalidate(block, geometry, str(path))
        if block.id in ids:
            raise CorpusError(f"{path}: block id {block.id!r} appears twice")
        ids.add(block.id)
    table = to_table(corpus, geometry)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def to_table(corpus: Corpus, geometry: Geometry) -> pa.Table:
    meta = {"version": SCHEMA_VERSION, **{k: getattr(geometry, k) for k in GEOMETRY_KEYS}}
    columns = {
        "block_id": pa.array([b.id for b in corpus.blocks], pa.string()),
        "source": pa.array(corpus.sources, pa.string()),
        "span": _list_column([b.span for b in corpus.blocks], pa.float32(), large=True),
        "offsets": _list_column([b.offsets for b in corpus.blocks], pa.int64()),
        "valid": _list_column([b.valid for b in corpus.blocks], pa.int32()),
        "provenance": pa.array([json.dumps(p, sort_keys=True) for p in corpus.provenance], pa.string()),
    }
    return pa.table(columns, schema=SCHEMA.with_metadata({META_KEY: json.dumps(meta).encode()}))


def read_corpus(path: str | Path, geometry: Geometry) -> Corpus:
    """Read and validate a corpus; refuse it whole on the first bad block, naming it."""
    path = Path(path)
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise CorpusError(f"{path}: corpus file not found") from None
    except (pa.ArrowException, OSError) as exc:
        raise CorpusError(f"{path}: not a readable Parquet corpus ({exc})") from None
    return from_table(table, geometry, str(path))


def from_table(table: pa.Table, geometry: Geometry, where: str) -> Corpus:
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise CorpusError(f"{where}: not a corpus: missing column {missing[0]!r} (see docs/corpus.md)")
    meta = _geometry_meta(table, where)
    for key in GEOMETRY_KEYS:
        if key in meta and int(meta[key]) != getattr(geometry, key):
            raise CorpusError(f"{where}: corpus was cut for {key}={meta[key]}, the model needs "
                              f"{getattr(geometry, key)}")
    ids = table.column("block_id").to_pylist()
    sources = table.column("source").to_pylist()
    provenance_raw = table.column("provenance").to_pylist()
    spans, offsets, valids = (_lists(table, name) for name in ("span", "offsets", "valid"))
    blocks, provenance, seen = [], [], set()
    for i, block_id in enumerate(ids):
        if block_id is None or offsets[i] is None or valids[i] is None or spans[i] is None:
            raise CorpusError(f"{where}: row {i} (block {block_id!r}) has a null field")
        if block_id in seen:
            raise CorpusError(f"{where}: block id {block_id!r} appears twice")
        seen.add(block_id)
        try:
            blocks.append(Block.create(block_id, Op.SEGMENTATION, spans[i], offsets[i], valids[i], geometry))
        except BlockError as exc:
            raise CorpusError(f"{where}: corpus refused at row {i}: {exc}") from None
        try:
            provenance.append(json.loads(provenance_raw[i] or "{}"))
        except json.JSONDecodeError:
            raise CorpusError(f"{where}: block {block_id!r}: provenance is not JSON") from None
    if not blocks:
        raise CorpusError(f"{where}: corpus holds no blocks")
    return Corpus(blocks, [s or "" for s in sources], provenance, meta)


def _geometry_meta(table: pa.Table, where: str) -> dict:
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        return {}
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise CorpusError(f"{where}: corpus metadata {META_KEY.decode()!r} is not JSON") from None


def _revalidate(block: Block, geometry: Geometry, where: str) -> None:
    try:
        Block.create(block.id, block.op, block.span, block.offsets, block.valid, geometry)
    except BlockError as exc:
        raise CorpusError(f"{where}: corpus refused: {exc}") from None


def _list_column(arrays: list[np.ndarray], value_type: pa.DataType, large: bool = False) -> pa.Array:
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64 if large else np.int32)
    values = pa.array(np.concatenate(arrays) if arrays else np.zeros(0), value_type)
    cls = pa.LargeListArray if large else pa.ListArray
    return cls.from_arrays(pa.array(offsets), values)


def _lists(table: pa.Table, name: str) -> list[np.ndarray | None]:
    """A list column as numpy arrays (dtype as stored: Block.create names a wrong one)."""
    column = table.column(name).combine_chunks()
    if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type):
        return [np.asarray(v) if v is not None else None for v in column.to_pylist()]
    nulls = column.is_null().to_numpy(zero_copy_only=False)
    offsets = column.offsets.to_numpy()  # index into .values, which ignores slicing
    try:
        flat = column.values.to_numpy(zero_copy_only=False)
    except pa.ArrowException:
        flat = np.asarray(column.values.to_pylist(), dtype=object)
    return [None if nulls[i] else flat[offsets[i] : offsets[i + 1]] for i in range(len(column))]
