"""Language-neutral test vectors of packing: requests and their one correct answer, as JSON files.

An engine's packer can check itself against these in its own ``cargo test``, without the wire
protocol or Arrow (``harness laws --export-vectors DIR``; docs/packer-protocol.md, "Test
vectors"). Every answer is the harness's own packer's (:func:`harness.packers.packing.pack` and
``unpack``), so the vectors say exactly what the laws judge, and :func:`check_vector` re-derives
each one from its request (the test of the export).

One file per vector, ``sessions.json`` (what a packer's message loop answers, in and out of
place: :mod:`harness.packers.session_vectors`) and ``index.json`` (file names, sha256, what each
covers). A vector holds the request's blocks, the packed request (tensors, layout, Triton's
ragged index tensors), the output of :data:`FUNCTION` computed on the packed request (what ``unpack`` is given) and the
expected unpacked outputs per real block. Numbers are JSON numbers: float32 values written as
their exact decimal (parse as f64, cast to f32: exact), integers as integers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness import __version__
from harness.base.destinations import check_output_dir
from harness.base.errors import OutputError, check_interrupted, committed
from harness.base.folder_swap import remove_stale_stages, swap_in
from harness.base.fsio import (
    dir_mode,
    fault,
    file_mode,
    fsync_path,
    make_dirs,
    missing_dirs,
    os_failure,
    remove_empty,
    temp_sibling,
)
from harness.data.blocks import NO_ROWS, Block, BlockRows
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.schemas.base import validate
from harness.data.schemas.vectors import (
    FORMAT,
    SessionsEntry,
    Vector,
    VectorBlock,
    VectorEntry,
    VectorGeometry,
    VectorIndex,
    VectorPacked,
    VectorPart,
    VectorRequest,
    VectorSegment,
    VectorUnpack,
)
from harness.packers import session_vectors
from harness.packers.packing import harness_identity, pack, unpack
from harness.packers.vector_function import FUNCTION, FUNCTION_NAME, window_function
from harness.packers.wire import VERSION, geometry_meta


def cases(geometry: Geometry) -> list[tuple[str, str, list[Block], int | None]]:
    """(name, what it covers, blocks, pad_to) of every vector: OP 0/1/2, 1 and many blocks, padding, empty
    blocks and windows, windows at the very end of a span, blocks of 0 voiceprint rows, speakers unknown."""
    rng = np.random.default_rng(2024)
    n, W, F = geometry.windows_per_block, geometry.window_samples, geometry.frames_per_window

    def block(
        bid: str,
        op: int,
        span_len: int,
        rows: int = 0,
        empty: bool = False,
        at_end: bool = False,
        speakers: bool = True,
    ) -> Block:
        span = np.round(rng.standard_normal(span_len), 3).astype(np.float32)
        offsets = np.sort(rng.integers(0, span_len, n)).astype(np.int64)
        valid = np.minimum(rng.integers(0, W + 1, n), span_len - offsets).astype(np.int32)
        if at_end:  # the last window starts at the span's end (VALID 0), the one before ends exactly there
            offsets[-1], valid[-1] = span_len, 0
            offsets[-2] = span_len - min(W, span_len)
            valid[-2] = span_len - offsets[-2]
            offsets[:-2] = np.minimum(offsets[:-2], offsets[-2])  # still non-decreasing, VALID still inside
        if empty:
            valid[:] = 0
        voiceprint = NO_ROWS
        if op:
            voiceprint = BlockRows(
                np.round(rng.random((rows, F)), 3).astype(np.float32),
                rng.integers(0, n, rows).astype(np.int32),
                rng.integers(0, geometry.speakers, rows).astype(np.int32) if speakers else None,
            )
        return Block.create(bid, op, span, offsets, valid, geometry, voiceprint)

    out: list[tuple[str, str, list[Block], int | None]] = [
        ("op0-one-block", "OP 0, one block, not padded", [block("a", 0, W + 7)], None),
        (
            "op0-many-blocks",
            "OP 0, 6 blocks of ragged spans (1 sample to 3 windows)",
            [block(f"b{i}", 0, s) for i, s in enumerate((1, W, 3 * W, 5, 2 * W + 1, W // 2))],
            None,
        ),
        (
            "op0-padded",
            "OP 0, 2 blocks padded to k=5 (padding: empty span, VALID 0, offsets 0, dropped on unpack)",
            [block("p0", 0, W), block("p1", 0, W + 3)],
            5,
        ),
        (
            "op0-pad-to-k",
            "OP 0, 3 blocks with pad_to=3 (no padding block added)",
            [block(f"k{i}", 0, W + i) for i in range(3)],
            3,
        ),
        (
            "op0-empty-blocks",
            "OP 0, blocks whose every window is empty (VALID 0) between blocks with audio",
            [block("e0", 0, W), block("e1", 0, 9, empty=True), block("e2", 0, 1, empty=True), block("e3", 0, W + 1)],
            None,
        ),
        (
            "op0-windows-at-span-end",
            "OP 0, windows starting at the very end of the span (VALID 0) and ending on it",
            [block(f"z{i}", 0, s, at_end=True) for i, s in enumerate((W, 2 * W + 5, 1))],
            None,
        ),
        ("op1-one-block", "OP 1, one block of 5 rows", [block("v", 1, 2 * W, rows=5)], None),
        (
            "op1-many-blocks",
            "OP 1, 5 blocks, 0 to 12 rows each",
            [block(f"m{i}", 1, W + 9 * i, rows=r) for i, r in enumerate((3, 0, 12, 1, 7))],
            None,
        ),
        (
            "op1-zero-rows",
            "OP 1, blocks of 0 voiceprint rows only (WEIGHTS [0, F], IDX [0])",
            [block(f"r{i}", 1, W + i) for i in range(3)],
            None,
        ),
        (
            "op1-padded-speakers-unknown",
            "OP 1, speakers null in one block (the packed speakers is null), padded to k=4",
            [block("s0", 1, W, rows=2), block("s1", 1, W, rows=3, speakers=False)],
            4,
        ),
        (
            "op2-many-blocks",
            "OP 2, 4 blocks, one of them empty (VALID 0, rows on empty windows)",
            [
                block("t0", 2, W, rows=4),
                block("t1", 2, 3, rows=2, empty=True),
                block("t2", 2, 2 * W, rows=6),
                block("t3", 2, W, rows=1, at_end=True),
            ],
            None,
        ),
        ("op2-padded", "OP 2, 1 block padded to k=3", [block("u", 2, W + 1, rows=4)], 3),
    ]
    return out


def _list(a: np.ndarray | None) -> list[Any] | None:
    return None if a is None else a.tolist()


def _code(op: Op) -> Literal[0, 1, 2]:
    """An OP as the vectors' schema declares it."""
    return 0 if op is Op.SEGMENTATION else 1 if op is Op.VOICEPRINT else 2


