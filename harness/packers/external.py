"""A packer in another process (the engine's, in any language), spoken to over the wire protocol.

One long-lived process per :class:`ExternalPacker`: started once, fed one request message at a
time on its stdin, answering one message on its stdout (:mod:`harness.packers.wire`), and
stopped on :meth:`ExternalPacker.close` (stdin closed; killed if it does not exit). Every
answer is validated (:mod:`harness.packers.validate`) before the caller sees it.

Nothing here can hang or leak a traceback: every read and write has a deadline, and a packer
that dies, stalls, writes something that is not an Arrow IPC stream, or answers with a request
that breaks the contract becomes one :class:`~harness.packers.errors.PackerError` naming the
command and what happened (with the last line of the packer's stderr when it wrote one).
"""

from __future__ import annotations

import fcntl
import os
import select
import shlex
import struct
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from harness.blocks import Block
from harness.geometry import Geometry
from harness.packers import wire
from harness.packers.errors import (
    PackerAnswerError,
    PackerFailed,
    PackerRefused,
    PackerTimeout,
    PackerUnavailable,
)
from harness.packers.inputs import check_items, check_output, describe_items
from harness.packers.validate import check_packed, check_unpacked
from harness.packing import PackedRequest

CONTINUATION = b"\xff\xff\xff\xff"
MAX_SCHEMA_BYTES = 1 << 24
PIPE_BYTES = 1 << 20  # a schema message is a few KiB; more means the bytes are not a stream


class _Timeout(Exception):
    pass


class _Garbage(Exception):
    pass


class _DeadlineReader:
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
            raise _Garbage(self.prefix + self._available(28))
        self.prefix += self._exact(4)
        length = struct.unpack("<i", self.prefix[4:].ljust(4, b"\0"))[0]
        if len(self.prefix) < 8 or not 0 < length < MAX_SCHEMA_BYTES:
            raise _Garbage(self.prefix + self._available(24))

    def _available(self, n: int) -> bytes:
        """Up to ``n`` more bytes if they are there right now (to quote garbage), without waiting."""
        ready, _, _ = select.select([self.fd], [], [], 0.05)
        return os.read(self.fd, n) if ready else b""

    def _exact(self, n: int) -> bytes:
        """``n`` bytes, or fewer at end of file; raise _Timeout past the deadline."""
        buf = bytearray()
        while len(buf) < n:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise _Timeout
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                raise _Timeout
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


def _widen(fd: int) -> None:
    """Ask Linux for a 1 MiB pipe buffer (requests are megabytes): fewer round trips between the processes."""
    try:
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except OSError:  # not Linux, or above the system's limit: the default buffer works, only slower
        pass


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
            pass


