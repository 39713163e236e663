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
shrink by under 10 %). Written here (:class:`LaneWriter`, :class:`BackgroundWriter`); read by
:class:`golden.lane_reader.LaneReader`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal, cast

import numpy as np
import pyarrow as pa

from harness.base.overlap import WriteBehind
from harness.data.arrow_build import fixed_lists, numeric, strings
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs
from harness.data.parquet import COMPRESSION, ParquetSink, items
from harness.data.schemas import OutputsMeta

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
        decided = {}
        if self.decisions:
            top_class, top_margin = seg.decisions()
            decided = {
                "top_class": _fixed(top_class.astype(np.int8), g.frames_per_window, pa.int8()),
                "top_margin": _fixed(top_margin, g.frames_per_window, pa.float32()),
            }
        columns = {
            "block_id": strings([i for i in seg.block_ids for _ in range(n)]),
            "window": numeric(np.tile(np.arange(n, dtype=np.int32), b), pa.int32()),
            "valid": numeric(seg.valid.reshape(-1).astype(np.int32, copy=False), pa.int32()),
            "logprobs": _fixed(seg.logprobs.reshape(-1), g.frames_per_window * g.classes, pa.float32()),
            **decided,
        }
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
    """``LaneWriter.write`` behind a bounded queue (:class:`harness.base.overlap.WriteBehind`), so
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
