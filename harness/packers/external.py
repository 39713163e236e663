"""A packer in another process (the engine's, in any language), spoken to over the wire protocol.

One long-lived process per :class:`ExternalPacker`: started once in its own process group
(:mod:`harness.packers.process`), greeted with the ``hello`` handshake (the packer names itself:
its identity), fed one request message at a time on its stdin, answering one message on its
stdout (:mod:`harness.packers.wire`), and ended with its whole group on
:meth:`ExternalPacker.close` (stdin closed; SIGTERM, then SIGKILL, to what is left). Every
answer is validated (:mod:`harness.packers.validate`) before the caller sees it.

Nothing here can hang or leak a traceback: every read and write has a deadline, and a packer
that dies, stalls, writes something that is not an Arrow IPC stream, or answers with a request
that breaks the contract becomes one :class:`~harness.packers.packer_errors.PackerError` naming the
command, the request it was handling, the last one it answered, and the last line of its stderr.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import IO, Any

import numpy as np
import pyarrow as pa

from harness import __version__
from harness.base.errors import clip
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.packers import command, identity, process, wire
from harness.packers.inputs import check_items, check_output, describe_items
from harness.packers.packer_errors import (
    PackerAnswerError,
    PackerFailed,
    PackerRefused,
    PackerTimeout,
    PackerUnavailable,
)
from harness.packers.packing import PackedRequest
from harness.packers.validate import check_packed, check_unpacked

START_S = 20.0  # the handshake may take this long at least: a packer's start-up is not a request's budget
EXIT_WAIT_S = 1.0  # after a broken pipe: how long the packer is given to exit, to say how it ended
HANDSHAKE = (
    f"wire protocol {wire.VERSION} starts with a handshake: the packer must answer the harness's "
    f"'hello' message with a 'hello' message whose schema metadata has version={wire.VERSION}, "
    "packer_name and packer_version (docs/packer-protocol.md, 'Handshake')"
)


class ExternalPacker:
    """A :class:`~harness.packers.packing.Packer` backed by one external process speaking the wire protocol.

    ``cmd`` is split like a shell would (``shlex``) but run without a shell; leading ``NAME=value``
    words set variables in the packer's environment (:mod:`harness.packers.command`). ``geometry``
    is the session's: the ``hello`` tells it, every request repeats it, answers are validated
    against it, and it never changes for one process (:meth:`with_geometry` starts another).
    ``timeout_s`` bounds every exchange (write the request, read the answer); the handshake gets at
    least :data:`START_S`. With ``restart`` a failed process is replaced by a fresh one on the next
    call, which must name itself as the first did (for a caller of this class that wants to go on
    after a crash; the laws and runs never restart a packer: its first failure ends them); without
    it, the packer stays failed and says why. ``digest``: the sha256 of the packer's program as the
    user states it (``--packer-digest``), in place of hashing the program's file; the rest of the
    command counts all the same (:func:`harness.packers.identity.command_digest`). Not thread-safe.
    """

    accepts_packs = False

    def __init__(
        self,
        cmd: str,
        geometry: Geometry,
        timeout_s: float = 30.0,
        restart: bool = False,
        digest: str | None = None,
        *,
        program: str | None = None,
    ) -> None:
        self.cmd = cmd
        self._geometry = geometry
        self.timeout_s = float(timeout_s)
        self.restart = restart
        self.name = f"external: {clip(cmd, quote=False)}"
        self.starts = 0
        self.declared: tuple[str, str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._failure: str | None = None
        self._last: str | None = None
        self._closed = False
        self._command = command.parse(cmd)
        self._argv = list(self._command.argv)
        if self.timeout_s <= 0:
            raise PackerUnavailable(f"packer {clip(cmd)}: timeout must be > 0 s, got {timeout_s}")
        self._stated = None if digest is None else identity.given_digest(digest, self._label)
        # hashed before anything starts; the process runs the program file hashed (identity module doc)
        self._hashed = identity.command_digest(self._command, self._label, self._stated, program)
        found = self._hashed
        self.digest, self.digest_parts, self.digest_files = found.digest, found.parts, found.files
        self.digest_source = "given" if self._stated is not None else "command"
        self._start()
        self.identity = identity.external_identity(*self._names(), self.digest)

    @property
    def geometry(self) -> Geometry:
        """The session's geometry (what the ``hello`` said); fixed for the life of the process."""
        return self._geometry

    def with_geometry(self, geometry: Geometry) -> ExternalPacker:
        """The same command, digest and timeout in a process of its own at ``geometry`` (its own ``hello``).

        The laws use it: their examples have a geometry of their own, and a session's never changes. The new
        session runs this one's program file (a link re-pointed since changes nothing) and is held to this
        one's content: a command whose files changed since this one was hashed is refused, naming the file,
        before the other session judges it."""
        self.check_unchanged()
        sibling = ExternalPacker(  # the program file this session runs, not what the command finds now
            self.cmd, geometry, self.timeout_s, self.restart, self._stated, program=self._hashed.program
        )
        changed = identity.differs(self._hashed, sibling._hashed)
        if changed is not None:
            sibling.close()
            raise PackerUnavailable(
                f"{self._label}: {changed} between two of its sessions (the fast lane's and the packing laws'): "
                "refusing, so that nothing judged for one content is recorded under another; run again once "
                "the packer's files stay as they are"
            )
        return sibling

    def check_unchanged(self) -> None:
        """Refuse (PackerUnavailable, one line naming the file) a packer whose program or file argument changed
        since it was hashed for its identity: what ran is then not what the identity names. Called after the
        ``hello`` (a packer that rewrites its own file as it starts), when another session of the same command
        starts, and before what a session did is kept (a run's manifest, a laws verdict)."""
        changed = identity.changed_since(self._hashed, self._command, self._label, self._stated)
        if changed is not None:
            raise PackerUnavailable(
                f"{self._label}: {changed} while the packer ran: its identity names the content hashed before "
                "it started, not what ran; refusing, nothing it did is kept; run again once the packer's files "
                "stay as they are"
            )

    # -------------------------------------------------------------- Packer

    def pack(self, items: Sequence[Block], pad_to: int | None = None) -> PackedRequest:
        check_items(items, pad_to, self._label)
        what = f"a pack request of {describe_items(items)}" + ("" if pad_to is None else f" padded to k={pad_to}")
        answer = self._exchange(wire.encode_pack(items, pad_to, self.geometry), what, (wire.PACKED, wire.ERROR))
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
            "..." if len(ids) > 3 else ""
        )
        answer = self._exchange(wire.encode_unpack(packed, name, out, self.geometry), what, (wire.UNPACKED, wire.ERROR))
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

    # the Packer protocol's describe(): a free-form JSON mapping a team's packer may fill as it likes
    def describe(self) -> dict[str, Any]:
        """Provenance: ``identity`` (what the ledger keys by), what it is made of, and how the digest was got."""
        name, version = self._names()
        return {
            "name": self.name,
            "kind": "external",
            "command": self.cmd,
            "wire_version": wire.VERSION,
            "timeout_s": self.timeout_s,
            "identity": self.identity,
            "packer_name": name,
            "packer_version": version,
            "digest": self.digest,
            "digest_source": (
                (
                    "--packer-digest (stated by the user) in place of the program's content, "
                    if self.digest_source == "given"
                    else "sha256 over the program's content, "
                )
                + "the variables the command sets and every argument's text (a file's: content)"
            ),
            "digest_parts": [part.to_json() for part in self.digest_parts],
            "digest_files": self.digest_files,
        }

    def close(self) -> None:
        """Close the packer's stdin (it should exit), then end its process group (SIGTERM, grace, SIGKILL)."""
        self._closed = True
        self._stop(graceful=True)

    def __enter__(self) -> ExternalPacker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- process

    @property
    def _label(self) -> str:
        return f"packer {clip(self.cmd)}"

    def _names(self) -> tuple[str, str]:
        """The (packer_name, packer_version) the handshake declared (it ran before the constructor returned)."""
        assert self.declared is not None, "the hello handshake sets declared or raises"
        return self.declared

    def _start(self) -> None:
        self._stderr = stderr = tempfile.TemporaryFile()
        try:
            self._proc = process.start(self._argv, stderr, dict(self._command.env), executable=self._hashed.program)
        except OSError as exc:
            stderr.close()
            raise PackerUnavailable(
                f"{self._label}: cannot start {clip(self._argv[0])}: {exc.strerror or exc}"
            ) from None
        self._finalizer = weakref.finalize(self, process.kill_group, self._proc)
        self._failure, self._last = None, None
        self.starts += 1
        self._handshake()
        try:
            self.check_unchanged()  # a packer that rewrote its own file as it started
        except PackerUnavailable:
            self.close()
            raise

    def _handshake(self) -> None:
        """``hello`` both ways: the packer's name and version, or one line saying what the protocol requires."""
        what = "the hello handshake"
        try:
            answer = self._exchange(
                wire.encode_hello(self.geometry, __version__),
                what,
                (wire.HELLO, wire.ERROR),
                max(self.timeout_s, START_S),
            )
        except PackerFailed as exc:
            raise PackerUnavailable(f"{exc}; {HANDSHAKE}") from None
        head = answer.head  # the hello answer's metadata names the packer
        problem = (
            f"refused it: {wire.error_text(answer)}"
            if answer.verb == wire.ERROR
            else identity.check_declared(head.packer_name, head.packer_version)
        )
        declared = (head.packer_name or "", head.packer_version or "")
        if problem is None and self.declared is not None and declared != self.declared:
            problem = f"restarted, it names itself {'/'.join(declared)}, not {'/'.join(self.declared)} as before"
        if problem is not None:
            raise PackerUnavailable(str(self._fail(PackerFailed, f"answered {what}, but {problem}")) + f"; {HANDSHAKE}")
        self.declared = declared

    def _stop(self, graceful: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        stdin, stdout = process.pipes(proc)
        try:
            stdin.close()
        except OSError:
            pass
        process.end_group(proc, min(5.0, self.timeout_s) if graceful else 0.0)
        stdout.close()
        self._finalizer.detach()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _ready(self) -> subprocess.Popen[bytes]:
        if self._closed:
            raise PackerUnavailable(f"{self._label}: already closed")
        if self._proc is None:
            if not self.restart:
                raise PackerUnavailable(f"{self._label}: unusable after an earlier failure: {self._failure}")
            self._start()
        assert self._proc is not None, "_start sets the process or raises"
        return self._proc

    def _fail(self, error: type[PackerFailed], text: str) -> PackerFailed:
        """Stop the process (the stream is out of step after a failure) and build the error.

        The message names the request before this one (a packer may crash on the request it last
        answered, and only die later) and quotes the last line of its stderr.
        """
        tail = self._stderr_tail()
        self._stop(graceful=False)
        before = f"the last request it answered: {self._last}" if self._last else "it had answered no request yet"
        message = f"{self._label}: {text} ({before}); " + (
            f"its stderr ends: {tail}" if tail else "its stderr is empty"
        )
        self._failure = message
        return error(message)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0, 2)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 4096))
            lines = [ln.strip() for ln in self._stderr.read().decode("utf-8", "replace").splitlines()]
        except OSError:
            return ""
        lines = [ln for ln in lines if ln]
        return repr(lines[-1][:300]) if lines else ""

    def _exited(self, proc: subprocess.Popen[bytes], pipe: str = "stdout") -> str:
        """'exited with status N', or, if it has not exited within a second, that it closed ``pipe`` (its stdin:
        it stopped reading; its stdout: it stopped answering)."""
        try:
            code = proc.wait(timeout=EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return f"closed its {pipe}"
        return f"exited with status {code}"

    def _exchange(
        self, payload: bytes, what: str, expect: tuple[str, ...], timeout_s: float | None = None
    ) -> wire.Message:
        proc = self._ready()
        stdin, stdout = process.pipes(proc)
        limit = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + limit
        try:
            process.write_all(stdin.fileno(), payload, deadline)
        except process.Timeout:
            raise self._fail(PackerTimeout, f"did not read {what} within {limit:g} s; killed") from None
        except (BrokenPipeError, ConnectionResetError):
            raise self._fail(PackerFailed, f"{self._exited(proc, 'stdin')} before reading {what}") from None
        try:
            reader = process.DeadlineReader(stdout.fileno(), deadline)
            message = wire.read_message(reader, expect)
        except process.Timeout:
            raise self._fail(PackerTimeout, f"did not answer {what} within {limit:g} s; killed") from None
        except EOFError:
            raise self._fail(PackerFailed, f"{self._exited(proc)} before answering {what}") from None
        except process.Garbage as exc:
            raise self._fail(
                PackerFailed,
                f"answered {what} with bytes that are not an Arrow IPC stream "
                f"({exc.args[0]!r}...); stdout is for the wire protocol only, "
                "logs go to stderr",
            ) from None
        except wire.WireError as exc:
            raise self._fail(PackerFailed, f"answered {what} with a message off the protocol: {exc}") from None
        except (pa.ArrowException, OSError, ValueError) as exc:
            state = "" if proc.poll() is None else f" and {self._exited(proc)}"
            raise self._fail(PackerFailed, f"broke off its answer to {what}{state}: {exc}") from None
        self._last = what
        return message
