"""The corpus Parquet schema (one row per block), a corpus in memory, and the streaming, validating writer;
the reader that checks a file against this schema is :mod:`harness.data.corpus_reader`.

Schema (docs/corpus.md, so another program, e.g. the engine, can write it):

    block_id    string            unique per corpus
    source      string            "synth" | "wav" | "capture" | free text
    span        large_list<float> mono audio at the model's sample rate
    offsets     list<int64>       start sample of each window in span
    valid       list<int32>       valid samples of each window (0 = padding window)
    provenance  string            JSON object: where the block came from

Schema metadata ``harness.corpus`` holds JSON {"version": 1, "sample_rate", "window_samples",
"windows_per_block"} (:class:`harness.data.schemas.CorpusMeta`); a file without it is refused unless
it is being imported (``corpus capture``). Every row must pass the block contract; a corpus with
one bad row is refused whole, naming the row, the block and the field.

Memory is bounded by a row group: the writer takes blocks one at a time, the reader yields them
row group by row group, and :func:`harness.data.corpus_reader.read_corpus` (everything in memory) is for
small corpora only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Final, NamedTuple

import numpy as np
import pyarrow as pa
from pydantic import JsonValue

from harness.base.errors import BlockError, CorpusError, check_interrupted
from harness.base.overlap import WriteBehind
from harness.data.arrow_build import numeric, strings
from harness.data.blocks import Block, concat_spans
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.parquet import ParquetSink, items
from harness.data.schemas import CorpusMeta, CorpusSummary

SCHEMA_VERSION: Final = 1
META_KEY = b"harness.corpus"
SCHEMA = pa.schema(
    [
        pa.field("block_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("span", pa.large_list(items(pa.float32())), nullable=False),
        pa.field("offsets", pa.list_(items(pa.int64())), nullable=False),
        pa.field("valid", pa.list_(items(pa.int32())), nullable=False),
        pa.field("provenance", pa.string(), nullable=False),
    ]
)
GEOMETRY_KEYS = ("sample_rate", "window_samples", "windows_per_block")


class CorpusRow(NamedTuple):
    """One corpus row: the block, its source, its provenance. The provenance is a JSON object of free keys
    (each source writes its own; :class:`harness.data.schemas.files.Provenance` is open), so it stays a
    JSON object, written as it is."""

    block: Block
    source: str
    provenance: dict[str, JsonValue]


def geometry_meta(geometry: Geometry) -> CorpusMeta:
    """What a corpus records of the geometry it was cut for (its schema metadata ``harness.corpus``)."""
    return CorpusMeta(
        version=SCHEMA_VERSION,
        sample_rate=geometry.sample_rate,
        window_samples=geometry.window_samples,
        windows_per_block=geometry.windows_per_block,
    )


# blocks per row group: the lanes' group for shapes up to 32, so a pack of consecutive blocks is one buffer
GROUP_BLOCKS = 32


class Summary:
    """What a corpus holds, accumulated block by block (the golden manifest stores it)."""

    def __init__(self, geometry: Geometry) -> None:
        self.g = geometry
        self.blocks = self.audio_windows = self.short_windows = self.padding_windows = 0
        self.samples = self.max_span = 0
        self.sources: set[str] = set()

    def add(self, block: Block, source: str) -> None:
        audio = block.valid > 0
        self.blocks += 1
        self.audio_windows += int(audio.sum())
        self.short_windows += int((audio & (block.valid < self.g.window_samples)).sum())
        self.padding_windows += int((~audio).sum())
        self.samples += int(block.span.shape[0])
        self.max_span = max(self.max_span, int(block.span.shape[0]))
        self.sources.add(source)

    def result(self) -> CorpusSummary:
        """The summary as the golden manifest's ``corpus`` holds it (not validated here: a summary of no
        block is refused by the writer and the reader, with their own message)."""
        return CorpusSummary.model_construct(
            blocks=self.blocks,
            audio_windows=self.audio_windows,
            short_windows=self.short_windows,
            padding_windows=self.padding_windows,
            span_seconds=round(self.samples / self.g.sample_rate, 3),
            max_span_samples=self.max_span,
            sources=sorted(self.sources),
        )


@dataclass
class Corpus:
    """A small corpus in memory (tests, examples); large ones are streamed with CorpusReader."""

    blocks: list[Block]
    sources: list[str]
    provenance: list[dict[str, JsonValue]]
    geometry_meta: CorpusMeta | None = None  # None: cut for the reference geometry (a file without the metadata)

    def __len__(self) -> int:
        return len(self.blocks)

    @staticmethod
    def collect(rows: Iterable[CorpusRow], geometry_meta: CorpusMeta | None) -> Corpus:
        """A stream of (block, source, provenance) rows, held in memory."""
        blocks: list[Block] = []
        sources: list[str] = []
        provenance: list[dict[str, JsonValue]] = []
        for block, source, prov in rows:
            blocks.append(block)
            sources.append(source)
            provenance.append(prov)
        return Corpus(blocks, sources, provenance, geometry_meta)

    @property
    def ids(self) -> list[str]:
        return [b.id for b in self.blocks]

    def subset(self, indices: list[int]) -> Corpus:
        return Corpus(
            [self.blocks[i] for i in indices],
            [self.sources[i] for i in indices],
            [self.provenance[i] for i in indices],
            self.geometry_meta,
        )

    def rows(self) -> Iterator[CorpusRow]:
        for block, source, provenance in zip(self.blocks, self.sources, self.provenance, strict=True):
            yield CorpusRow(block, source, provenance)

    def summary(self, geometry: Geometry | None = None) -> CorpusSummary:
        meta = self.geometry_meta
        g = geometry or (
            Geometry()
            if meta is None
            else replace(
                Geometry(),
                sample_rate=meta.sample_rate,
                window_samples=meta.window_samples,
                windows_per_block=meta.windows_per_block,
            )
        )
        s = Summary(g)
        for block, source, _ in self.rows():
            s.add(block, source)
        return s.result()


# ------------------------------------------------------------------------------------------ writing


class CorpusWriter:
    """Validates and writes blocks one at a time; the file appears (renamed) only on :meth:`close`.

    Row groups are encoded and written in a thread (:class:`harness.base.overlap.WriteBehind`) while the
    next blocks are read and validated."""

    def __init__(self, path: Path, geometry: Geometry, group_blocks: int = GROUP_BLOCKS) -> None:
        self.path, self.g, self.group_blocks = Path(path), geometry, group_blocks
        self.summary = Summary(geometry)
        self._ids: set[str] = set()
        self._pending: list[CorpusRow] = []
        meta = geometry_meta(geometry).model_dump()  # version first, then the geometry's keys
        self.schema = SCHEMA.with_metadata({META_KEY: json.dumps(meta).encode()})
        self._sink = ParquetSink(self.path, self.schema)
        self._behind: WriteBehind[list[CorpusRow]] = WriteBehind(self._write, name="corpus-writer")

    def __enter__(self) -> CorpusWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None:
            self.abort()

    def add(self, block: Block, source: str, provenance: dict[str, JsonValue]) -> None:
        check_interrupted()
        try:
            Block.create(block.id, block.op, block.span, block.offsets, block.valid, self.g)
        except BlockError as exc:
            raise CorpusError(f"{self.path}: corpus refused: {exc}") from None
        if block.op is not Op.SEGMENTATION:
            raise CorpusError(f"{self.path}: block {block.id!r}: a corpus holds OP 0 audio blocks")
        if block.id in self._ids:
            raise CorpusError(f"{self.path}: block id {block.id!r} appears twice")
        self._ids.add(block.id)
        self.summary.add(block, source)
        self._pending.append(CorpusRow(block, source, provenance))
        if len(self._pending) >= self.group_blocks:
            self._flush()

    def close(self) -> CorpusSummary:
        """Rename the file into place; returns the corpus summary."""
        if not self._ids:
            self.abort()
            raise CorpusError(f"{self.path}: a corpus needs at least one block")
        self._flush()
        try:
            self._behind.close()
        except BaseException:
            self.abort()
            raise
        self._sink.close()
        return self.summary.result()

    @property
    def entry(self) -> dict[str, str | int] | None:
        """The written file's manifest entry (sha256, bytes, rows), after :meth:`close`."""
        return self._sink.entry

    def abort(self) -> None:
        self._behind.abort()
        self._sink.abort()

    def _flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        try:
            self._behind.submit(rows)
        except BaseException:
            self.abort()
            raise

    def _write(self, rows: list[CorpusRow]) -> None:
        blocks = [b for b, _, _ in rows]
        self._sink.write(
            pa.Table.from_pydict(
                {
                    "block_id": strings([b.id for b in blocks]),  # not pa.array: it imports pandas (arrow_build)
                    "source": strings([s for _, s, _ in rows]),
                    "span": _list_column([b.span for b in blocks], pa.float32(), large=True),
                    "offsets": _list_column([b.offsets for b in blocks], pa.int64()),
                    "valid": _list_column([b.valid for b in blocks], pa.int32()),
                    "provenance": strings([json.dumps(p, sort_keys=True) for _, _, p in rows]),
                },
                schema=self.schema,
            )
        )


def write_corpus(path: str | Path, corpus: Corpus | Iterable[CorpusRow], geometry: Geometry) -> CorpusSummary:
    """Validate every block and write the corpus atomically; returns its summary."""
    rows = corpus.rows() if isinstance(corpus, Corpus) else corpus
    with CorpusWriter(Path(path), geometry) as writer:
        for block, source, provenance in rows:
            writer.add(block, source, provenance)
        return writer.close()


def _list_column(arrays: list[np.ndarray], value_type: pa.DataType, large: bool = False) -> pa.Array:
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64 if large else np.int32)
    if large and arrays and all(a.dtype == np.float32 for a in arrays):
        flat = concat_spans(arrays)  # spans read from one row group lie end to end: no copy then
    else:
        flat = np.concatenate(arrays) if arrays else np.zeros(0)
    values = numeric(flat, value_type)
    if large:
        return pa.LargeListArray.from_arrays(
            numeric(offsets, pa.int64()), values, type=pa.large_list(items(value_type))
        )
    return pa.ListArray.from_arrays(numeric(offsets, pa.int32()), values, type=pa.list_(items(value_type)))
