"""Packers behind the :class:`~harness.packers.packing.Packer` seam, and how to get one from a CLI option.

- :class:`~harness.packers.packing.HarnessPacker`: the harness's own packer;
- :class:`ExternalPacker`: a process (the engine's packer, any language) speaking the wire
  protocol of docs/packer-protocol.md on stdin/stdout;
- :class:`CallablePacker`: a Python callable or object named ``package.module:attr``.

:func:`packer_from_options` turns the CLI's ``--packer-cmd CMD`` / ``--packer module:function``
into one of these. Answers of foreign packers are validated before use
(:mod:`harness.packers.validate`); their failures are :mod:`harness.packers.packer_errors`.
"""

from __future__ import annotations

from harness.base.errors import HarnessError
from harness.data.geometry import Geometry
from harness.packers.callable import CallablePacker
from harness.packers.external import ExternalPacker
from harness.packers.packer_errors import (
    PackerAnswerError,
    PackerError,
    PackerFailed,
    PackerRefused,
    PackerTimeout,
    PackerUnavailable,
)
from harness.packers.packing import HarnessPacker, Packer

__all__ = [
    "CallablePacker",
    "ExternalPacker",
    "HarnessPacker",
    "Packer",
    "PackerAnswerError",
    "PackerError",
    "PackerFailed",
    "PackerRefused",
    "PackerTimeout",
    "PackerUnavailable",
    "check_unchanged",
    "packer_from_options",
]


def packer_from_options(
    packer_cmd: str | None,
    packer: str | None,
    geometry: Geometry,
    *,
    timeout_s: float = 30.0,
    restart: bool = False,
    digest: str | None = None,
) -> Packer:
    """The packer a command line asks for: ``--packer-cmd CMD``, ``--packer module:function``, or neither.

    Neither (or ``--packer harness``) gives the harness's own packer. ``geometry`` is what a
    foreign packer's answers are validated against (the model's; the laws use their own).
    ``digest`` (``--packer-digest``) is the external packer's sha256 as the user states it, used
    for its identity instead of hashing its command line's files; it needs ``--packer-cmd``.
    The caller owns the result: ``close()`` it (or use it as a context manager).
    """
    if packer_cmd is not None and packer is not None:
        raise HarnessError("--packer-cmd and --packer: give one packer, not both")
    if digest is not None and packer_cmd is None:
        raise HarnessError("--packer-digest: names the digest of an external packer; give --packer-cmd too")
    if packer_cmd is not None:
        return ExternalPacker(packer_cmd, geometry, timeout_s=timeout_s, restart=restart, digest=digest)
    if packer is not None and packer != "harness":
        return CallablePacker(packer, geometry)
    return HarnessPacker()


def check_unchanged(packer: object) -> None:
    """Refuse (one line naming the file) a packer whose files changed since its identity was hashed: called
    before what its session did is kept (a run, a laws verdict). A packer without files to watch (the
    harness's own, a Python one: its code is what was imported) has nothing to check."""
    check = getattr(packer, "check_unchanged", None)
    if check is not None:  # (``callable`` is this package's module of that name here)
        check()
