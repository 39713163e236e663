"""One exception family and four exit statuses, so every command fails in one clear line.

    0  everything holds
    1  a verdict failed (a shape refused, a golden not reproduced)        -- never an exception
    2  the harness was asked something it cannot do: :class:`HarnessError` (bad input, missing
       file, server down, interrupted), printed as ``harness: error: <where>: <what>``
    3  anything else: an internal error (a bug), printed as one line naming the command and the
       step it was in; ``--debug`` (or ``HARNESS_DEBUG=1``) adds the traceback

Every :class:`HarnessError` names *where* (block, file, key, request) and *what*.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INTERNAL = 0, 1, 2, 3

_STEP: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("harness_step", default=())


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Name the pipeline step in progress, so an internal error can say where it happened."""
    token = _STEP.set((*_STEP.get(), name))
    try:
        yield
    finally:
        _STEP.reset(token)


def current_step() -> str:
    return " > ".join(_STEP.get()) or "start-up"


class HarnessError(Exception):
    """Base of every failure the harness expects and explains (exit status 2)."""


class Interrupted(HarnessError):
    """SIGINT or SIGTERM: the command stopped; whatever it had started writing was removed."""


class BlockError(HarnessError):
    """A block (or a request) violates the contract of DESIGN.md.

    ``block_id``, ``field`` and ``value`` are kept as attributes so tests and callers can
    check what was named without parsing the message.
    """

    def __init__(self, block_id: str, field: str, value: object, reason: str) -> None:
        self.block_id = block_id
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"block {block_id!r}: {field}={short(value)}: {reason}")


class PackingError(HarnessError):
    """Blocks that cannot be packed together, or outputs that do not unpack."""


class ModelError(HarnessError):
    """A model that cannot be loaded, or that answers outside the contract."""


class CorpusError(HarnessError):
    """A corpus source or file that cannot be turned into valid blocks."""


class ConfigError(HarnessError):
    """A release configuration key that is unknown or has a bad value."""


class GoldenError(HarnessError):
    """A golden or run directory that is missing, tampered, truncated or mismatched."""


class LaneError(HarnessError):
    """A lane asked to do something its contract forbids (e.g. a non-release shape)."""


class BackendError(HarnessError):
    """A backend (in-process model or Triton server) that failed or answered wrongly."""


class ScoringError(HarnessError):
    """A run and a golden that cannot be compared (different corpus, missing OP, ...)."""


class SchemaError(HarnessError):
    """A file (manifest, score, ledger, config, ...) that is not what its schema declares."""


class LedgerError(HarnessError):
    """A ledger or promoted-shapes manifest that cannot be trusted or updated."""


class OutputError(HarnessError):
    """An output that cannot be written (not writable, a directory, disk full, ...)."""


def short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
