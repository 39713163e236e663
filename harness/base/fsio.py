"""Every file the harness writes: atomic, umask-respecting, locked where shared, failing in one line.

- **Atomic.** A file is written beside its destination under a temporary name
  (``.<name>.tmp-<pid>-<random>``), flushed to disk and renamed into place, so a reader never sees
  half a file. A kill leaves at most a temporary name, which every reader ignores
  (:func:`is_temporary`); every other failure path removes it, and the folders it created.
  Several files that belong together (a report's pages) are renamed only when all were written
  (:func:`atomic_files`); nothing is renamed into place after a Ctrl-C or SIGTERM.
- **Modes follow the umask**: ``tempfile`` would create files 0600 and folders 0700, so a CI user
  could not read another user's goldens.
- **One line per failure**: an ``OSError`` becomes an :class:`OutputError` naming the path and
  the reason (not writable, a directory, disk full).
- **Checked before long work**: every output location of every command is checked before any work
  (creating nothing) by :mod:`harness.base.destinations`: writable, outside goldens and runs, no input.
- **Locks** (:func:`locked`) serialise read-modify-write of shared files (ledger, manifest).
- **Faults** (tests only): ``HARNESS_FAULT=kill:<point>`` SIGKILLs the process at a named point,
  ``HARNESS_FAULT=enospc:<point>`` fails there with "No space left on device",
  ``HARNESS_FAULT=bug:<point>`` raises an unexpected exception there (an internal error, exit 3),
  ``HARNESS_FAULT=term:<point>`` / ``int:<point>`` sends the process SIGTERM / SIGINT there,
  so tests can show what an interruption at each step leaves.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from harness.base.env_vars import variables
from harness.base.errors import HarnessError, OutputError, check_interrupted

_TEMP = re.compile(r"^\..+\.tmp-")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
_umask_lock = threading.Lock()
_umask_value: int | None = None


# ---------------------------------------------------------------------------------- modes, names


def umask() -> int:
    """The process umask (read once: reading it means setting it)."""
    global _umask_value
    with _umask_lock:
        if _umask_value is None:
            _umask_value = os.umask(0o022)
            os.umask(_umask_value)
        return _umask_value


def file_mode() -> int:
    return 0o666 & ~umask()


def dir_mode() -> int:
    return 0o777 & ~umask()


def is_temporary(name: str) -> bool:
    """A name this module uses while writing: never a result, ignored by every reader."""
    return bool(_TEMP.match(name))


def temp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def safe_name(text: str, what: str) -> str:
    """A name that becomes one path component (a release, a run id): no separators, no dot-start."""
    if not isinstance(text, str) or not _SAFE_NAME.match(text) or text in (".", ".."):
        raise HarnessError(
            f"{what} {text!r}: expected 1-100 characters of letters, digits, '.', '_', '+', '-', "
            "starting with a letter or digit (it becomes a folder name)"
        )
    return text


# ---------------------------------------------------------------------------------- faults


def fault(point: str) -> None:
    """Tests only: act on ``HARNESS_FAULT=<action>:<point>`` when execution reaches ``point``."""
    spec = variables().HARNESS_FAULT
    if not spec:
        return
    action, _, where = spec.partition(":")
    if where != point:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action in ("term", "int"):  # a CI job cancelled / Ctrl-C, arriving exactly here
        os.kill(os.getpid(), signal.SIGTERM if action == "term" else signal.SIGINT)
    elif action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    elif action == "bug":
        raise RuntimeError(f"fault injected at {point}")
    elif action == "slow":  # a starved consumer: every pass through the point waits
        sleep = variables().HARNESS_FAULT_SLEEP
        time.sleep(float("0.2" if sleep is None else sleep))


def os_failure(path: Path | str, exc: OSError, doing: str = "cannot write") -> OutputError:
    """One line for an OS error on ``path``: what could not be done, and why in the system's words; a full file
    system (or quota) is said to be the environment's, with what to do."""
    reason, then = exc.strerror or str(exc), ""
    if isinstance(exc, IsADirectoryError):
        reason = "it is a directory"
    elif isinstance(exc, NotADirectoryError):
        reason = "a parent is a file, not a directory"
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        then = ": its file system is full (the environment's doing, not the harness's): free space there, run again"
    return OutputError(f"{path}: {doing} ({reason}){then}")


