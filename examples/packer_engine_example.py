#!/usr/bin/env python3
"""An external packer speaking the harness's wire protocol: a stand-in for the engine's (Rust) packer.

    harness laws --packer-cmd "python examples/packer_engine_example.py"

Standalone on purpose: numpy and pyarrow only, no ``harness`` import, so it is exactly what a
packer in another language has to do (docs/packer-protocol.md):

1. read one Arrow IPC stream from stdin; its schema metadata ``verb`` says ``hello``, ``pack``
   or ``unpack`` (the first message is always ``hello``: the handshake);
2. answer one Arrow IPC stream on stdout (``hello`` with ``packer_name`` and ``packer_version``,
   ``packed``, ``unpacked`` or ``error``), flush; a message out of place (a request before
   ``hello``, a second ``hello``), of another wire version or another verb gets an ``error``;
3. repeat until stdin ends; exit 0. Logs go to stderr: stdout carries the protocol only.

The geometry is read from each request's metadata (``windows_per_block``, ``weights_frames``),
never assumed or passed by a flag: a padding block has the geometry's windows and F.

Packing follows docs/models.md: SPAN is the concatenation of the blocks' spans; each block's
OFFSETS are shifted by the length of the spans before it, IDX by the number of windows before
it; VALID, WEIGHTS and speakers are concatenated; ``pad_to`` appends empty blocks (no audio,
VALID 0, no rows). It also emits Triton's ragged-batching index tensors for SPAN.

``--bug off-by-one`` shifts every block after the first one sample too far (a rebase bug);
``--bug leak`` lets every window run on for a whole window, into the next block's audio. Both
exist so the harness can be shown catching them (examples/packer_engine_defective.py).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

VERSION = "2"
NAME, PACKER_VERSION = "example-engine-packer", "1.0.0"
SEGMENT = pa.struct(
    [
        pa.field("block_id", pa.string(), nullable=False),
        pa.field("padding", pa.bool_(), nullable=False),
        pa.field("span_start", pa.int64(), nullable=False),
        pa.field("span_length", pa.int64(), nullable=False),
        pa.field("window_start", pa.int64(), nullable=False),
        pa.field("windows", pa.int64(), nullable=False),
        pa.field("row_start", pa.int64(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
    ]
)


class Refused(Exception):
    """A request this packer declines: answered with an ``error`` message, the process goes on."""


# ---------------------------------------------------------------- Arrow helpers


def lists(values, dtype, pa_type):
    """A list<pa_type> column, or list<fixed_size_list<pa_type, F>> for [R, F] arrays; None -> null."""
    present = [np.asarray(v, dtype=dtype) for v in values if v is not None]
    lengths = [0 if v is None else len(v) for v in values]
    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int32))
    mask = pa.array([v is None for v in values]) if any(v is None for v in values) else None
    flat = np.concatenate([v.reshape(-1) for v in present]) if present else np.zeros(0, dtype)
    inner = pa.array(flat, type=pa_type)
    if present and present[0].ndim == 2:
        inner = pa.FixedSizeListArray.from_arrays(inner, present[0].shape[1])
    return pa.ListArray.from_arrays(offsets, inner, mask=mask)


def row_list(column, i, dtype):
    """Row i of a list column as a numpy array ([R, F] for fixed-size rows), None for a null."""
    value = column[i]
    if not value.is_valid:
        return None
    values = value.values
    if pa.types.is_fixed_size_list(values.type):
        width = values.type.list_size
        return np.asarray(values.flatten().to_numpy(zero_copy_only=False), dtype).reshape(len(values), width)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype)


def write(stdout, verb, table=None, **meta):
    table = pa.table({}) if table is None else table
    table = table.replace_schema_metadata({"verb": verb, "version": VERSION, **meta})
    with ipc.new_stream(stdout, table.schema) as writer:
        if table.num_columns:
            writer.write_table(table)
    stdout.flush()


# ---------------------------------------------------------------- packing


def pack(table, pad_to, bug, geometry=None):
    """The ``packed`` answer (a one-row table) for a ``pack`` request (one row per block).

    ``geometry``: the request's metadata (``windows_per_block``, ``weights_frames``); without it
    (an old caller) the first block's shape stands in.
    """
    n = table.num_rows
    ids = table.column("block_id").to_pylist()
    ops = table.column("OP").to_pylist()
    if n == 0:
        raise Refused("nothing to pack")
    if len(set(ops)) != 1:
        raise Refused(f"one OP per request, got OPs {sorted(set(ops))}")
    if len(set(ids)) != n:
        raise Refused("duplicate block ids")
    op = ops[0]
    col = {name: table.column(name).combine_chunks() for name in table.column_names}
    blocks = []
    for i in range(n):
        blocks.append(
            {
                "id": ids[i],
                "padding": False,
                "span": row_list(col["SPAN"], i, np.float32),
                "offsets": row_list(col["OFFSETS"], i, np.int64),
                "valid": row_list(col["VALID"], i, np.int32),
                "weights": row_list(col["WEIGHTS"], i, np.float32),
                "idx": row_list(col["IDX"], i, np.int32),
                "speakers": row_list(col["speakers"], i, np.int32),
            }
        )
    if pad_to is not None:
        if pad_to < n:
            raise Refused(f"cannot pad {n} blocks down to k={pad_to}")
        geometry = geometry or {}
        windows = int(geometry.get("windows_per_block", len(blocks[0]["offsets"])))
        frames = int(geometry.get("weights_frames", blocks[0]["weights"].shape[1] if op != 0 else 0))
        for j in range(pad_to - n):
            blocks.append(
                {
                    "id": f"<pad>{n + j}",
                    "padding": True,
                    "span": np.zeros(0, np.float32),
                    "offsets": np.zeros(windows, np.int64),
                    "valid": np.zeros(windows, np.int32),
                    "weights": np.zeros((0, frames), np.float32) if op != 0 else None,
                    "idx": np.zeros(0, np.int32) if op != 0 else None,
                    "speakers": np.zeros(0, np.int32) if op != 0 else None,
                }
            )

    segments, offsets, idx = [], [], []
    span_at = window_at = row_at = 0
    for j, b in enumerate(blocks):
        rows = 0 if b["idx"] is None else len(b["idx"])
        segments.append(
            {
                "block_id": b["id"],
                "padding": b["padding"],
                "span_start": span_at,
                "span_length": len(b["span"]),
                "window_start": window_at,
                "windows": len(b["offsets"]),
                "row_start": row_at,
                "rows": rows,
            }
        )
        shift = span_at + (1 if bug == "off-by-one" and j > 0 else 0)
        offsets.append(b["offsets"] + shift)
        if op != 0:
            idx.append(b["idx"] + window_at)
        span_at += len(b["span"])
        window_at += len(b["offsets"])
        row_at += rows

    span = np.concatenate([b["span"] for b in blocks]).astype(np.float32)
    offsets = np.concatenate(offsets).astype(np.int64)
    valid = np.concatenate([b["valid"] for b in blocks]).astype(np.int32)
    if bug == "leak":
        window = int(valid.max(initial=0))
        valid = np.where(valid > 0, np.minimum(window, len(span) - offsets), 0).astype(np.int32)
    out = {
        "OP": pa.array([op], pa.int32()),
        "SPAN": lists([span], np.float32, pa.float32()),
        "OFFSETS": lists([offsets], np.int64, pa.int64()),
        "VALID": lists([valid], np.int32, pa.int32()),
    }
    if op == 0:
        width = int((geometry or {}).get("weights_frames", 1))
        out["WEIGHTS"] = pa.array([None], pa.list_(pa.list_(pa.float32(), width)))
        out["IDX"] = pa.array([None], pa.list_(pa.int32()))
        out["speakers"] = pa.array([None], pa.list_(pa.int32()))
    else:
        out["WEIGHTS"] = lists([np.concatenate([b["weights"] for b in blocks])], np.float32, pa.float32())
        out["IDX"] = lists([np.concatenate(idx).astype(np.int32)], np.int32, pa.int32())
        known = all(b["speakers"] is not None for b in blocks)
        out["speakers"] = (
            lists([np.concatenate([b["speakers"] for b in blocks])], np.int32, pa.int32())
            if known
            else pa.array([None], pa.list_(pa.int32()))
        )
    out["segments"] = pa.array([segments], pa.list_(SEGMENT))
    # Triton's ragged-batching index tensors for SPAN (items are the blocks' spans, rank 1).
    counts = np.array([s["span_length"] for s in segments], np.int32)
    accumulated = np.cumsum(counts, dtype=np.int32)
    out["BATCH_ELEMENT_COUNT"] = lists([counts], np.int32, pa.int32())
    out["BATCH_ACCUMULATED_ELEMENT_COUNT"] = lists([accumulated], np.int32, pa.int32())
    out["BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO"] = lists([np.r_[0, accumulated]], np.int32, pa.int32())
    out["BATCH_MAX_ELEMENT_COUNT_AS_SHAPE"] = lists(
        [np.zeros(int(counts.max(initial=0)), np.int32)], np.int32, pa.int32()
    )
    out["BATCH_ITEM_SHAPE"] = lists([counts], np.int32, pa.int32())
    out["BATCH_ITEM_SHAPE_FLATTEN"] = lists([counts], np.int32, pa.int32())
    return pa.table(out)


def unpack(table):
    """The ``unpacked`` answer: the output sliced back per real block by the request's layout."""
    op = table.column("OP")[0].as_py()
    segments = table.column("segments")[0].as_py()
    data_col = table.column("data").combine_chunks()
    dtype = np.float64 if data_col.type.value_type == pa.float64() else np.float32
    data = row_list(data_col, 0, dtype)
    shape = tuple(table.column("shape")[0].as_py())
    output = data.reshape(shape)
    ids, parts = [], []
    for s in segments:
        if s["padding"]:
            continue
        start, count = (s["window_start"], s["windows"]) if op == 0 else (s["row_start"], s["rows"])
        ids.append(s["block_id"])
        parts.append(output[start : start + count])
    pa_type = pa.from_numpy_dtype(np.dtype(dtype))
    return pa.table(
        {
            "block_id": pa.array(ids, pa.string()),
            "data": lists([p.reshape(-1) for p in parts], dtype, pa_type),
            "shape": lists([np.array(p.shape, np.int64) for p in parts], np.int64, pa.int64()),
        }
    )


