"""`harness serve` leaves nothing behind even when the harness is SIGKILLed.

The reaper (lanes.backends.triton.reaper) needs no Triton: a process named ``tritonserver`` in its own
process group, a temporary folder and a shared-memory file stand in for a server start.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HARNESS = r"""
import os, subprocess, sys, time
from pathlib import Path
from lanes.backends.triton.reaper import start_reaper
binary, folder, shm, release = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4] == "release"
server = subprocess.Popen([binary, "1000"], start_new_session=True)
folder.mkdir()
(folder / "tritonserver.log").write_text("log")
Path("/dev/shm", shm + "region").write_bytes(b"x")
reaper = start_reaper(server.pid, shm, [folder])
print(server.pid, reaper.pid, flush=True)
if release:  # a normal stop: the harness cleans up itself, then releases the reaper
    server.kill(); server.wait()
    reaper.release()
    print("released", flush=True)
time.sleep(1000)
"""


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2 :].split()[0] != "Z"


def _start(tmp_path: Path, release: bool) -> tuple[subprocess.Popen, int, int, Path, str]:
    binary = tmp_path / "tritonserver"  # the reaper stops only processes named like the server's
    shutil.copy(shutil.which("sleep"), binary)
    folder = tmp_path / "diar-triton-x"
    shm = f"diar_triton_test{os.getpid()}_"
    root = Path(__file__).resolve().parents[1]
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, str(binary), str(folder), shm, "release" if release else "die"],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    server_pid, reaper_pid = (int(v) for v in harness.stdout.readline().split())
    return harness, server_pid, reaper_pid, folder, shm


def _wait(condition, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_killed_harness_leaves_no_server_folder_or_shared_memory(tmp_path):
    harness, server, reaper, folder, shm = _start(tmp_path, release=False)
    try:
        assert _alive(server) and _alive(reaper) and folder.is_dir() and list(Path("/dev/shm").glob(shm + "*"))
        harness.send_signal(signal.SIGKILL)  # no finally, no stop(): only the reaper is left to clean up
        harness.wait()
        assert _wait(lambda: not _alive(server)), "the server outlived the harness"
        assert _wait(lambda: not folder.exists()), "the server's temporary folder was left"
        assert _wait(lambda: not list(Path("/dev/shm").glob(shm + "*"))), "shared memory was left"
        assert _wait(lambda: not _alive(reaper)), "the reaper did not exit"
    finally:
        for pid in (server, reaper):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        for p in Path("/dev/shm").glob(shm + "*"):
            p.unlink()


def test_a_released_reaper_touches_nothing(tmp_path):
    """After a normal stop the reaper exits at once, and never signals a process group (whose id the
    system may already have given to another)."""
    harness, server, reaper, folder, shm = _start(tmp_path, release=True)
    try:
        assert harness.stdout.readline().strip() == "released"
        assert _wait(lambda: not _alive(reaper), 5.0)
        assert folder.is_dir() and list(Path("/dev/shm").glob(shm + "*"))  # left for the harness's own stop()
    finally:
        harness.kill()
        harness.wait()
        if _alive(server):
            os.kill(server, signal.SIGKILL)
        for p in Path("/dev/shm").glob(shm + "*"):
            p.unlink()


def test_the_reaper_spares_processes_of_other_names(tmp_path):
    """A process group id can be reused: only processes named like Triton's are stopped."""
    from lanes.backends.triton.reaper import Reaper

    other = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    folder = tmp_path / "gone"
    folder.mkdir()
    reaper = Reaper(other.pid, "", [folder])
    try:
        reaper.proc.stdin.close()  # as if the harness died
        assert _wait(lambda: not folder.exists()) and _wait(lambda: reaper.proc.poll() is not None)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