# ---------------------------------------------------------------------------------- writing


def make_dirs(directory: Path) -> None:
    """``mkdir -p`` with the umask's mode."""
    Path(directory).mkdir(mode=dir_mode(), parents=True, exist_ok=True)


def missing_dirs(directory: Path) -> list[Path]:
    """The folders ``make_dirs(directory)`` would create, innermost first (a failure removes them)."""
    missing = []
    p = Path(directory)
    while not p.exists() and not p.is_symlink() and p.parent != p:
        missing.append(p)
        p = p.parent
    return missing


def remove_empty(dirs: list[Path]) -> None:
    """Remove these folders (innermost first) where they are still empty: what a failed write created."""
    for d in dirs:
        with contextlib.suppress(OSError):  # not empty (another writer's), or gone
            os.rmdir(d)


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` when the block succeeds.

    Whatever fails (an exception, disk full, Ctrl-C) removes the temporary file, and the folders
    made for it.
    """
    with atomic_files([path]) as (tmp,):
        yield tmp


@contextlib.contextmanager
def atomic_files(paths: list[Path]) -> Iterator[list[Path]]:
    """Yield a temporary path beside each of ``paths``; rename them all into place when the block
    succeeds, none when it fails (a report's files appear together or not at all).

    Whatever fails (an exception, disk full, Ctrl-C) removes every temporary file, and the folders
    made for them.
    """
    paths = [Path(p) for p in paths]
    tmps = [temp_sibling(p) for p in paths]
    created: list[Path] = []
    for p in paths:
        created += [d for d in missing_dirs(p.parent) if d not in created]
    current = paths[0] if paths else Path(".")
    try:
        for p in paths:
            make_dirs(p.parent)
        yield tmps
        check_interrupted()  # nothing is renamed into place after a Ctrl-C
        for tmp in tmps:
            if tmp.exists():
                os.chmod(tmp, file_mode())
                fsync_path(tmp)
        for p, tmp in zip(paths, tmps, strict=True):
            current = p
            fault(f"rename:{p.name}")
            os.replace(tmp, p)
    except OSError as exc:
        for tmp in tmps:
            remove_path(tmp)
        remove_empty(sorted(created, key=lambda d: len(d.parts), reverse=True))
        raise os_failure(current, exc) from None
    except BaseException:
        for tmp in tmps:
            remove_path(tmp)
        remove_empty(sorted(created, key=lambda d: len(d.parts), reverse=True))
        raise


def atomic_write_many(items: dict[Path, bytes | str]) -> list[Path]:
    """Write several files atomically as one: every file renamed into place only when all were
    written (see :func:`atomic_files`)."""
    paths = [Path(p) for p in items]
    with atomic_files(paths) as tmps:
        for path, tmp, data in zip(paths, tmps, items.values(), strict=True):
            try:
                fault(f"write:{path.name}")
                with open(tmp, "wb") as f:
                    f.write(data.encode("utf-8") if isinstance(data, str) else data)
            except OSError as exc:
                raise os_failure(path, exc) from None
    return paths


def atomic_write(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (see module doc)."""
    return atomic_write_many({Path(path): data})[0]


@contextlib.contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``final``; rename it to ``final`` on success.

    Nothing is ever overwritten: an existing ``final`` is refused before any work.
    """
    final = Path(final)
    if final.exists():
        raise OutputError(f"{final}: already exists; nothing is ever overwritten")
    tmp = temp_sibling(final)
    created = missing_dirs(final.parent)
    try:
        make_dirs(final.parent)
        tmp.mkdir(mode=dir_mode())
        yield tmp
        check_interrupted()
        for sub in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            os.chmod(sub, dir_mode())
        fault(f"rename:{final.name}")
        os.rename(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        raise os_failure(final, exc) from None
    except OutputError as exc:  # a file inside failed: name it where it was going, not by its temporary name
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        raise OutputError(str(exc).replace(str(tmp), str(final))) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        raise


def user_cache_dir(name: str) -> Path | None:
    """``$XDG_CACHE_HOME/diar-lane-harness/<name>`` (``~/.cache`` without it): the one place the harness keeps
    caches (the laws' verdicts, compiled report templates, hypothesis's own); None where no home folder can
    be found (``Path.home()`` raises for a user without one): then nothing is cached. Not created here."""
    try:
        base = Path(variables().XDG_CACHE_HOME or Path.home() / ".cache")
    except RuntimeError:
        return None
    return base / "diar-lane-harness" / name


def fsync_path(path: Path) -> None:
    """Flush a file's (or a folder's entries') bytes to disk; best effort (a file system may refuse)."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if Path(path).is_dir() else 0)
    with contextlib.suppress(OSError):
        fd = os.open(path, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_path(path: Path) -> None:
    """Remove a file, a link (never what it points to) or a folder tree; best effort, a missing one is fine."""
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists() or path.is_symlink():
            path.unlink()


# ---------------------------------------------------------------------------------- locks

LOCK_WAIT_S = 300.0  # a lock is held for the seconds of a commit or a publish; waiting longer, its holder hangs


def lock_wait_s() -> float:
    """How long a command waits for a lock another process holds: ``HARNESS_LOCK_WAIT_S`` (default 300 s)."""
    text = variables().HARNESS_LOCK_WAIT_S
    if text is None:
        return LOCK_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise HarnessError(f"HARNESS_LOCK_WAIT_S={text!r}: expected seconds to wait for a lock, a number > 0")
    return value


def _take(fd: int, shared: bool, lock: Path) -> None:
    """Take the lock on ``fd``, waiting at most :func:`lock_wait_s` (a Ctrl-C ends the wait at once): another
    harness command holds it for the seconds of its commit; one holding it longer is stopped or hangs, and
    this command says so instead of waiting for ever."""
    operation = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    bound = lock_wait_s()
    deadline, pause = time.monotonic() + bound, 0.005
    while True:
        try:
            fcntl.flock(fd, operation)
            return
        except BlockingIOError:
            pass
        check_interrupted()
        if time.monotonic() >= deadline:
            raise OutputError(
                f"{lock}: waited {bound:g} s for the lock another process holds (a harness command writing "
                f"{lock.name.removeprefix('.').removesuffix('.lock')}, stopped or hung: `fuser -v {lock}` names "
                "it); run again once it has ended (HARNESS_LOCK_WAIT_S sets the wait)"
            )
        time.sleep(pause)
        pause = min(2 * pause, 0.25)


def lock_path(path: Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path, shared: bool = False) -> Iterator[bool]:
    """Hold a lock for ``path`` (a ``.<name>.lock`` file beside it); yields whether one is held.

    Exclusive (the default) across a read-modify-write: every writer of the ledger and manifest
    takes it; a second process waits. ``shared`` for a read-only query: readers do not wait for each
    other, only for a writer; where the lock file cannot be created or opened because the folder is
    read-only (a read-only file system, another user's folder) a query runs without a lock (it then
    re-derives what it reads, so it still sees a consistent pair or refuses); a reader never creates
    a missing folder."""
    lock = lock_path(path)
    fd = None
    try:
        if not shared:
            make_dirs(lock.parent)
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, file_mode())
    except OSError as exc:
        if not shared:
            raise os_failure(lock, exc, "cannot take the lock") from None
        try:  # a reader may lock an existing lock file it cannot write
            fd = os.open(lock, os.O_RDONLY)
        except OSError as again:
            if again.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT) or exc.errno not in (
                errno.EROFS,
                errno.EACCES,
                errno.EPERM,
                errno.ENOENT,
            ):
                raise os_failure(lock, exc, "cannot take the lock") from None
    if fd is None:
        yield False
        return
    try:
        _take(fd, shared, lock)
        yield True
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
