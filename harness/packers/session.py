"""The packer's side of a session: which messages it serves and which it answers with ``error``.

A session is one packer process, from its start to the end of its stdin. Its first message is
``hello``, and only the first; then ``pack`` and ``unpack`` requests, any number, in any order.
A packer answers every message it can read with exactly one message, so the stream stays in
step: a message out of place (a request before ``hello``, a second ``hello``), of another wire
version, or of a verb it does not serve is answered with an ``error`` saying why, and the packer
reads on. It exits only when stdin ends (status 0), or when what it reads is not an Arrow IPC
stream at all (it cannot find the next message: one line on stderr, a non-zero status).

These are the rules of docs/packer-protocol.md ("Sessions"); :mod:`harness.packers.serve` keeps
them, and the session test vectors (:mod:`harness.packers.session_vectors`) are derived from them.
"""

from __future__ import annotations

from typing import Literal

from harness.packers.wire import ERROR, GEOMETRY_KEYS, HELLO, PACK, PACKED, UNPACK, UNPACKED, VERSION, WireMeta

# the verb of a served request's answer
Answer = Literal["hello", "packed", "unpacked", "error"]
ANSWERS: dict[str, Answer] = {HELLO: HELLO, PACK: PACKED, UNPACK: UNPACKED}


class Session:
    """One packer process's state: whether its ``hello`` came, and the geometry it said."""

    def __init__(self) -> None:
        self.greeted = False
        self.geometry: tuple[str | None, ...] = (None,) * len(GEOMETRY_KEYS)

    def refusal(self, verb: str | None, meta: WireMeta) -> str | None:
        """Why this message is answered with ``error`` (None: it is served); a served ``hello`` starts the session.

        Unknown metadata keys are ignored; the geometry is not compared here (:meth:`geometry_refusal`)."""
        version = meta.version
        if version != VERSION:
            return f"wire version {version!r} is not supported: this packer speaks version {VERSION}"
        if verb not in ANSWERS:
            return f"{verb!r} is not a request: a packer serves hello, pack and unpack"
        if verb == HELLO:
            if self.greeted:
                return "a second hello: a session has one, its first message"
            self.greeted = True
            self.geometry = meta.geometry
            return None
        if not self.greeted:
            return f"a {verb} request before hello: the first message of a session is hello"
        return None

    def geometry_refusal(self, meta: WireMeta) -> str | None:
        """Why a request's geometry is refused: it is not the ``hello``'s (the harness never sends one such).

        Optional for a packer: one that reads the geometry from every request may skip the check."""
        changed = [
            (key, now, then)
            for key, now, then in zip(GEOMETRY_KEYS, meta.geometry, self.geometry, strict=True)
            if now != then
        ]
        if not changed:
            return None
        key, now, then = changed[0]
        return f"geometry {key}={now!r} differs from the hello's {then!r}: a session's geometry never changes"


def answer_verb(verb: str | None, refusal: str | None) -> Answer:
    """The verb of the answer to a message: ``error`` when it is refused, else the request's answer verb."""
    return ERROR if refusal is not None or verb is None else ANSWERS[verb]
