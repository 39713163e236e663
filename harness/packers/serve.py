"""Serve a Python packer over the wire protocol: ``python -m harness.packers.serve [module:function]``.

The packer side of docs/packer-protocol.md in Python: answer the ``hello`` handshake, then read
one message from stdin, answer one on stdout, until stdin ends; a message out of place (before
``hello``, a second ``hello``, another wire version, another geometry) is answered with ``error``
(:mod:`harness.packers.session`). Without an argument it serves
the harness's own packer, the reference an engine team can diff its own packer's bytes against;
with one, any ``--packer``-style callable, so a Python packer can be judged through the same
process boundary as the engine's (``harness laws --packer-cmd "python -m harness.packers.serve m:f"``).
A request the packer refuses (a HarnessError) is answered with an ``error`` message. The
geometry (F of WEIGHTS) is read from each request's metadata, never assumed.
"""

from __future__ import annotations

import argparse
import inspect
import io
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, Protocol, cast

import numpy as np
import pyarrow as pa

from harness import __version__
from harness.base.errors import HarnessError
from harness.data.blocks import Block
from harness.data.ops import Op
from harness.packers import wire
from harness.packers.callable import load_object
from harness.packers.packer_errors import PackerUnavailable
from harness.packers.packing import HarnessPacker, PackedRequest, Segment, harness_identity, unpack
from harness.packers.session import Session

USAGE = """Serve a packer on stdin/stdout over the harness's wire protocol (docs/packer-protocol.md).

Run by the harness, not by hand: harness laws --packer-cmd "python -m harness.packers.serve [SPEC]".
Without SPEC it serves the harness's own packer (the reference answers); with one, the Python
packer 'package.module:attr' (a function pack(items, pad_to=None), or an object or class with
pack and unpack). It answers the 'hello' handshake with packer_name and packer_version, then one
answer per request, and exits 0 when stdin ends between two messages."""


class Served(Protocol):
    """What is served: a pack and an unpack of the :class:`harness.packers.packing.Packer` signatures."""

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest: ...

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]: ...


class Peekable(Protocol):
    """A buffered binary stdin: :func:`serve` peeks to tell a clean end from a message."""

    def read(self, n: int = -1, /) -> bytes: ...

    def peek(self, n: int = 0, /) -> bytes: ...


def layout_request(op: Op, segments: tuple[Segment, ...], frames: int = 0) -> PackedRequest:
    """A request holding only a layout (what an ``unpack`` message carries): enough to unpack by."""
    windows = sum(s.windows for s in segments)
    rows = sum(s.rows for s in segments)
    voiceprint = op.is_voiceprint
    return PackedRequest(
        op,
        np.zeros(sum(s.span_length for s in segments), np.float32),
        np.zeros(windows, np.int64),
        np.zeros(windows, np.int32),
        np.zeros((rows, frames), np.float32) if voiceprint else None,
        np.zeros(rows, np.int32) if voiceprint else None,
        None,
        segments,
    )


def answer(
    packer: Served, data: wire.Readable, session: Session, name: tuple[str, str] = ("harness", __version__)
) -> bytes:
    """The answer to the next message on ``data`` (``name``: packer_name and packer_version for ``hello``).

    A message the session's rules refuse (out of place, another version, not a request, another
    geometry than the ``hello``'s) and a request the packer declines (a HarnessError) are answered
    with ``error``: the stream stays in step and the process reads on."""
    message = wire.read_any(data)
    refusal = session.refusal(message.verb, message.head)
    if refusal is None and message.verb != wire.HELLO:
        refusal = session.geometry_refusal(message.head)
    if refusal is not None:
        return wire.encode_error(refusal)
    if message.verb == wire.HELLO:
        return wire.encode_hello_answer(*name)
    try:
        frames = wire.meta_geometry(message.head).weights_frames
        if message.verb == wire.PACK:
            blocks, pad_to = wire.decode_pack(message)
            return wire.encode_packed(packer.pack(blocks, pad_to=pad_to), frames)
        op, segments, output_name, output = wire.decode_unpack(message)
        packed = layout_request(op, segments, frames)
        parts = packer.unpack(packed, {output_name: output})
        return wire.encode_unpacked(packed.block_ids, parts)
    except HarnessError as exc:
        return wire.encode_error(str(exc))


def serve(packer: Served, stdin: Peekable, stdout: BinaryIO, name: tuple[str, str] = ("harness", __version__)) -> None:
    """Answer messages until stdin ends between two messages (one session)."""
    session = Session()
    while stdin.peek(1):
        stdout.write(answer(packer, stdin, session, name))
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.packers.serve", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec", nargs="?", metavar="SPEC", help="package.module:attr (default: the harness's packer)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.spec is None:
        packer: Served = HarnessPacker()
        name = ("harness", harness_identity().partition("/")[2])
    else:
        try:
            packer, name = _packer(args.spec), (f"served:{args.spec}", __version__)
        except HarnessError as exc:  # stderr, one line: the harness quotes it when the packer does not start
            print(f"harness: error: {exc}", file=sys.stderr)
            return 2
    try:  # (typeshed says BinaryIO; a process's binary stdin is an io.BufferedReader, which peeks)
        serve(packer, cast(io.BufferedReader, sys.stdin.buffer), sys.stdout.buffer, name)
    except pa.ArrowInvalid as exc:  # not an Arrow IPC stream: the next message cannot be found
        print(f"harness: error: stdin is not a stream of Arrow IPC messages ({exc}); stopping", file=sys.stderr)
        return 2
    return 0


def _packer(spec: str) -> Served:
    target = load_object(spec)
    if inspect.isclass(target):
        target = target()
    pack_fn, unpack_fn = getattr(target, "pack", None), getattr(target, "unpack", None)
    if callable(pack_fn) and callable(unpack_fn):
        return _Foreign(pack_fn, unpack_fn)
    if not callable(target):  # (was a TypeError traceback at the first request)
        raise PackerUnavailable(
            f"packer {spec!r}: a {type(target).__name__} is neither a function nor an object with pack() and unpack()"
        )
    return _Foreign(target, unpack)


class _Foreign:
    """A Python packer's pack and unpack (a function packer unpacks with the harness's unpack).

    What they return is foreign: the harness checks it on the other side of the wire."""

    def __init__(self, pack: Callable[..., Any], unpack: Callable[..., Any]) -> None:
        self._pack, self._unpack = pack, unpack

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
        packed: PackedRequest = self._pack(items, pad_to=pad_to)
        return packed

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        parts: list[np.ndarray] = self._unpack(packed, outputs)
        return parts


if __name__ == "__main__":
    sys.exit(main())