def vector(name: str, what: str, blocks: list[Block], pad_to: int | None, geometry: Geometry) -> Vector:
    """The vector of one case: the request, the harness packer's answer, the unpack input and output."""
    packed = pack(blocks, pad_to=pad_to)
    output = window_function(packed)
    parts = unpack(packed, {packed.op.output_name: output})
    return Vector(
        vector_format=FORMAT,
        wire_version=VERSION,
        name=name,
        what=what,
        geometry=VectorGeometry(**geometry_meta(geometry)),
        request=VectorRequest(
            pad_to=pad_to,
            blocks=[
                VectorBlock(
                    block_id=b.id,
                    OP=_code(b.op),
                    SPAN=b.span.tolist(),
                    OFFSETS=b.offsets.tolist(),
                    VALID=b.valid.tolist(),
                    WEIGHTS=_list(b.weights),
                    IDX=_list(b.idx),
                    speakers=_list(b.speakers),
                )
                for b in blocks
            ],
        ),
        packed=VectorPacked(
            OP=_code(packed.op),
            k=packed.k,
            SPAN=packed.span.tolist(),
            OFFSETS=packed.offsets.tolist(),
            VALID=packed.valid.tolist(),
            WEIGHTS=_list(packed.weights),
            IDX=_list(packed.idx),
            speakers=_list(packed.speakers),
            segments=[
                VectorSegment(
                    block_id=s.block_id,
                    padding=s.padding,
                    span_start=s.span_start,
                    span_length=s.span_length,
                    window_start=s.window_start,
                    windows=s.windows,
                    row_start=s.row_start,
                    rows=s.rows,
                )
                for s in packed.segments
            ],
            ragged_index={k: v.reshape(-1).tolist() for k, v in packed.ragged_index().items()},
        ),
        unpack=VectorUnpack(
            function=FUNCTION_NAME,
            output="SEGMENTATION" if packed.op is Op.SEGMENTATION else "EMBEDDINGS",
            dtype="float32",
            shape=list(output.shape),
            data=output.reshape(-1).tolist(),
        ),
        unpacked=[
            VectorPart(block_id=bid, shape=list(p.shape), data=p.reshape(-1).tolist())
            for bid, p in zip(packed.block_ids, parts, strict=True)
        ],
    )


