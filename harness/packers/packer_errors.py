"""How a foreign packer can fail, so callers can tell a packing bug from a packer that cannot run.

All are :class:`harness.base.errors.PackingError` (so the CLI prints them as one line, exit 2), and
every message names the packer (its command or import path):

- :class:`PackerAnswerError`: the packer answered, but its answer breaks the request contract,
  the layout rules or the wire schema (a bug in the packer, shown by *these* blocks);
- :class:`PackerRefused`: the packer answered with an ``error`` message instead of a request;
- :class:`PackerFailed`: the packer raised (a Python callable), or its process died or wrote
  something that is not the wire format; :class:`PackerTimeout` when it did not answer in time;
- :class:`PackerUnavailable`: the packer cannot be used at all (cannot be started or imported,
  or closed after an earlier failure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.base.errors import PackingError

if TYPE_CHECKING:
    from harness.packers.packing import PackedRequest


class PackerError(PackingError):
    """Base of every failure of a foreign packer; the message names the packer."""


class PackerAnswerError(PackerError):
    """A well-framed answer whose content breaks the contract (tensors, dtypes, layout, wire schema).

    ``packed``: the request the packer produced, when it could be read (for reports).
    """

    packed: PackedRequest | None = None


class PackerRefused(PackerError):
    """The packer answered with an ``error`` message (it declined the request)."""


class PackerFailed(PackerError):
    """The packer raised, or its process died or wrote garbage, while handling one request."""


class PackerTimeout(PackerFailed):
    """The packer process did not answer (or did not read its input) in time; it was killed."""


class PackerUnavailable(PackerError):
    """The packer cannot be used: not startable/importable, or closed after an earlier failure."""
