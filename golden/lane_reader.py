"""Reading a lane's Parquet tables back (the layout: :mod:`golden.tables`), in row groups (memory: a few
groups of blocks).

Every file is checked before any row is served: its schema and metadata against the layout, and the OP
files' row groups against each other (row group i of every OP file holds the same blocks). Block ids are
read dictionary-encoded, values as views of Arrow's buffers.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from golden.tables import META_KEY, _schema, op_file
from harness.base.errors import GoldenError
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs
from harness.data.parquet import check_schema, one_chunk, open_file, read_row_group, schema_metadata, to_numpy
from harness.data.schemas import OutputsMeta, validate


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
            path = self.directory / op_file(op)  # read_dictionary: a list of Arrow column names
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
            for i in range(self.groups):  # columns: the Arrow column read, by its name
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
