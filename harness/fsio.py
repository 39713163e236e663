"""Every file the harness writes: atomic, umask-respecting, locked where shared, failing in one line.

- **Atomic.** A file is written beside its destination under a temporary name
  (``.<name>.tmp-<pid>-<random>``), flushed to disk and renamed into place, so a reader never sees
  half a file. A kill leaves at most a temporary name, which every reader ignores
  (:func:`is_temporary`); every other failure path removes it.
- **Modes follow the umask**: ``tempfile`` would create files 0600 and folders 0700, so a CI user
  could not read another user's goldens.
- **One line per failure**: an ``OSError`` becomes an :class:`OutputError` naming the path and
  the reason (not writable, a directory, disk full).
- **Checked before long work**: :func:`check_output_file` and :func:`check_writable_dir` refuse an
  output that cannot be written *before* a model runs for minutes.
- **Locks** (:func:`locked`) serialise read-modify-write of shared files (ledger, manifest).
- **Faults** (tests only): ``HARNESS_FAULT=kill:<point>`` SIGKILLs the process at a named point,
  ``HARNESS_FAULT=enospc:<point>`` fails there with "No space left on device", so tests can show
  what an interruption at each step leaves.
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
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError, OutputError

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
        raise HarnessError(f"{what} {text!r}: expected 1-100 characters of letters, digits, '.', '_', '+', '-', "
                           "starting with a letter or digit (it becomes a folder name)")
    return text


# ---------------------------------------------------------------------------------- faults


def fault(point: str) -> None:
    """Tests only: act on ``HARNESS_FAULT=<action>:<point>`` when execution reaches ``point``."""
    spec = os.environ.get("HARNESS_FAULT")
    if not spec:
        return
    action, _, where = spec.partition(":")
    if where != point:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "enospc":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    elif action == "bug":
        raise RuntimeError(f"fault injected at {point}")


def os_failure(path: Path | str, exc: OSError, doing: str = "cannot write") -> OutputError:
    reason = exc.strerror or str(exc)
    if isinstance(exc, IsADirectoryError):
        reason = "it is a directory"
    elif isinstance(exc, NotADirectoryError):
        reason = "a parent is a file, not a directory"
    return OutputError(f"{path}: {doing} ({reason})")


# ---------------------------------------------------------------------------------- pre-checks


def check_writable_dir(directory: Path, what: str = "output folder") -> None:
    """Refuse, before any work, a folder that cannot receive files (created if missing)."""
    directory = Path(directory)
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{directory}: cannot write the {what}: {existing} is a file, not a folder")
    try:
        make_dirs(directory)
        probe = temp_sibling(directory / "probe")
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, file_mode())
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise os_failure(directory, exc, f"cannot write the {what} here") from None


def check_output_file(path: Path, what: str, overwrite: bool = True) -> Path:
    """Refuse an output file path that is a folder, sits under a file, is unwritable, or is inside
    a golden or run directory (their content is sealed by a manifest)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: cannot write the {what}: it is a directory")
    if path.exists() and not overwrite:
        raise OutputError(f"{path}: cannot write the {what}: the file exists (nothing is overwritten; "
                          "choose another path)")
    sealed = sealed_directory(path)
    if sealed is not None:
        raise OutputError(f"{path}: cannot write the {what} inside {sealed} (a golden or run directory is "
                          "sealed by its manifest)")
    check_writable_dir(path.parent, what)
    return path


def sealed_directory(path: Path) -> Path | None:
    """The golden or run directory ``path`` lies in, if any (one with a harness manifest)."""
    for parent in Path(path).absolute().parents:
        manifest = parent / "manifest.json"
        if manifest.is_file():
            try:
                head = manifest.read_text(errors="replace")[:4096]
            except OSError:
                continue
            if '"harness.golden"' in head or '"harness.run"' in head:
                return parent
    return None


def same_file(a: Path, b: Path) -> bool:
    a, b = Path(a), Path(b)
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


# ---------------------------------------------------------------------------------- writing


def make_dirs(directory: Path) -> None:
    """``mkdir -p`` with the umask's mode."""
    Path(directory).mkdir(mode=dir_mode(), parents=True, exist_ok=True)


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` when the block succeeds.

    Whatever fails (an exception, disk full, Ctrl-C) removes the temporary file.
    """
    path = Path(path)
    tmp = temp_sibling(path)
    try:
        make_dirs(path.parent)
        yield tmp
        if tmp.exists():
            os.chmod(tmp, file_mode())
            _fsync(tmp)
        fault(f"rename:{path.name}")
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise os_failure(path, exc) from None
    except BaseException:
        _remove(tmp)
        raise


def atomic_write(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically (see module doc)."""
    path = Path(path)
    with atomic_file(path) as tmp:
        fault(f"write:{path.name}")
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return path


@contextlib.contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``final``; rename it to ``final`` on success.

    Nothing is ever overwritten: an existing ``final`` is refused before any work.
    """
    final = Path(final)
    if final.exists():
        raise OutputError(f"{final}: already exists; nothing is ever overwritten")
    tmp = temp_sibling(final)
    try:
        make_dirs(final.parent)
        tmp.mkdir(mode=dir_mode())
        yield tmp
        for sub in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            os.chmod(sub, dir_mode())
        fault(f"rename:{final.name}")
        os.rename(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise os_failure(final, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _fsync(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()


# ---------------------------------------------------------------------------------- locks


def lock_path(path: Path) -> Path:
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock for ``path`` (a ``.<name>.lock`` file beside it) across a
    read-modify-write. Every writer of the ledger and manifest takes it; a second process waits."""
    lock = lock_path(path)
    try:
        make_dirs(lock.parent)
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, file_mode())
    except OSError as exc:
        raise os_failure(lock, exc, "cannot take the lock") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