# ---------------------------------------------------------------- the loop


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bug",
        choices=["off-by-one", "leak"],
        default=None,
        help="reproduce a known packing bug (for the harness's negative controls)",
    )
    args = parser.parse_args(argv)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    greeted = False  # the session's hello came (it is the first message, and only the first)
    while stdin.peek(1):  # stdin ends between two messages: the harness is done
        table = ipc.open_stream(stdin).read_all()
        meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        verb = meta.get("verb")  # metadata keys this packer does not know are ignored
        try:
            if meta.get("version") != VERSION:
                raise Refused(
                    f"wire version {meta.get('version')!r} is not supported: this packer speaks version {VERSION}"
                )
            if verb == "hello":  # the handshake: who this packer is (its identity is made of this)
                if greeted:
                    raise Refused("a second hello: a session has one, its first message")
                greeted = True
                # the same name and version in every mode: the command line that chose the mode is in the identity
                write(stdout, "hello", packer_name=NAME, packer_version=PACKER_VERSION)
            elif verb in ("pack", "unpack") and not greeted:
                raise Refused(f"a {verb} request before hello: the first message of a session is hello")
            elif verb == "pack":
                pad_to = meta.get("pad_to")
                write(stdout, "packed", pack(table, int(pad_to) if pad_to else None, args.bug, meta))
            elif verb == "unpack":
                write(stdout, "unpacked", unpack(table), output=meta.get("output", ""))
            else:
                raise Refused(f"{verb!r} is not a request: this packer serves hello, pack and unpack")
        except Refused as exc:  # answered, never an exit: the stream stays in step
            write(stdout, "error", message=str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
