"""Reading a corpus file (:mod:`harness.data.corpus_schema`'s Parquet schema, docs/corpus.md): checked up front
(columns, metadata, the geometry it was cut for), then read row group by row group, every row validated
against the block contract, the next group read in a thread while the caller works on this one; a corpus
with one bad row is refused whole, naming the row, the block and the field. Apart from the schema and its
writer because reading is the half that must distrust the file: another program (the engine) may have
written it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from harness.base.errors import BlockError, CorpusError, HarnessError
from harness.base.overlap import prefetch
from harness.data.blocks import Block
from harness.data.corpus_schema import GEOMETRY_KEYS, META_KEY, SCHEMA, Corpus, CorpusRow, Summary
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.parquet import one_chunk, open_file, read_row_group, schema_metadata, to_numpy
from harness.data.schemas import CorpusMeta, CorpusSummary, Provenance, validate


class CorpusReader:
    """A corpus file, checked up front (columns, metadata, geometry), read row group by row group.

    ``require_meta=False`` is for imports of engine captures that may not carry the metadata.
    """

    def __init__(self, path: str | Path, geometry: Geometry, require_meta: bool = True) -> None:
        self.path, self.g = Path(path), geometry
        self.file = open_file(self.path, "corpus file", CorpusError)
        names = self.file.schema_arrow.names
        missing = [f.name for f in SCHEMA if f.name not in names]
        if missing:
            raise CorpusError(f"{self.path}: not a corpus: missing column {missing[0]!r} (see docs/corpus.md)")
        raw = schema_metadata(self.file, META_KEY, self.path, "corpus", CorpusError)
        if raw is None:
            if require_meta:
                raise CorpusError(
                    f"{self.path}: no {META_KEY.decode()!r} metadata: the geometry the corpus was cut "
                    "for is unknown (import an engine capture with `harness corpus capture`)"
                )
            self.meta: CorpusMeta | None = None
        else:
            self.meta = validate(CorpusMeta, raw, f"{self.path}: metadata {META_KEY.decode()!r}", CorpusError)
            for key in GEOMETRY_KEYS:
                if getattr(self.meta, key) != getattr(geometry, key):
                    raise CorpusError(
                        f"{self.path}: corpus was cut for {key}={getattr(self.meta, key)}, the model needs "
                        f"{getattr(geometry, key)} (cut it for this model: corpus synth/wav --model ...)"
                    )
        if self.file.metadata.num_rows == 0:
            raise CorpusError(f"{self.path}: corpus holds no blocks")

    def __len__(self) -> int:
        return int(self.file.metadata.num_rows)

    def ids(self) -> list[str]:
        out: list[str] = []
        for i in range(self.file.metadata.num_row_groups):
            t = read_row_group(self.file, i, self.path, "corpus", CorpusError, columns=["block_id"])  # a column name
            out += t.column(0).to_pylist()
        return out

    def rows(self, keep: Collection[str] | None = None) -> Iterator[CorpusRow]:
        """Every block (validated), its source and provenance, in file order; refuses the first bad row.

        ``keep``: only row groups holding one of these ids are read and decoded (a shard of
        consecutive blocks reads its own few groups, not the whole corpus); the caller filters rows.
        The next row group is read and validated in a thread while the caller works on this one."""
        for rows, error in prefetch(self._groups(keep), name="corpus-reader"):
            yield from rows
            if error is not None:
                raise error

    def _groups(self, keep: Collection[str] | None) -> Iterator[tuple[list[CorpusRow], BaseException | None]]:
        """Each row group's rows, and the error that stopped it (the rows before it still count)."""
        seen: set[str] = set()
        row = 0
        for i in range(self.file.metadata.num_row_groups):
            rows: list[CorpusRow] = []
            try:
                if keep is not None:
                    ids = read_row_group(self.file, i, self.path, "corpus", CorpusError, columns=["block_id"])
                    if not any(b in keep for b in ids.column(0).to_pylist()):
                        row += ids.num_rows
                        continue
                table = read_row_group(self.file, i, self.path, "corpus", CorpusError, columns=[f.name for f in SCHEMA])
                for item in _table_rows(table, self.g, str(self.path), row, seen):
                    rows.append(item)
            except HarnessError as exc:
                yield rows, exc
                return
            yield rows, None
            row += table.num_rows

    def __iter__(self) -> Iterator[Block]:
        for block, _, _ in self.rows():
            yield block

    def validate(self) -> CorpusSummary:
        """One pass over every row: refuse the corpus whole at its first bad row; its summary."""
        s = Summary(self.g)
        for block, source, _ in self.rows():
            s.add(block, source)
        return s.result()


