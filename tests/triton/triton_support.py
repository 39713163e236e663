"""Helpers shared by the Triton tests (a module, so test files can import them)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from harness.numerics import NumericSettings
from lanes.triton.server import ServerOptions, TritonServer

MODEL = "small"
BLOCKS = 12
# One torch thread on both sides: the lanes stay comparable (same settings), and on a small shared
# machine two OpenMP threads per process wait on each other's barriers (calls 10x slower, measured).
NUMERICS = NumericSettings(threads=1)


@contextlib.contextmanager
def serving(options: ServerOptions) -> Iterator[TritonServer]:
    """A server for one test (or the session); asserts on exit that its stop left nothing behind:
    no process of its group, no temporary folder, no shared-memory region."""
    server = TritonServer(options)
    server.start()
    assert server.leftovers(), "a running server should show up in leftovers()"
    try:
        yield server
    finally:
        server.stop()
        assert server.leftovers() == []
