"""A guard that cleans up after a local Triton server even when the harness itself is killed.

``TritonServer.stop`` removes the server's temporary folder and shared-memory regions, and the
kernel sends the server SIGTERM when the harness dies (``PR_SET_PDEATHSIG``). But a harness that
is SIGKILLed (a CI job cancelled hard, the OOM killer) runs no ``finally``: the server stops,
its temporary folder (backend copy, repository, log: tens of MB) and any shared memory stay.

So each start also starts a **reaper**: a tiny stdlib-only Python process in its own session,
blocked reading a pipe whose only writer is the harness. However the harness ends, the kernel
closes that pipe. After a normal stop the harness first writes ``done`` (the reaper just exits);
otherwise the reaper stops what is left of the server's process group (only processes named
``tritonserver`` / ``triton_python*``: a process group id can be reused) and removes the
temporary folder and the ``/dev/shm`` regions with the server's prefix.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

NAMES = ("tritonserver", "triton_python")

_CODE = r"""
import os, shutil, signal, sys, time
pgid, prefix, names, folders = int(sys.argv[1]), sys.argv[2], tuple(sys.argv[3].split(",")), sys.argv[4:]
if sys.stdin.buffer.read() == b"done":  # blocks until the harness closes its end, however it ends
    sys.exit(0)

def members():
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm, fields = text[text.find("(") + 1 : text.rfind(")")], text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z" and comm.startswith(names):
            found.append(int(entry))
    return found

for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
    pids = members()
    if not pids:
        break
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    while members() and time.monotonic() < deadline:
        time.sleep(0.05)
if prefix:
    for name in os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass
for folder in folders:
    shutil.rmtree(folder, ignore_errors=True)
"""


class Reaper:
    """The reaper of one server start (see module doc). :meth:`release` after a normal stop."""

    def __init__(self, pgid: int, shm_prefix: str, folders: Sequence[Path], names: Sequence[str] = NAMES) -> None:
        self.proc: subprocess.Popen | None = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                _CODE,
                str(int(pgid)),
                shm_prefix,
                ",".join(names),
                *(str(f) for f in folders),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # not in the harness's process group: a Ctrl-C there must not stop it

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def release(self, timeout_s: float = 5.0) -> None:
        """The harness cleaned up itself: tell the reaper to exit without touching anything."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        stdin = proc.stdin  # never None: started with stdin=PIPE
        if stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                stdin.write(b"done")
            with contextlib.suppress(OSError, ValueError):
                stdin.close()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_reaper(pgid: int, shm_prefix: str, folders: Sequence[Path], names: Sequence[str] = NAMES) -> Reaper | None:
    """A reaper for this server start; None when one cannot be started (cleanup then rests on stop())."""
    try:
        return Reaper(pgid, shm_prefix, folders, names)
    except OSError:
        return None
