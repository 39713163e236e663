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

An identity is of what ran: the command is hashed *before* its process starts, the process runs the very
program file that was hashed (its path resolved then, so a link re-pointed afterwards changes nothing), and
the files are hashed again when a session ends (:func:`changed_since`): a packer whose program or file
argument changed while it ran is refused, naming the file, so nothing judged for one content is recorded
under another.
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

from harness.base.errors import clip
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
class DigestPart:
    """One line hashed into a command's digest: its ``kind`` (env, program, file or arg) and what was hashed:
    the ``text`` of a variable or an argument, the digest ``stated`` in place of the program, or a file's
    ``path`` and ``sha256``. Compared part by part with a later digest's (:func:`differs`)."""

    kind: str
    text: str | None = None
    stated: str | None = None
    path: str | None = None
    sha256: str | None = None

    def to_json(self) -> dict[str, str]:
        """describe()'s entry: ``kind`` and the fields the part has, in the order they are declared."""
        have = {"kind": self.kind, "text": self.text, "stated": self.stated, "path": self.path, "sha256": self.sha256}
        return {key: value for key, value in have.items() if value is not None}


@dataclass(frozen=True)
class CommandDigest:
    """The digest of a packer command and what went into it, in order (``parts``: one per line hashed);
    ``program``: the file the program was found to be and hashed (None: its digest was stated), which is
    the file the packer's process runs."""

    digest: str
    parts: tuple[DigestPart, ...]
    program: str | None = None

    @property
    def files(self) -> list[dict[str, str | None]]:
        """The files whose content was hashed (path and sha256), in command order: describe()'s entries."""
        return [{"path": p.path, "sha256": p.sha256} for p in self.parts if p.path is not None]


def command_digest(
    command: Command, label: str, stated: str | None = None, program: str | None = None
) -> CommandDigest:
    """sha256 over the whole command, one line per part, in this order:

    - each variable the command line sets, by name: ``env <n> NAME=value``;
    - the program: ``<sha256 of its file>`` (found like ``exec`` finds it), or the ``stated`` digest
      (``--packer-digest``) in its place, read from nowhere;
    - each further argument, in order: ``<sha256 of its content>`` if it is an existing file,
      else ``arg <n> <its text>``;

    ``<n>`` being the byte length of the UTF-8 text that follows, and every line ending in ``\\n``.
    ``program``: the program's file as found before (a session's end hashes again what its process ran,
    not what the command would find now).
    A file counts by its content, never its path (the same build elsewhere is the same packer); any
    other word counts by its text, so two commands that differ in one flag are two packers. A
    command of files only (``python packer.py``) is the sha256 over its files' digests alone.
    """
    lines: list[str] = []
    parts: list[DigestPart] = []
    for name, value in command.env:
        lines.append(_text_line("env", f"{name}={value}"))
        parts.append(DigestPart("env", text=f"{name}={value}"))
    if stated is not None:
        lines.append(f"{stated}\n")
        parts.append(DigestPart("program", stated=stated))
    else:
        # the PATH the command line sets: an environment variable, looked up by its name
        found = Path(program) if program is not None else program_file(command.argv[0], dict(command.env).get("PATH"))
        if found is None:  # nothing to hash, and nothing exec could start either
            argv0 = command.argv[0]
            why = "not executable" if os.sep in argv0 and _names_a_file(argv0) else "No such file or directory"
            raise PackerUnavailable(
                f"{label}: cannot start {clip(argv0)}: {why} (a program is looked up as exec does it, on the "
                "PATH the command line sets, else the harness's own)"
            )
        one = _hashed(found, label, "its program", "; give its digest with --packer-digest SHA256")
        lines.append(f"{one}\n")
        parts.append(DigestPart("program", path=str(found), sha256=one))
        program = str(found)
    for arg in command.argv[1:]:
        if _names_a_file(arg):
            path = Path(os.path.realpath(arg))
            one = _hashed(
                path,
                label,
                "its file argument",
                " (a file argument counts by its content; --packer-digest stands in for the program only): "
                "make it readable to the harness",
            )
            lines.append(f"{one}\n")
            parts.append(DigestPart("file", path=str(path), sha256=one))
        else:
            lines.append(_text_line("arg", arg))
            parts.append(DigestPart("arg", text=arg))
    total = hashlib.sha256("".join(lines).encode("utf-8", "surrogateescape")).hexdigest()
    return CommandDigest(total, tuple(parts), program)


def _names_a_file(arg: str) -> bool:
    """Whether an argument is the path of an existing file (a word too long to be a path, or holding a NUL, is
    text: ``is_file`` raises on those)."""
    try:
        return Path(arg).is_file()
    except (OSError, ValueError):
        return False


def _hashed(path: Path, label: str, what: str, fix: str) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise PackerUnavailable(
            f"{label}: cannot read {what} {clip(str(path))} to hash it for the packer's identity: "
            f"{exc.strerror or exc}{fix}"
        ) from None


def changed_since(hashed: CommandDigest, command: Command, label: str, stated: str | None = None) -> str | None:
    """Why the command is no longer what ``hashed`` was (None: every file it hashed holds the same bytes, and
    every argument that was a file still is): the program file its process runs, hashed again, and every file
    argument, resolved and hashed again; the first difference, naming the file."""
    try:
        now = command_digest(command, label, stated, hashed.program)
    except PackerUnavailable as exc:
        return f"a file of its command can no longer be read ({exc})"
    return differs(hashed, now)


def differs(before: CommandDigest, after: CommandDigest) -> str | None:
    """The first part of two digests of one command that differs, in words (None: they are the same)."""
    if before.digest == after.digest and before.parts == after.parts:
        return None
    for old, new in zip(before.parts, after.parts, strict=False):
        if old == new:
            continue
        what = "program" if old.kind == "program" else "file argument" if old.path is not None else "argument"
        if old.path is not None and new.path is not None and old.path == new.path:
            return (
                f"its {what} {clip(old.path)} changed (sha256 {(old.sha256 or '')[:16]}... when it was hashed "
                f"for the packer's identity, {(new.sha256 or '')[:16]}... now)"
            )
        if old.path is not None:
            now = new.path or f"the text {clip(new.text or '')}"
            return f"its {what} {clip(old.path)} now resolves to {clip(now) if new.path is not None else now}"
        return f"its {what} {clip(old.text or '')} is now the file {clip(new.path if new.path is not None else '?')}"
    return "its command hashes otherwise than when it was hashed for the packer's identity"


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


def module_file_digest(spec: str) -> tuple[str, str] | None:
    """(source file, sha256) of a ``module:attr`` packer's module, hashed *before* it is imported (None: already
    imported, or no source file to find: :func:`callable_identity` then says so). Compared with the digest
    taken after the import, so a module rewritten while it was imported is refused, not recorded under the
    content hashed after it ran."""
    import importlib.util

    name = spec.partition(":")[0]
    if not name or name in sys.modules:
        return None
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # the import itself names what is wrong
        return None
    origin = getattr(found, "origin", None)
    if not origin or not Path(origin).is_file():
        return None
    try:
        return str(origin), file_sha256(Path(origin))
    except OSError:
        return None
