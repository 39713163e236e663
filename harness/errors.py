"""One exception family, so the CLI can turn any expected failure into one clear line.

Every error names *where* (block, file, request, config key) and *what*; the CLI prints
``str(error)`` and exits non-zero, never a traceback, for anything derived from
:class:`HarnessError`.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every failure the harness expects and explains."""


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
        super().__init__(f"block {block_id!r}: {field}={_short(value)}: {reason}")


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


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
