"""A packer's identity: the stable string a promotion is keyed by (``describe()["identity"]``).

A promoted shape is evidence about *one* packer's requests; another packer (or the same one
rebuilt) earns its own. So an identity binds a name to the code:

- the harness's own packer: ``harness/<version>+<12 hex of sha256(harness/packers/packing.py)>``
  (:func:`harness.packers.packing.harness_identity`);
- an external packer: ``external:<name>/<version>@sha256:<16 hex>``: the name and version it
  declares in the ``hello`` handshake, and a digest of its whole command (:func:`command_digest`:
  the variables it sets, its program's content or the digest the user states with
  ``--packer-digest``, and every argument's text, or content for a file);
- a Python callable: ``callable:<spec>@sha256:<16 hex of its module's source file>``.

Identities are printable ASCII without spaces or ``|`` (the ledger's key separator).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.packers.command import Command
from harness.packers.packer_errors import PackerUnavailable

# packer_name: no '/' or '@' (they delimit the identity); packer_version: no '@'; neither '|' nor spaces.
NAME_RE = re.compile(r"^[!-.0-?A-{}~]{1,64}$")
VERSION_RE = re.compile(r"^[!-?A-{}~]{1,64}$")
SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def program_file(argv0: str, path: str | None = None) -> Path | None:
    """The file a command's program is: ``argv0`` looked up like ``exec`` does (``PATH``, or the ``PATH``
    the command line sets), links resolved; None if there is none."""
    found = shutil.which(argv0, path=path)
    return Path(os.path.realpath(found)) if found else None


def _text_line(kind: str, text: str) -> str:
    """``<kind> <byte length> <text>\\n``: the length (of its UTF-8) keeps a text holding a newline unambiguous."""
    return f"{kind} {len(text.encode('utf-8', 'surrogateescape'))} {text}\n"


@dataclass(frozen=True)
class CommandDigest:
    """The digest of a packer command and what went into it, in order (``parts``: one dict per line hashed)."""

    digest: str
    parts: tuple[dict[str, str], ...]

    @property
    def files(self) -> list[dict[str, str]]:
        """The files whose content was hashed (path and sha256), in command order."""
        return [{"path": p["path"], "sha256": p["sha256"]} for p in self.parts if "path" in p]


def command_digest(command: Command, label: str, stated: str | None = None) -> CommandDigest:
    """sha256 over the whole command, one line per part, in this order:

    - each variable the command line sets, by name: ``env <n> NAME=value``;
    - the program: ``<sha256 of its file>`` (found like ``exec`` finds it), or the ``stated`` digest
      (``--packer-digest``) in its place, read from nowhere;
    - each further argument, in order: ``<sha256 of its content>`` if it is an existing file,
      else ``arg <n> <its text>``;

    ``<n>`` being the byte length of the UTF-8 text that follows, and every line ending in ``\\n``.
    A file counts by its content, never its path (the same build elsewhere is the same packer); any
    other word counts by its text, so two commands that differ in one flag are two packers. A
    command of files only (``python packer.py``) is the sha256 over its files' digests alone.
    """
    lines: list[str] = []
    parts: list[dict[str, str]] = []
    for name, value in command.env:
        lines.append(_text_line("env", f"{name}={value}"))
        parts.append({"kind": "env", "text": f"{name}={value}"})
    if stated is not None:
        lines.append(f"{stated}\n")
        parts.append({"kind": "program", "stated": stated})
    else:
        program = program_file(command.argv[0], dict(command.env).get("PATH"))
        if program is None:
            raise PackerUnavailable(
                f"{label}: cannot hash the packer: {command.argv[0]!r} resolves to no file; "
                "give its digest (harness laws --packer-digest SHA256; --set packer.digest=SHA256 for run and nightly)"
            )
        one = _hashed(program, label)
        lines.append(f"{one}\n")
        parts.append({"kind": "program", "path": str(program), "sha256": one})
    for arg in command.argv[1:]:
        if Path(arg).is_file():
            path = Path(os.path.realpath(arg))
            one = _hashed(path, label)
            lines.append(f"{one}\n")
            parts.append({"kind": "file", "path": str(path), "sha256": one})
        else:
            lines.append(_text_line("arg", arg))
            parts.append({"kind": "arg", "text": arg})
    total = hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()
    return CommandDigest(total, tuple(parts))


def _hashed(path: Path, label: str) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise PackerUnavailable(
            f"{label}: cannot hash {str(path)!r} for its identity: {exc.strerror or exc}; give its digest "
            "(harness laws --packer-digest SHA256; --set packer.digest=SHA256 for run and nightly)"
        ) from None


def given_digest(value: str, label: str) -> str:
    """A digest the user supplies (``--packer-digest``): 64 hex digits, kept lower-case."""
    if not SHA256_RE.match(value or ""):
        raise PackerUnavailable(f"{label}: --packer-digest {value!r}: expected a sha256, 64 hex digits")
    return value.lower()


def check_declared(name: str | None, version: str | None) -> str | None:
    """Why a handshake's ``packer_name`` / ``packer_version`` cannot make an identity (None: they can)."""
    if not name or not NAME_RE.match(name):
        return (
            f"metadata packer_name is {name!r}: required, 1-64 printable ASCII characters without spaces, "
            "'/', '@' or '|'"
        )
    if not version or not VERSION_RE.match(version):
        return (
            f"metadata packer_version is {version!r}: required, 1-64 printable ASCII characters without "
            "spaces, '@' or '|'"
        )
    return None


def external_identity(name: str, version: str, digest: str) -> str:
    return f"external:{name}/{version}@sha256:{digest[:16]}"


def callable_identity(spec: str, target: object) -> tuple[str, str, str]:
    """(identity, full sha256, file) of a ``module:attr`` packer: the digest of the module's source file."""
    module_name = spec.partition(":")[0]
    module = sys.modules.get(module_name) or inspect.getmodule(target)
    source = getattr(module, "__file__", None)
    if not source or not Path(source).is_file():
        raise PackerUnavailable(
            f"packer {spec!r}: module {module_name!r} has no source file to hash for the packer's identity"
        )
    digest = file_sha256(Path(source))
    return f"callable:{spec}@sha256:{digest[:16]}", digest, str(source)