class ExternalPacker:
    """A :class:`~harness.packing.Packer` backed by one external process speaking the wire protocol.

    ``cmd`` is split like a shell would (``shlex``) but run without a shell. ``geometry`` is what
    answers are validated against. ``timeout_s`` bounds every exchange (write the request, read
    the answer). With ``restart`` a failed process is replaced by a fresh one on the next call
    (the laws use this to go on searching for a minimal crashing input); without it, the packer
    stays failed and says why. Not thread-safe: one exchange at a time.
    """

    accepts_packs = False

    def __init__(self, cmd: str, geometry: Geometry, timeout_s: float = 30.0, restart: bool = False) -> None:
        self.cmd = cmd
        self.geometry = geometry
        self.timeout_s = float(timeout_s)
        self.restart = restart
        self.name = f"external: {cmd}"
        self.starts = 0
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self._failure: str | None = None
        self._closed = False
        try:
            self._argv = shlex.split(cmd)
        except ValueError as exc:
            raise PackerUnavailable(f"packer command {cmd!r}: cannot be parsed ({exc})") from None
        if not self._argv:
            raise PackerUnavailable("packer command is empty")
        if self.timeout_s <= 0:
            raise PackerUnavailable(f"packer {cmd!r}: timeout must be > 0 s, got {timeout_s}")
        self._start()

    # -------------------------------------------------------------- Packer

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
        check_items(items, pad_to, self._label)
        what = f"a pack request of {describe_items(items)}" + ("" if pad_to is None else f" padded to k={pad_to}")
        answer = self._exchange(wire.encode_pack(items, pad_to), what, (wire.PACKED, wire.ERROR))
        if answer.verb == wire.ERROR:
            raise PackerRefused(f"{self._label}: refused {what}: {wire.error_text(answer)}")
        where = f"{self._label}: answer to {what}"
        try:
            packed = wire.decode_packed(answer)
        except PackerAnswerError as exc:
            raise PackerAnswerError(f"{where}: {exc}") from None
        return check_packed(packed, items, pad_to, self.geometry, where)

    def unpack(self, packed: PackedRequest, outputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        name, out = check_output(packed, outputs)
        ids = packed.block_ids
        what = f"an unpack request of {out.dtype}{list(out.shape)} for {len(ids)} block(s) {ids[:3]}" + (
            "..." if len(ids) > 3 else "")
        answer = self._exchange(wire.encode_unpack(packed, name, out), what, (wire.UNPACKED, wire.ERROR))
        if answer.verb == wire.ERROR:
            raise PackerRefused(f"{self._label}: refused {what}: {wire.error_text(answer)}")
        where = f"{self._label}: answer to {what}"
        try:
            got_ids, parts = wire.decode_unpacked(answer, out.dtype)
        except PackerAnswerError as exc:
            raise PackerAnswerError(f"{where}: {exc}") from None
        if got_ids != ids:
            raise PackerAnswerError(f"{where}: answered blocks {got_ids[:4]}, expected {ids[:4]} in that order")
        return check_unpacked(parts, packed, out, where)

    def describe(self) -> dict:
        return {"name": self.name, "kind": "external", "command": self.cmd, "wire_version": wire.VERSION,
                "timeout_s": self.timeout_s}

    def close(self) -> None:
        """Close the packer's stdin (it should exit), wait a little, then kill it if it did not."""
        self._closed = True
        self._stop(graceful=True)

    def __enter__(self) -> ExternalPacker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- process

    @property
    def _label(self) -> str:
        return f"packer {self.cmd!r}"

    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        try:
            self._proc = subprocess.Popen(self._argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=self._stderr, bufsize=0)
        except OSError as exc:
            self._stderr.close()
            raise PackerUnavailable(f"{self._label}: cannot start {self._argv[0]!r}: "
                                    f"{exc.strerror or exc}") from None
        os.set_blocking(self._proc.stdin.fileno(), False)
        for pipe in (self._proc.stdin, self._proc.stdout):
            _widen(pipe.fileno())
        self._finalizer = weakref.finalize(self, _kill, self._proc)
        self._failure = None
        self.starts += 1

    def _stop(self, graceful: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        if graceful:
            try:
                proc.wait(timeout=min(5.0, self.timeout_s))
            except subprocess.TimeoutExpired:
                pass
        _kill(proc)
        proc.stdout.close()
        self._finalizer.detach()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _ready(self) -> subprocess.Popen:
        if self._closed:
            raise PackerUnavailable(f"{self._label}: already closed")
        if self._proc is None:
            if not self.restart:
                raise PackerUnavailable(f"{self._label}: unusable after an earlier failure: {self._failure}")
            self._start()
        return self._proc

    def _fail(self, error: type[PackerFailed], text: str) -> PackerFailed:
        """Stop the process (the stream is out of step after a failure) and build the error."""
        tail = self._stderr_tail()
        self._stop(graceful=False)
        message = f"{self._label}: {text}" + (f"; its stderr ends: {tail}" if tail else "")
        self._failure = message
        return error(message)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            lines = [ln.strip() for ln in self._stderr.read()[-4096:].decode("utf-8", "replace").splitlines()]
        except OSError:
            return ""
        lines = [ln for ln in lines if ln]
        return repr(lines[-1][:300]) if lines else ""

    def _exited(self, proc: subprocess.Popen) -> str:
        try:
            code = proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "closed its stdout"
        return f"exited with status {code}"

    def _exchange(self, payload: bytes, what: str, expect: tuple[str, ...]) -> wire.Message:
        proc = self._ready()
        deadline = time.monotonic() + self.timeout_s
        try:
            self._write(proc, payload, deadline)
        except _Timeout:
            raise self._fail(PackerTimeout, f"did not read {what} within {self.timeout_s:g} s; killed") from None
        except (BrokenPipeError, ConnectionResetError):
            raise self._fail(PackerFailed, f"{self._exited(proc)} before reading {what}") from None
        try:
            reader = _DeadlineReader(proc.stdout.fileno(), deadline)
            return wire.read_message(reader, expect)
        except _Timeout:
            raise self._fail(PackerTimeout, f"did not answer {what} within {self.timeout_s:g} s; killed") from None
        except EOFError:
            raise self._fail(PackerFailed, f"{self._exited(proc)} before answering {what}") from None
        except _Garbage as exc:
            raise self._fail(PackerFailed, f"answered {what} with bytes that are not an Arrow IPC stream "
                                           f"({exc.args[0]!r}...); stdout is for the wire protocol only, "
                                           "logs go to stderr") from None
        except wire.WireError as exc:
            raise self._fail(PackerFailed, f"answered {what} with a message off the protocol: {exc}") from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            state = "" if proc.poll() is None else f" and {self._exited(proc)}"
            raise self._fail(PackerFailed, f"broke off its answer to {what}{state}: {exc}") from None

    @staticmethod
    def _write(proc: subprocess.Popen, payload: bytes, deadline: float) -> None:
        fd = proc.stdin.fileno()
        view = memoryview(payload)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Timeout
            _, ready, _ = select.select([], [fd], [], remaining)
            if not ready:
                raise _Timeout
            try:
                written = os.write(fd, view)
            except BlockingIOError:
                continue
            view = view[written:]

