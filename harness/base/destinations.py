"""Every output location of every command, checked before any work, by one rule.

A command that writes names each output location (a file or a folder) and the inputs it reads; before a
model is built, a corpus read or any file opened for writing, each location is refused, in one line
naming it and what to do, when

- **it cannot be written**: a folder where a file goes, a file where a folder goes (or on the way), an
  existing file the command does not overwrite, a folder this user cannot create entries in;
- **it is inside (or is) a golden or a run directory**: their content is sealed by their manifest, so one
  file more makes the golden unreadable ("data file not listed in the manifest") and every later command
  that reads it fails until someone deletes a folder inside a sealed golden by hand;
- **it is one of the command's inputs** (the same path, or the same file through a link): ``nightly --golden
  g/r --out g/r``, a corpus written over the WAV it is cut from, a manifest written over the score it
  promotes, a merge into one of its shard folders. A location *inside* an input folder is refused only where
  that folder is a golden or a run (the rule above): a shard folder or the goldens folder may hold more.

Nothing is created by a check (a missing folder is judged by its nearest existing ancestor), so a command
refused here leaves nothing behind. The checks are the commands' (``harness.pipeline.commands.*`` and the
pipeline functions they call): a library caller that writes into a run of its own is not stopped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from harness.base.errors import OutputError
from harness.base.fsio import file_mode, os_failure, temp_sibling

Input = tuple[str, Path | str | None]  # how the command named an input (``--golden``) and where it is (None: not given)


def check_output_dir(directory: Path, what: str, inputs: Iterable[Input] = ()) -> Path:
    """Refuse, before any work, a folder the command would write into (module doc): not a folder or not
    writable, inside or equal to a golden or run directory, one of ``inputs``."""
    directory = Path(directory)
    existing = _existing(directory)
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{directory}: cannot write the {what}: {existing} is a file, not a folder")
    _not_sealed(directory, what, itself=True)
    _not_an_input(directory, what, inputs)
    check_writable_dir(directory, what)
    return directory


def check_output_file(path: Path, what: str, overwrite: bool = True, inputs: Iterable[Input] = ()) -> Path:
    """Refuse, before any work, a file the command would write (module doc): a folder, an existing file when
    ``overwrite`` is off, under a file or an unwritable folder, inside a golden or run directory, one of
    ``inputs``."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: cannot write the {what}: it is a directory")
    if path.exists() and not overwrite:
        raise OutputError(
            f"{path}: cannot write the {what}: the file exists (nothing is overwritten; choose another path)"
        )
    _not_sealed(path, what, itself=False)
    _not_an_input(path, what, inputs)
    check_writable_dir(path.parent, what)
    return path


def check_writable_dir(directory: Path, what: str = "output folder") -> None:
    """Refuse a folder that cannot receive files (the writability part of :func:`check_output_dir` alone).

    Nothing is created: a missing folder is judged by its nearest existing ancestor (which must be
    a folder this process can create entries in), so a command that fails later leaves no empty
    folder behind; the writers create it when they write."""
    directory = Path(directory)
    existing = _existing(directory)
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{directory}: cannot write the {what}: {existing} is a file, not a folder")
    try:
        probe = temp_sibling(existing / "probe")
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, file_mode())
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise os_failure(
            existing if existing == directory else directory, exc, f"cannot write the {what} here"
        ) from None


def sealed_directory(path: Path, itself: bool = False) -> Path | None:
    """The golden or run directory ``path`` lies in (``itself``: or is), if any (one with a harness manifest)."""
    found = _sealed(Path(path), itself)
    return found[0] if found is not None else None


def same_file(a: Path, b: Path) -> bool:
    a, b = Path(a), Path(b)
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


# ---------------------------------------------------------------------------------- the rules


def _existing(directory: Path) -> Path:
    existing = directory
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    return existing


def _not_sealed(path: Path, what: str, itself: bool) -> None:
    found = _sealed(path, itself)
    if found is None:
        return
    sealed, kind = found
    if itself and sealed in (path.absolute(), path.resolve()):
        raise OutputError(
            f"{path}: cannot write the {what} there: it is a {kind} directory, sealed by its manifest "
            "(a file added to it makes it unreadable); choose a folder outside it"
        )
    raise OutputError(
        f"{path}: cannot write the {what} inside {_shown(sealed)} (a {kind} directory is sealed by its "
        "manifest: a file added to it makes it unreadable); choose a path outside it"
    )


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies in it (as the command line named it), else whole."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _sealed(path: Path, itself: bool) -> tuple[Path, str] | None:
    """(directory, 'golden' or 'run') of the sealed directory ``path`` lies in, looked up along the path as given
    and as resolved (a link into a golden is inside it)."""
    seen: set[Path] = set()
    for start in (path.absolute(), path.resolve()):
        for parent in ([start] if itself else []) + list(start.parents):
            if parent in seen:
                continue
            seen.add(parent)
            kind = _manifest_kind(parent / "manifest.json")
            if kind is not None:
                return parent, kind
    return None


def _manifest_kind(manifest: Path) -> str | None:
    if not manifest.is_file():
        return None
    try:
        # up to 1 MiB, i.e. all of any real manifest: its keys are sorted, so "kind" comes after
        # "backend", "environment" and "files", which grow with the numerics recorded and the shapes
        with manifest.open("rb") as f:
            head = f.read(1 << 20).decode(errors="replace")
    except OSError:
        return None
    return "golden" if '"harness.golden"' in head else "run" if '"harness.run"' in head else None


def _not_an_input(path: Path, what: str, inputs: Iterable[Input]) -> None:
    here = path.resolve()
    for label, given in inputs:
        if given is None:
            continue
        there = Path(given).resolve()
        if here == there or same_file(path, Path(given)):
            raise OutputError(
                f"{path}: cannot write the {what} over {label} {given}, an input of this command; choose another path"
            )
