"""The server's process group: stopping it (SIGTERM, then SIGKILL once the grace period is over), waiting
until none of it is left, listing its live members, and tying the server's life to the harness's.

The server runs in its own process group with its Python backend stubs (:mod:`lanes.backends.triton.server`);
a stub may outlive a server that died or was killed, so the whole group is stopped and waited for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    # The stubs share the group; one may outlive a server that died or was killed.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    _wait_group_gone(proc.pid, timeout_s=5.0)


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and group_members(pgid):
        time.sleep(0.05)


def group_members(pgid: int) -> list[int]:
    """Live processes of a process group (Linux /proc); zombies count as gone."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the harness dies without stopping it (no orphans).

    The kernel sends it when the *thread* that started the server exits, hence main thread only.
    """
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
