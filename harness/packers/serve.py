"""Serve a Python packer over the wire protocol: ``python -m harness.packers.serve [module:function]``.

The packer side of docs/packer-protocol.md in Python: read one message from stdin, answer one
on stdout, until stdin ends. Without an argument it serves the harness's own packer, the
reference an engine team can diff its own packer's bytes against; with one, any
``--packer``-style callable, so a Python packer can be judged through the same process
boundary as the engine's (``harness laws --packer-cmd "python -m harness.packers.serve m:f"``).
A request the packer refuses (a HarnessError) is answered with an ``error`` message.
"""

from __future__ import annotations

import inspect
import sys
from typing import BinaryIO

import numpy as np

from harness.errors import HarnessError
from harness.packers import wire
from harness.packers.callable import load_object
from harness.packing import HarnessPacker, PackedRequest, Segment


def layout_request(op, segments: tuple[Segment, ...]) -> PackedRequest:
    """A request holding only a layout (what an ``unpack`` message carries): enough to unpack by."""
    windows = sum(s.windows for s in segments)
    rows = sum(s.rows for s in segments)
    voiceprint = op.is_voiceprint
    return PackedRequest(op, np.zeros(sum(s.span_length for s in segments), np.float32), np.zeros(windows, np.int64),
                         np.zeros(windows, np.int32), np.zeros((rows, 0), np.float32) if voiceprint else None,
                         np.zeros(rows, np.int32) if voiceprint else None, None, segments)


def answer(packer, data: BinaryIO) -> bytes:
    """The answer to the next request on ``data``."""
    message = wire.read_message(data, (wire.PACK, wire.UNPACK))
    try:
        if message.verb == wire.PACK:
            blocks, pad_to = wire.decode_pack(message)
            return wire.encode_packed(packer.pack(blocks, pad_to=pad_to))
        op, segments, name, output = wire.decode_unpack(message)
        packed = layout_request(op, segments)
        parts = packer.unpack(packed, {name: output})
        return wire.encode_unpacked(packed.block_ids, parts)
    except HarnessError as exc:
        return wire.encode_error(str(exc))


def serve(packer, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Answer requests until stdin ends between two messages."""
    while stdin.peek(1):
        stdout.write(answer(packer, stdin))
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        print("usage: python -m harness.packers.serve [package.module:function]", file=sys.stderr)
        return 2
    packer = HarnessPacker() if not args else _packer(args[0])
    serve(packer, sys.stdin.buffer, sys.stdout.buffer)
    return 0


def _packer(spec: str):
    target = load_object(spec)
    if inspect.isclass(target):
        target = target()
    if callable(getattr(target, "pack", None)) and callable(getattr(target, "unpack", None)):
        return target
    from harness.packing import unpack

    class _Function:
        def pack(self, items, pad_to=None):
            return target(items, pad_to=pad_to)

        def unpack(self, packed, outputs):
            return unpack(packed, outputs)

    return _Function()


if __name__ == "__main__":
    sys.exit(main())
