"""Manifests: the integrity half of the golden store.

A golden or run directory is complete only if its ``manifest.json`` exists, passes its schema,
still has the digest it was sealed with (``manifest_sha256``: any edit, e.g. a raised noise floor,
breaks it), and every file it lists is a plain file inside the directory with the recorded size and
sha256. Sizes are checked on every load; a file's sha256 when the file is about to be used (a
golden's corpus, which scoring never opens, is not hashed for scoring).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar, overload

from pydantic import BaseModel

from harness.base.errors import GoldenError, clean_up
from harness.base.fsio import is_temporary
from harness.base.jsonio import read_json, seal_ok
from harness.base.workers import SettlingPool, Worker
from harness.data.schemas import FileEntry, validate

MANIFEST = "manifest.json"
SealedModel = TypeVar("SealedModel", bound=BaseModel)


@overload
def sha256_file(path: Path, stop: None = None) -> str: ...
@overload
def sha256_file(path: Path, stop: threading.Event | None) -> str | None: ...


def sha256_file(path: Path, stop: threading.Event | None = None) -> str | None:
    """The file's sha256; None when ``stop`` was set before it was read whole (without ``stop``: never None)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            if stop is not None and stop.is_set():
                return None
            h.update(chunk)
    return h.hexdigest()


def refuse_mismatch(path: Path, digest: str, expected: str) -> None:
    """One line when a file's sha256 is not the manifest's."""
    if digest != expected:
        raise GoldenError(
            f"{path}: sha256 {digest[:12]}... does not match the manifest's {expected[:12]}... (the file was modified)"
        )


def read_manifest(
    directory: Path,
    kind: str,
    model: type[SealedModel],
    derived: Callable[[Path, dict, SealedModel], None] | None = None,
) -> SealedModel:
    """The validated, unedited manifest of a ``kind`` ('golden' or 'run') directory, as its model.

    ``derived`` checks what the manifest derives from its own JSON as written (a golden's id), before
    that JSON is dropped: the model dumps to the same JSON, but a digest is taken of the bytes' meaning."""
    directory = Path(directory)
    path = directory / MANIFEST
    if directory.exists() and not directory.is_dir():
        raise GoldenError(f"{directory}: not a {kind} directory (a file; a {kind} is a folder holding {MANIFEST})")
    if not directory.is_dir():
        raise GoldenError(f"{directory}: no such {kind} directory")
    if is_temporary(directory.name):
        raise GoldenError(f"{directory}: an unfinished {kind} (a temporary folder of an interrupted write)")
    if not path.is_file():
        raise GoldenError(f"{directory}: not a complete {kind} (no {MANIFEST}; an interrupted write?)")
    data = read_json(path, f"{kind} manifest")
    if not isinstance(data, dict):
        raise GoldenError(f"{path}: not a {kind} manifest (a JSON {type(data).__name__}, expected an object)")
    found = data.get("kind")  # the raw JSON's kind, looked at before it is validated
    if found != f"harness.{kind}":
        raise GoldenError(f"{path}: not a {kind} manifest (kind={found!r})")
    parsed: SealedModel = validate(model, data, str(path), GoldenError)
    field = "manifest_sha256"
    if not seal_ok(data, field):
        raise GoldenError(
            f"{path}: edited after it was written ({field} does not match its content); a golden or "
            "run is never edited by hand: record or run it again"
        )
    if derived is not None:
        derived(path, data, parsed)
    return parsed


def sha256_files(paths: list[Path]) -> list[str]:
    """The sha256 of each file, several at once (hashlib releases the GIL: one core per file)."""
    if len(paths) <= 1:
        return [sha256_file(p) for p in paths]
    with SettlingPool(max_workers=min(len(paths), os.cpu_count() or 1)) as pool:
        return list(pool.map(sha256_file, paths))


class PendingHashes:
    """Files being hashed in a thread (while they are read for use); :meth:`wait` refuses a mismatch.

    For a file too large to hash before use without a second pass of waiting (a golden's corpus):
    whatever is made from it must not be kept before :meth:`wait` returns. :meth:`cancel` stops the
    hashing (a failed run)."""

    def __init__(self, directory: Path, files: Mapping[str, FileEntry], names: list[str]) -> None:
        self.directory, self.names = Path(directory), list(names)
        self._expected = {n: files[n].sha256 for n in self.names}
        self._digests: dict[str, str] = {}
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._worker = Worker(self._work, "sha256")

    def _work(self) -> None:
        try:
            for name in self.names:
                digest = sha256_file(self.directory / name, self._stop)
                if digest is None:
                    return
                self._digests[name] = digest
        except BaseException as exc:  # raised by wait()
            self._error = exc

    def wait(self) -> None:
        self._worker.join()
        if self._error is not None:
            raise GoldenError(f"{self.directory}: cannot hash {self.names}: {self._error}")
        for name in self.names:
            refuse_mismatch(self.directory / name, self._digests[name], self._expected[name])

    def cancel(self) -> None:
        with clean_up():  # it goes on after a second Ctrl-C, which is recorded
            self._stop.set()
            self._worker.join(hold=True)


class BackgroundHash:
    """One file's sha256, computed in a thread from now on (a capture of a gigabyte: seconds of hashing
    that overlap the work reading it); :meth:`result` waits for it, :meth:`cancel` stops it (a failed
    command: joined at the next chunk of 4 MiB, so Ctrl-C is not held up)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._digest: str | None = None
        self._error: OSError | None = None
        self._stop = threading.Event()
        self._worker = Worker(self._work, "sha256")

    def _work(self) -> None:
        try:
            self._digest = sha256_file(self.path, self._stop)
        except OSError as exc:  # raised by result(), in the caller's thread
            self._error = exc

    def result(self) -> str:
        """The digest; an unreadable file raises its OSError here."""
        self._worker.join()
        if self._error is not None:
            raise self._error
        assert self._digest is not None, "result() after cancel()"
        return self._digest

    def cancel(self) -> None:
        with clean_up():  # it goes on after a second Ctrl-C, which is recorded
            self._stop.set()
            self._worker.join(hold=True)


def check_files(directory: Path, listed: Mapping[str, FileEntry], hashed: Iterable[str] = ()) -> None:
    """Every listed file (a manifest's ``files``) present, a plain file inside ``directory``, of its
    recorded size; the files named in ``hashed`` also of their recorded sha256 (hashed in parallel);
    no unlisted data file."""
    directory = Path(directory)
    root = directory.resolve()
    hashed = set(hashed)
    to_hash = [name for name in sorted(listed) if name in hashed]
    for name, entry in sorted(listed.items()):
        path = directory / name
        if path.is_symlink() or not path.resolve().is_relative_to(root):
            raise GoldenError(f"{path}: listed in the manifest but not a plain file inside {directory}")
        if not path.is_file():
            raise GoldenError(f"{path}: listed in the manifest but missing")
        size = path.stat().st_size
        if size != entry.bytes:
            raise GoldenError(f"{path}: size {size} bytes, manifest says {entry.bytes} (truncated or replaced)")
    for name, digest in zip(to_hash, sha256_files([directory / n for n in to_hash]), strict=True):
        refuse_mismatch(directory / name, digest, listed[name].sha256)
    unknown = [name for name in hashed if name not in listed]
    if unknown:
        raise GoldenError(f"{directory / unknown[0]}: not listed in {directory / MANIFEST}")
    extra = sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*.parquet")
        if not any(is_temporary(part) for part in p.relative_to(directory).parts)
        and p.relative_to(directory).as_posix() not in listed
    )
    if extra:
        raise GoldenError(f"{directory / extra[0]}: data file not listed in the manifest")
