"""Session test vectors (``sessions.json``): the verb a packer answers each message of a session with.

The packing vectors (:mod:`harness.packers.vector_files`) say what one request packs to; these say
what a packer's message loop must do with messages in and out of place: serve ``hello`` first
and once, answer a request before it, a second ``hello``, another wire version or a verb it
does not serve with ``error`` and read on, ignore metadata keys it does not know. Each step is a
message's schema metadata exactly as the harness's encoder writes it (then changed where the
case is about the change), the packing vector whose columns it carries, and the answer's verb,
derived from :class:`harness.packers.session.Session` (:func:`check_sessions` re-derives them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pyarrow as pa

from harness import __version__
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.schemas.base import validate
from harness.data.schemas.vectors import FORMAT, SessionCase, SessionStep, SessionVectors
from harness.packers import wire
from harness.packers.packing import pack
from harness.packers.session import Session, answer_verb
from harness.packers.vector_function import window_function

FILE: Final = "sessions.json"
RULES = (
    "The first message of a session (one packer process) is hello, and only the first. A packer answers every "
    "message with one message: hello with hello, pack with packed, unpack with unpacked; a request before "
    "hello, a second hello, a message whose version is not the packer's (2) or whose verb is not hello, "
    "pack or unpack with error (version 2, a message saying why), and then reads the next message. Metadata "
    "keys it does not know are ignored. It exits when stdin ends."
)
# A change to a message's metadata: (key, value), value None removes the key.
Edit = tuple[str, str | None]
# (verb, vector name or None, edits) of one step.
Step = tuple[str, str | None, tuple[Edit, ...]]
CASES: tuple[tuple[str, str, tuple[Step, ...]], ...] = (
    (
        "in-order",
        "hello, then pack and unpack requests in any order",
        (
            ("hello", None, ()),
            ("pack", "op0-padded", ()),
            ("unpack", "op0-padded", ()),
            ("pack", "op1-one-block", ()),
            ("pack", "op2-padded", ()),
            ("unpack", "op1-one-block", ()),
        ),
    ),
    (
        "request-before-hello",
        "a pack and an unpack before hello are answered with error; the session goes on",
        (
            ("pack", "op0-one-block", ()),
            ("unpack", "op0-one-block", ()),
            ("hello", None, ()),
            ("pack", "op0-one-block", ()),
        ),
    ),
    (
        "second-hello",
        "a second hello is answered with error; the session goes on",
        (("hello", None, ()), ("pack", "op1-many-blocks", ()), ("hello", None, ()), ("unpack", "op1-many-blocks", ())),
    ),
    (
        "other-version",
        "a message of wire version 3, 1 or none is answered with error (in version 2), hello too",
        (
            ("hello", None, (("version", "3"),)),
            ("hello", None, ()),
            ("pack", "op0-one-block", (("version", "1"),)),
            ("pack", "op0-one-block", (("version", None),)),
            ("pack", "op0-one-block", ()),
        ),
    ),
    (
        "not-a-request",
        "verbs that are not requests (unknown, an answer's, none) are answered with error",
        (
            ("hello", None, ()),
            ("compress", None, ()),
            ("packed", None, ()),
            ("", None, (("verb", None),)),
            ("pack", "op2-many-blocks", ()),
        ),
    ),
    (
        "unknown-keys",
        "metadata keys the packer does not know are ignored, in hello and in requests",
        (
            ("hello", None, (("x-harness-note", "ignored"),)),
            ("pack", "op0-many-blocks", (("x-harness-note", "1"),)),
            ("unpack", "op0-many-blocks", (("trace_id", "a1b2"),)),
        ),
    ),
)


def _metadata(
    verb: str, vector: str | None, requests: Mapping[str, tuple[list[Block], int | None]], geometry: Geometry
) -> dict[str, str]:
    """The metadata the harness's encoder writes for ``verb`` (carrying ``vector``'s columns), read back."""
    if verb == wire.HELLO:
        data = wire.encode_hello(geometry, __version__)
    elif verb in (wire.PACK, wire.UNPACK) and vector is not None:
        blocks, pad_to = requests[vector]
        if verb == wire.PACK:
            data = wire.encode_pack(blocks, pad_to, geometry)
        else:
            packed = pack(blocks, pad_to=pad_to)
            data = wire.encode_unpack(packed, packed.op.output_name, window_function(packed), geometry)
    else:  # a verb the encoder does not write: a message without columns, with the geometry
        return {"verb": verb, "version": wire.VERSION, **{k: str(v) for k, v in wire.geometry_meta(geometry).items()}}
    return dict(wire.read_any(data).meta)


def sessions(requests: Mapping[str, tuple[list[Block], int | None]], geometry: Geometry) -> SessionVectors:
    """The ``sessions.json`` document: every case's steps and their answers (``requests``: the packing vectors'
    blocks and ``pad_to`` by name). A step's metadata is the wire's string map, edited key by key as the case says."""
    out = []
    for name, what, steps in CASES:
        session, written = Session(), []
        for verb, vector, edits in steps:
            meta = _metadata(verb, vector, requests, geometry)
            for key, value in edits:
                if value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value
            head = wire.WireMeta.of(meta)
            answer = answer_verb(head.verb, session.refusal(head.verb, head))
            written.append(SessionStep(metadata=meta, vector=vector, answer=answer))
        out.append(SessionCase(name=name, what=what, steps=written))
    return SessionVectors(vector_format=FORMAT, wire_version=wire.VERSION, rules=RULES, sessions=out)


def check_sessions(data: object, requests: Mapping[str, tuple[list[Block], int | None]], geometry: Geometry) -> None:
    """Re-derive ``sessions.json`` (``data``: its JSON, validated first) from the session rules; AssertionError
    naming the first step that differs, each step shown as its JSON."""
    have: SessionVectors = validate(SessionVectors, data, FILE)
    want = sessions(requests, geometry)
    for have_case, want_case in zip(have.sessions, want.sessions, strict=True):
        for i, (step, should) in enumerate(zip(have_case.steps, want_case.steps, strict=True)):
            assert step == should, (
                f"{FILE}: session {have_case.name!r} step {i}: {step.model_dump(mode='json')} is not "
                f"{should.model_dump(mode='json')}"
            )
    assert have == want, f"{FILE}: not what the session rules derive"


def message(
    step: SessionStep | Mapping[str, object],
    requests: Mapping[str, tuple[list[Block], int | None]],
    geometry: Geometry,
) -> bytes:
    """A step's message as bytes on the wire: its vector's columns (none without one), its metadata exactly
    (``step``: a step, or its JSON in sessions.json, validated here)."""
    typed: SessionStep = step if isinstance(step, SessionStep) else validate(SessionStep, step, FILE)
    meta, vector = typed.metadata, typed.vector
    if vector is None:
        table = pa.table({})
    else:
        blocks, pad_to = requests[vector]
        if wire.WireMeta.of(meta).verb == wire.PACK:
            data = wire.encode_pack(blocks, pad_to, geometry)
        else:
            packed = pack(blocks, pad_to=pad_to)
            data = wire.encode_unpack(packed, packed.op.output_name, window_function(packed), geometry)
        table = wire.read_any(data).table
    return wire.stream_bytes(table.replace_schema_metadata(dict(meta)))
