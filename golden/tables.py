"""Lane outputs <-> Parquet tables, streamed in row groups (memory: one group of blocks).

The files are meant to be opened by anyone: pandas, polars and duckdb read them with no help
from this project. Layout (format 2):

``op0.parquet``: one row per (block, window)
    block_id string, window int32, valid int32,
    logprobs fixed_size_list<float32, frames*classes>   row-major [frame, class]
    top_class fixed_size_list<int8, frames>             golden only: argmax class per frame
    top_margin fixed_size_list<float32, frames>         golden only: top-1 minus top-2 per frame

``op1.parquet`` / ``op2.parquet``: one row per voiceprint row (block, window, speaker)
    block_id string, row int32 (position in the block's request), window int32 (IDX),
    speaker int32, weights fixed_size_list<float32, frames> (WEIGHTS),
    embedding fixed_size_list<float32, embedding_dim>

Row group i of every OP file holds the same blocks (a group may hold no voiceprint row), so a
reader finds a block's rows in every file from the OP 0 index alone. Schema metadata
``harness.data.outputs`` holds JSON {"format", "op", "frames", "classes", "embedding_dim", "decisions"}.

List items are non-nullable (files of earlier format-2 writers, with nullable items, read the
same); a golden's files are zstd, a run's uncompressed (read once, right after; float outputs
shrink by under 10 %). Block ids are read dictionary-encoded, values as views of Arrow's buffers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.data.arrow_build import fixed_lists, numeric, strings
from harness.data.errors import GoldenError
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs
from harness.data.overlap import WriteBehind
from harness.data.parquet import (
    COMPRESSION,
    ParquetSink,
    check_schema,
    items,
    one_chunk,
    open_file,
    read_row_group,
    schema_metadata,
    to_numpy,
)
from harness.data.schemas import OutputsMeta, validate

FORMAT: Final = 2
META_KEY = b"harness.data.outputs"
GROUP_BLOCKS = 32  # blocks per row group: memory of a reader or writer is about this many blocks


def op_file(op: Op) -> str:
    return f"op{int(op)}.parquet"


def segmentation_schema(geometry: Geometry, decisions: bool) -> pa.Schema:
    fields = [
        pa.field("block_id", pa.string(), nullable=False),
        pa.field("window", pa.int32(), nullable=False),
        pa.field("valid", pa.int32(), nullable=False),
        pa.field(
            "logprobs", pa.list_(items(pa.float32()), geometry.frames_per_window * geometry.classes), nullable=False
        ),
    ]
    if decisions:
        fields += [
            pa.field("top_class", pa.list_(items(pa.int8()), geometry.frames_per_window), nullable=False),
            pa.field("top_margin", pa.list_(items(pa.float32()), geometry.frames_per_window), nullable=False),
        ]
    return pa.schema(fields)


def voiceprint_schema(geometry: Geometry) -> pa.Schema:
    return pa.schema(
        [
            pa.field("block_id", pa.string(), nullable=False),
            pa.field("row", pa.int32(), nullable=False),
            pa.field("window", pa.int32(), nullable=False),
            pa.field("speaker", pa.int32(), nullable=False),
            pa.field("weights", pa.list_(items(pa.float32()), geometry.frames_per_window), nullable=False),
            pa.field("embedding", pa.list_(items(pa.float32()), geometry.embedding_dim), nullable=False),
        ]
    )


def _schema(op: Op, geometry: Geometry, decisions: bool) -> pa.Schema:
    schema = segmentation_schema(geometry, decisions) if op is Op.SEGMENTATION else voiceprint_schema(geometry)
    meta = OutputsMeta(
        format=FORMAT,
        op=cast(Literal[0, 1, 2], int(op)),  # true: Op's members are 0, 1, 2
        frames=geometry.frames_per_window,
        classes=geometry.classes,
        embedding_dim=geometry.embedding_dim,
        decisions=decisions and op is Op.SEGMENTATION,
    )
    return schema.with_metadata({META_KEY: meta.model_dump_json().encode()})


# ------------------------------------------------------------------------------------------ writing


class LaneWriter:
    """Writes one lane (a golden, or one lane of a run) as one file per OP, row group by row group.

    ``decisions`` stores the per-frame argmax and top-two margin (a golden's: scoring reads them
    instead of recomputing); runs do not need them.
    """

    def __init__(
        self,
        directory: Path,
        geometry: Geometry,
        ops: Sequence[Op],
        decisions: bool,
        compression_level: int | None = None,
        group_blocks: int = GROUP_BLOCKS,
        compression: str = COMPRESSION,
    ) -> None:
        self.directory, self.g, self.ops = Path(directory), geometry, tuple(ops)
        self.decisions, self.group_blocks = decisions, group_blocks
        self.sinks: dict[Op, ParquetSink] = {}
        self.pending: list[LaneOutputs] = []
        self.pending_blocks = 0
        try:
            for op in self.ops:
                self.sinks[op] = ParquetSink(
                    self.directory / op_file(op), _schema(op, geometry, decisions), compression_level, compression
                )
        except BaseException:
            self.abort()
            raise

    def write(self, batch: LaneOutputs) -> None:
        self.pending.append(batch)
        self.pending_blocks += len(batch.segmentation.block_ids)
        if self.pending_blocks >= self.group_blocks:
            self._flush()

    def close(self) -> dict[str, dict]:
        """The manifest entry (sha256, bytes, rows) of every file written, by file name."""
        try:
            self._flush()
            entries: dict[str, dict] = {}
            for op, sink in self.sinks.items():
                sink.close()
                assert sink.entry is not None  # close() sets it
                entries[op_file(op)] = sink.entry
            return entries
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        for sink in self.sinks.values():
            sink.abort()

    def _flush(self) -> None:
        if not self.pending:
            return
        batch = LaneOutputs.concat(self.pending) if len(self.pending) > 1 else self.pending[0]
        self.pending, self.pending_blocks = [], 0
        self.sinks[Op.SEGMENTATION].write(self._segmentation_table(batch.segmentation))
        for op in self.ops:
            if op.is_voiceprint:
                vp = batch.voiceprint.get(op) or VoiceprintOutputs.empty(op, self.g)
                self.sinks[op].write(self._voiceprint_table(vp))

    def _segmentation_table(self, seg: SegmentationOutputs) -> pa.Table:
        g = self.g
        b, n = seg.valid.shape
        columns = {
            "block_id": strings([i for i in seg.block_ids for _ in range(n)]),
            "window": numeric(np.tile(np.arange(n, dtype=np.int32), b), pa.int32()),
            "valid": numeric(seg.valid.reshape(-1).astype(np.int32, copy=False), pa.int32()),
            "logprobs": _fixed(seg.logprobs.reshape(-1), g.frames_per_window * g.classes, pa.float32()),
        }
        if self.decisions:
            top_class, top_margin = seg.decisions()
            columns["top_class"] = _fixed(top_class.astype(np.int8), g.frames_per_window, pa.int8())
            columns["top_margin"] = _fixed(top_margin, g.frames_per_window, pa.float32())
        return pa.Table.from_pydict(columns, schema=self.sinks[Op.SEGMENTATION].schema)

    def _voiceprint_table(self, vp: VoiceprintOutputs) -> pa.Table:
        g = self.g
        return pa.Table.from_pydict(
            {
                "block_id": strings(vp.block_ids),
                "row": numeric(vp.row.astype(np.int32, copy=False), pa.int32()),
                "window": numeric(vp.window.astype(np.int32, copy=False), pa.int32()),
                "speaker": numeric(vp.speaker.astype(np.int32, copy=False), pa.int32()),
                "weights": _fixed(vp.weights.reshape(-1), g.frames_per_window, pa.float32()),
                "embedding": _fixed(vp.embedding.reshape(-1), g.embedding_dim, pa.float32()),
            },
            schema=self.sinks[vp.op].schema,
        )


class BackgroundWriter:
    """``LaneWriter.write`` behind a bounded queue (:class:`harness.data.overlap.WriteBehind`), so
    compression and disk I/O overlap the next network call (pyarrow releases the GIL while it
    compresses and writes). A failure in the thread is raised by the next :meth:`write` or by
    :meth:`close`, and drops the lane's files."""

    def __init__(self, writer: LaneWriter, depth: int = 2) -> None:
        self.writer = writer
        self._behind: WriteBehind[LaneOutputs] = WriteBehind(writer.write, depth=depth, name="lane-writer")

    def write(self, batch: LaneOutputs) -> None:
        try:
            self._behind.submit(batch)
        except BaseException:
            self.writer.abort()
            raise

    def close(self) -> dict[str, dict]:
        try:
            self._behind.close()
        except BaseException:
            self.writer.abort()
            raise
        return self.writer.close()

    def abort(self) -> None:
        self._behind.abort()
        self.writer.abort()