def check_vector(data: Mapping[str, object], geometry: Geometry) -> None:
    """Re-derive a vector (``data``: its JSON) from its request with the harness's packer; AssertionError naming
    what differs.

    ``data`` is first validated against its declared schema (SchemaError: one line)."""
    # the name is looked up in the raw JSON only to name the file in the refusal, before it is typed
    v: Vector = validate(Vector, data, f"test vector {data.get('name')!r}")
    blocks = [
        Block.create(
            b.block_id,
            b.OP,
            np.array(b.SPAN, np.float32),
            np.array(b.OFFSETS, np.int64),
            np.array(b.VALID, np.int32),
            geometry,
            BlockRows(
                None if b.WEIGHTS is None else np.array(b.WEIGHTS, np.float32).reshape(-1, geometry.frames_per_window),
                None if b.IDX is None else np.array(b.IDX, np.int32),
                None if b.speakers is None else np.array(b.speakers, np.int32),
            ),
        )
        for b in v.request.blocks
    ]
    want = vector(v.name, v.what, blocks, v.request.pad_to, geometry)
    for key, have, should in (
        ("packed", v.packed, want.packed),
        ("unpack", v.unpack, want.unpack),
        ("unpacked", v.unpacked, want.unpacked),
        ("geometry", v.geometry, want.geometry),
        ("wire_version", v.wire_version, want.wire_version),
    ):
        assert have == should, f"vector {v.name!r}: {key!r} is not what the harness's packer answers"
    # the unpacked answer is the function of each block alone: the property the laws judge
    for block, part in zip(blocks, v.unpacked, strict=True):
        alone = window_function(pack([block]))
        assert part.block_id == block.id and part.data == alone.reshape(-1).tolist(), (
            f"vector {v.name!r}: block {block.id!r} unpacked is not the function of the block alone"
        )


