"""The process behind an :class:`~harness.packers.ExternalPacker`: started in its own group, ended as a group.

A packer may fork (a worker, a shell pipeline, a compiler driver). Ending only the process the
harness started would leave its children running after ``harness laws`` ends, so the packer is
started as the leader of a new session (its own process group) and ended as a group: SIGTERM to
every member, a grace time, then SIGKILL to whatever is left (:func:`end_group`). A child that
starts a session of its own has left the group on purpose; it is out of reach (documented).

Reading is bounded too: :class:`DeadlineReader` gives pyarrow exact reads with one deadline and
names bytes that are not an Arrow IPC stream at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import time
from collections.abc import Mapping
from typing import IO, Any

CONTINUATION = b"\xff\xff\xff\xff"
MAX_SCHEMA_BYTES = 1 << 24
PIPE_BYTES = 1 << 20  # a schema message is a few KiB; more means the bytes are not a stream


class Timeout(Exception):
    pass


class Garbage(Exception):
    pass


class DeadlineReader:
    """A file-like reader of one fd for pyarrow: exact reads, each bounded by one deadline.

    The first 8 bytes of a stream are checked before pyarrow sees them (continuation marker and a
    plausible schema length), so text on stdout is named at once instead of read as a length.
    """

    closed = False

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd, self.deadline, self.position = fd, deadline, 0
        self.prefix = self._exact(4)
        if not self.prefix:
            raise EOFError
        if self.prefix != CONTINUATION:
            raise Garbage(self.prefix + self._available(28))
        self.prefix += self._exact(4)
        length = struct.unpack("<i", self.prefix[4:].ljust(4, b"\0"))[0]
        if len(self.prefix) < 8 or not 0 < length < MAX_SCHEMA_BYTES:
            raise Garbage(self.prefix + self._available(24))

    def _available(self, n: int) -> bytes:
        """Up to ``n`` more bytes if they are there right now (to quote garbage), without waiting."""
        ready, _, _ = select.select([self.fd], [], [], 0.05)
        return os.read(self.fd, n) if ready else b""

    def _exact(self, n: int) -> bytes:
        """``n`` bytes, or fewer at end of file; raise Timeout past the deadline."""
        buf = bytearray()
        while len(buf) < n:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                raise Timeout
            chunk = os.read(self.fd, n - len(buf))
            if not chunk:
                break
            buf += chunk
        return bytes(buf)

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            raise OSError("unbounded read on a packer pipe")
        head = b""
        if self.prefix:
            head, self.prefix = self.prefix[:n], self.prefix[n:]
        data = head + self._exact(n - len(head))
        self.position += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self.position


def widen(fd: int) -> None:
    """Ask Linux for a 1 MiB pipe buffer (requests are megabytes): fewer round trips between the processes."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except OSError:  # not Linux, or above the system's limit: the default buffer works, only slower
        pass


GRACE_S = 2.0  # between SIGTERM and SIGKILL: time for a packer (and its children) to clean up


def start(
    argv: list[str],
    stderr: int | IO[Any] | None,
    env: Mapping[str, str] | None = None,
    executable: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session (so its pgid is its pid), pipes widened, stdin non-blocking.

    ``env``: variables to set on top of the harness's environment (the command line's ``NAME=value``
    words); the program is looked up with the ``PATH`` they set, if they set one. ``executable``: the file
    to run in place of looking ``argv[0]`` up (the one hashed for the packer's identity); ``argv[0]`` is
    still what the program is told it was started as (a venv's Python finds its venv by it)."""
    proc = subprocess.Popen(
        argv,
        executable=executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        bufsize=0,
        start_new_session=True,
        env={**os.environ, **env} if env else None,
    )
    stdin, stdout = pipes(proc)
    os.set_blocking(stdin.fileno(), False)
    for pipe in (stdin, stdout):
        widen(pipe.fileno())
    return proc


def pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """The stdin and stdout of a process :func:`start` began (both pipes, so never None)."""
    assert proc.stdin is not None and proc.stdout is not None, "start() opens both pipes"
    return proc.stdin, proc.stdout


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running (zombies waiting for a reaper do not count)."""
    proc_dir = "/proc"
    if os.path.isdir(proc_dir):
        for entry in os.listdir(proc_dir):
            if not entry.isdigit():
                continue
            try:
                with open(f"{proc_dir}/{entry}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
            except OSError:  # gone while we looked
                continue
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
        return False
    try:  # not Linux: any member, zombies included
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def end_group(proc: subprocess.Popen[bytes], wait_s: float, grace_s: float = GRACE_S) -> None:
    """End the packer and every process of its group; return when none is left (or SIGKILL was sent).

    Waits up to ``wait_s`` for the leader to exit by itself (its stdin is closed), then sends
    SIGTERM to the group, waits up to ``grace_s`` for the group to empty, and sends SIGKILL.
    """
    pgid = proc.pid
    if wait_s > 0:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
    proc.poll()
    if group_alive(pgid):
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while group_alive(pgid) and time.monotonic() < deadline:
            proc.poll()  # reap the leader as soon as it exits
            time.sleep(0.02)
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
    _reap(proc)


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Collect the leader's exit status: an empty group can still hold it as a zombie that ``poll()``
    has not seen yet; a leader that somehow left its group is killed by pid."""
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the whole group at once (a finalizer at interpreter exit: no time to be graceful)."""
    _signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        proc.wait(timeout=5)


def write_all(fd: int, payload: bytes, deadline: float) -> None:
    """Write ``payload`` to a non-blocking pipe by ``deadline``; raise Timeout past it, BrokenPipeError if closed."""
    view = memoryview(payload)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Timeout
        _, ready, _ = select.select([], [fd], [], remaining)
        if not ready:
            raise Timeout
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            continue
        view = view[written:]