def _fixed(flat: np.ndarray, size: int, kind: pa.DataType) -> pa.Array:
    return fixed_lists(flat, size, kind)  # no pa.array: it imports pandas (harness.data.arrow_build)


# ------------------------------------------------------------------------------------------ reading


class LaneReader:
    """Reads one lane's files: checked up front (schema, metadata, row-group alignment), then served
    row group by row group, in file order (:meth:`batches`) or for any blocks (:meth:`select`).

    Memory: the OP 0 block index (block ids only) and at most ``cache`` row groups per file.
    """

    def __init__(
        self, directory: Path, geometry: Geometry, ops: Sequence[Op], decisions: bool, where: str, cache: int = 2
    ) -> None:
        self.directory, self.g, self.ops, self.where = Path(directory), geometry, tuple(ops), where
        self.decisions = decisions
        self.files: dict[Op, pq.ParquetFile] = {}
        for op in self.ops:
            path = self.directory / op_file(op)
            f = open_file(path, f"{where} OP {int(op)} output file", GoldenError, read_dictionary=["block_id"])
            check_schema(f, _schema(op, geometry, decisions), path, f"{where} OP {int(op)} output file", GoldenError)
            meta = schema_metadata(f, META_KEY, path, "output", GoldenError)
            validate(OutputsMeta, meta, f"{path}: metadata {META_KEY.decode()}", GoldenError)
            self.files[op] = f
        groups = {op: f.metadata.num_row_groups for op, f in self.files.items()}
        if len(set(groups.values())) > 1:
            raise GoldenError(f"{where}: OP files hold different numbers of row groups {groups} (not written together)")
        self.groups = groups[Op.SEGMENTATION]
        self._index: dict[str, int] | None = None
        self._order: list[str] | None = None
        self._members: list[list[str]] = []
        self._cache: OrderedDict[int, LaneOutputs] = OrderedDict()
        self._cache_size = cache

    # -- index ------------------------------------------------------------------------------
    def block_ids(self) -> list[str]:
        """Every block, in file order (reads only the OP 0 block_id column)."""
        if self._order is None:
            order, index = [], {}
            members: list[list[str]] = [[] for _ in range(self.groups)]
            n = self.g.windows_per_block
            path = self.directory / op_file(Op.SEGMENTATION)
            for i in range(self.groups):
                column = read_row_group(
                    self.files[Op.SEGMENTATION], i, path, "OP 0 output file", GoldenError, columns=["block_id"]
                ).column(0)
                if len(column) % n:
                    raise GoldenError(
                        f"{path}: row group {i} holds {len(column)} rows: not whole blocks of {n} windows"
                    )
                for b in _ids(column)[::n].tolist():
                    if b in index:
                        raise GoldenError(f"{path}: block {b!r} appears twice")
                    index[b] = i
                    order.append(b)
                    members[i].append(b)
            self._order, self._index, self._members = order, index, members
        return list(self._order)

    # -- serving ----------------------------------------------------------------------------
    def batches(self) -> Iterator[LaneOutputs]:
        """Every row group in file order (a row group is about GROUP_BLOCKS blocks)."""
        for i in range(self.groups):
            yield self._group(i, cache=False)

    def select(self, block_ids: Sequence[str]) -> LaneOutputs:
        """The outputs of ``block_ids`` (in that order), from whichever row groups hold them."""
        parts = [self._group(gi, cache=True) for gi in self._groups_of(block_ids)]
        whole = LaneOutputs.concat(parts) if len(parts) > 1 else parts[0]
        return whole if whole.segmentation.block_ids == list(block_ids) else whole.select(list(block_ids))

    def read_ahead(self, block_ids: Sequence[str]) -> None:
        """Read the row groups holding ``block_ids`` into the cache now (at most ``cache`` of them), so that a
        later :meth:`select` of them costs no reading: the live score reads its next batch while the lanes run,
        not after the device's last call."""
        for gi in self._groups_of(block_ids)[: self._cache_size]:
            self._group(gi, cache=True)

    def select_voiceprints(self, block_ids: Sequence[str]) -> dict[Op, VoiceprintOutputs]:
        """The voiceprint rows of ``block_ids`` only (their OP 0 outputs not even read): the WEIGHTS/IDX
        isolated mode replays for a group of blocks."""
        needed = self._groups_of(block_ids)
        wanted = np.array(list(block_ids), dtype=str)
        out = {}
        for op in self.ops:
            if not op.is_voiceprint:
                continue
            v = VoiceprintOutputs.concat([self._read_voiceprint(op, gi, set(self._members[gi])) for gi in needed])
            keep = np.isin(v.block_ids.astype(str), wanted)
            out[op] = (
                v
                if keep.all()
                else VoiceprintOutputs(
                    op,
                    v.block_ids[keep],
                    v.row[keep],
                    v.window[keep],
                    v.speaker[keep],
                    v.weights[keep],
                    v.embedding[keep],
                )
            )
        return out

    def _groups_of(self, block_ids: Sequence[str]) -> list[int]:
        """The row groups holding ``block_ids``, in first-use order; refuses an unknown block."""
        self.block_ids()
        assert self._index is not None
        needed: list[int] = []
        for b in block_ids:
            if b not in self._index:
                raise GoldenError(f"{self.where}: has no block {b!r}")
            gi = self._index[b]
            if gi not in needed:
                needed.append(gi)
        return needed

    def _group(self, i: int, cache: bool) -> LaneOutputs:
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        out = self._read_group(i)
        if cache:
            self._cache[i] = out
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return out

    def _read_group(self, i: int) -> LaneOutputs:
        g, n = self.g, self.g.windows_per_block
        path = self.directory / op_file(Op.SEGMENTATION)
        t = read_row_group(self.files[Op.SEGMENTATION], i, path, "OP 0 output file", GoldenError)
        ids = _ids(t.column("block_id"))
        if ids.size % n:
            raise GoldenError(f"{path}: row group {i} holds {ids.size} rows: not whole blocks of {n} windows")
        block_ids = ids[::n]
        windows = _numpy(t.column("window"), np.int32).reshape(-1, n)
        if not (np.all(ids.reshape(-1, n) == block_ids[:, None]) and np.all(windows == np.arange(n))):
            raise GoldenError(f"{path}: row group {i}: rows are not whole blocks in window order")
        seg = SegmentationOutputs(
            block_ids.tolist(),
            _numpy(t.column("valid"), np.int32).reshape(-1, n),
            _flat(t.column("logprobs"), np.float32).reshape(-1, n, g.frames_per_window, g.classes),
        )
        if self.decisions:
            seg.set_decisions(
                _flat(t.column("top_class"), np.int8).astype(np.int64), _flat(t.column("top_margin"), np.float32)
            )
        members = set(seg.block_ids)
        return LaneOutputs(seg, {op: self._read_voiceprint(op, i, members) for op in self.ops if op.is_voiceprint})

    def _read_voiceprint(self, op: Op, i: int, members: set[str]) -> VoiceprintOutputs:
        """Row group ``i`` of one voiceprint file; ``members``: the blocks of OP 0's row group ``i``."""
        g = self.g
        vpath = self.directory / op_file(op)
        v = read_row_group(self.files[op], i, vpath, f"OP {int(op)} output file", GoldenError)
        block = _ids(v.column("block_id"))
        strays = sorted(set(np.unique(block.astype(str)).tolist()) - members) if block.size else []
        if strays:
            raise GoldenError(
                f"{vpath}: row group {i} holds rows of block {strays[0]!r}, which its OP 0 row group does not"
            )
        return VoiceprintOutputs(
            op=op,
            block_ids=block,
            row=_numpy(v.column("row"), np.int32),
            window=_numpy(v.column("window"), np.int32),
            speaker=_numpy(v.column("speaker"), np.int32),
            weights=_flat(v.column("weights"), np.float32).reshape(-1, g.frames_per_window),
            embedding=_flat(v.column("embedding"), np.float32).reshape(-1, g.embedding_dim),
        )


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    """A string column as an object array of str, each distinct id converted once (rows repeat
    their block's id: 8 windows, or several voiceprint rows)."""
    arr = one_chunk(column)
    if len(arr) == 0:
        return np.zeros(0, dtype=object)
    encoded = arr if pa.types.is_dictionary(arr.type) else arr.dictionary_encode()  # (read as dictionary)
    names = np.array(encoded.dictionary.to_pylist(), dtype=object)
    return names[to_numpy(encoded.indices)]


def _numpy(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    return np.ascontiguousarray(to_numpy(one_chunk(column)), dtype=dtype)


def _flat(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    """A fixed_size_list column's values, flat: a view of Arrow's buffer when it has no nulls."""
    return np.ascontiguousarray(to_numpy(one_chunk(column).flatten()), dtype=dtype)  # (nullable items: converted)