def read_corpus(path: str | Path, geometry: Geometry, require_meta: bool = True) -> Corpus:
    """The whole corpus in memory (small corpora: tests, capture imports)."""
    reader = CorpusReader(path, geometry, require_meta)
    return Corpus.collect(reader.rows(), reader.meta)


def _table_rows(table: pa.Table, geometry: Geometry, where: str, first_row: int, seen: set[str]) -> Iterator[CorpusRow]:
    ids = table.column("block_id").to_pylist()
    sources = table.column("source").to_pylist()
    provenance_raw = table.column("provenance").to_pylist()
    spans, offsets, valids = (_lists(table, name, where, first_row, ids) for name in ("span", "offsets", "valid"))
    for j, block_id in enumerate(ids):
        i = first_row + j
        for name, value in (
            ("block_id", block_id),
            ("span", spans[j]),
            ("offsets", offsets[j]),
            ("valid", valids[j]),
            ("provenance", provenance_raw[j]),
        ):
            if value is None:
                raise CorpusError(f"{where}: row {i} (block {block_id!r}) has a null {name}")
        if block_id in seen:
            raise CorpusError(f"{where}: block id {block_id!r} appears twice (row {i})")
        seen.add(block_id)
        try:
            block = Block.create(block_id, Op.SEGMENTATION, spans[j], offsets[j], valids[j], geometry)
        except BlockError as exc:
            raise CorpusError(f"{where}: corpus refused at row {i}: {exc}") from None
        try:
            prov = json.loads(provenance_raw[j])
        except json.JSONDecodeError:
            raise CorpusError(f"{where}: row {i} (block {block_id!r}): provenance is not JSON") from None
        validate(Provenance, prov, f"{where}: row {i} (block {block_id!r}): provenance", CorpusError)
        yield CorpusRow(block, sources[j] or "", prov)


_FIELD = {"span": "SPAN", "offsets": "OFFSETS", "valid": "VALID"}


def _lists(table: pa.Table, name: str, where: str, first_row: int, ids: list[str | None]) -> list[np.ndarray | None]:
    """A list column as numpy arrays (dtype as stored: Block.create names a wrong one); a null
    inside a list is named as such (not reported as the float dtype numpy would turn it into)."""
    column = one_chunk(table.column(name))
    if not pa.types.is_list(column.type) and not pa.types.is_large_list(column.type):
        raise CorpusError(f"{where}: column {name!r} has type {column.type}, expected a list")
    # (no boolean array unless there are nulls: pyarrow converts one through pandas, a 1 s import)
    nulls = np.asarray(column.is_null().to_pylist(), dtype=bool) if column.null_count else np.zeros(len(column), bool)
    offsets = to_numpy(column.offsets)  # index into .values, which ignores slicing
    values = column.values
    if values.null_count:
        inner = np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0]
        j = int(np.searchsorted(offsets, inner, side="right") - 1)
        raise BlockError(
            str(ids[j]),
            f"{_FIELD[name]}[{int(inner - offsets[j])}]",
            None,
            f"null value inside the list (row {first_row + j} of {where})",
        )
    try:
        flat = to_numpy(values)  # no nulls (checked above): a view of Arrow's buffer, not a copy
    except pa.ArrowException:
        flat = np.asarray(values.to_pylist(), dtype=object)
    return [None if nulls[i] else flat[offsets[i] : offsets[i + 1]] for i in range(len(column))]  # views