def export(directory: Path, geometry: Geometry, replace: bool = False) -> list[str]:
    """Write every vector, sessions.json and index.json into ``directory``, all at once or not at all.

    ``directory`` is new or empty, or (``replace``) a folder of exported vectors and nothing else. The files
    are written in a temporary folder beside it, then renamed in one step (over an empty folder) or swapped
    with the old vectors in one step (:mod:`harness.base.folder_swap`); on any failure nothing changes and
    nothing is left. Returns the lines to print.
    """
    final = Path(directory)
    if final.exists() and not final.is_dir():
        raise OutputError(f"{final}: cannot write test vectors: it is a file, not a folder")
    target = final.resolve() if final.is_symlink() else final  # a link to the folder keeps pointing at the new one
    previous = None
    if target.is_dir() and any(target.iterdir()):
        if not replace:
            raise OutputError(
                f"{final}: cannot write test vectors: the folder is not empty "
                f"({len(list(target.iterdir()))} entries); give a new or empty folder, or --replace to replace "
                "the vectors it holds in one step"
            )
        previous = replaceable(final, target)
    check_output_dir(target, "test vectors folder")  # not inside a golden or run, writable: before any work
    remove_stale_stages(target)
    tmp = temp_sibling(target)
    created = missing_dirs(target.parent)
    index = []
    try:
        make_dirs(target.parent)
        tmp.mkdir()
        for name, what, blocks, pad_to in cases(geometry):
            text = json.dumps(vector(name, what, blocks, pad_to, geometry).model_dump(mode="json"), indent=1) + "\n"
            _write(tmp / f"{name}.json", text)
            index.append(
                VectorEntry(file=f"{name}.json", name=name, what=what, sha256=hashlib.sha256(text.encode()).hexdigest())
            )
            fault(f"vectors:{name}")
        requests = {name: (blocks, pad_to) for name, _, blocks, pad_to in cases(geometry)}
        sessions = session_vectors.sessions(requests, geometry)
        text = json.dumps(sessions.model_dump(mode="json"), indent=1) + "\n"
        _write(tmp / session_vectors.FILE, text)
        table = VectorIndex(
            vector_format=FORMAT,
            wire_version=VERSION,
            harness_version=__version__,
            derived_by=harness_identity(),
            geometry=VectorGeometry(**geometry_meta(geometry)),
            function=FUNCTION,
            vectors=index,
            sessions=SessionsEntry(file=session_vectors.FILE, sha256=hashlib.sha256(text.encode()).hexdigest()),
        )
        _write(tmp / "index.json", json.dumps(table.model_dump(mode="json"), indent=1) + "\n")
        os.chmod(tmp, dir_mode())
        if previous is not None:
            swap_in(tmp, target, "test vectors")
        else:
            check_interrupted()
            fault("rename:vectors")
            os.rename(tmp, target)  # replaces an empty folder in one step
            fsync_path(target.parent)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        raise os_failure(final, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        raise
    committed(final, "the packing test vectors")
    lines = [
        f"wrote {len(index)} packing test vectors, {len(sessions.sessions)} session vectors "
        f"({session_vectors.FILE}) and index.json to {final} (wire version {VERSION}, answers of "
        f"{harness_identity()})"
    ]
    if previous is not None:
        lines.append(f"replaced, in one step, the vectors {final} held: {previous}")
    return lines


def replaceable(final: Path, target: Path) -> str:
    """What an existing vectors folder holds, in words; refused (one line, nothing changes) unless it is a
    folder of exported vectors and nothing else: its index.json lists every other file in it. --replace is
    not a way to empty a folder: a mistyped path loses nothing."""
    index = target / "index.json"
    entries = sorted(p.name for p in target.iterdir())
    # read loosely on purpose, by key: any index.json (of this format or another) that names its files will do,
    # and whatever lacks these keys is "not a vectors index", refused below with the lookup that failed
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
        listed = {str(v["file"]) for v in data["vectors"]}  # a loose read, as said above
        sessions = data.get("sessions") or {}  # a loose read, as said above
        listed |= {"index.json", str(sessions.get("file", session_vectors.FILE))}  # a loose read, as said above
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        why = "it has no index.json" if not index.is_file() else f"its index.json is not a vectors index ({exc!r})"
        raise OutputError(
            f"{final}: not replaced: {why}, so it is not a folder of exported vectors ({len(entries)} entries: "
            f"{', '.join(entries[:5])}{', ...' if len(entries) > 5 else ''}); --replace replaces only what "
            "`harness laws --export-vectors` wrote; nothing changed"
        ) from None
    other = [name for name in entries if name not in listed]
    if other:
        raise OutputError(
            f"{final}: not replaced: {len(other)} of its {len(entries)} entries are not vectors of its index.json "
            f"({', '.join(other[:5])}{', ...' if len(other) > 5 else ''}) and would be lost; move them out of "
            "the folder first; nothing changed"
        )
    return (
        # the loosely read index.json (above): whatever it says of its format, by key
        f"{len(entries)} files of vector format {data.get('vector_format')!r}, answers of {data.get('derived_by', '?')}"
    )


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, file_mode())
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
