"""Faults against a real server: each is one clear BackendError line, and nothing partial is written.

Every fault is driven through the real pipeline (``run_shapes``, as ``harness run`` does), so "nothing
written" is checked where a user would look: the runs folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from triton_support import MODEL, NUMERICS, run_shapes, serving

from harness.base.errors import BackendError
from lanes.backends.triton.server import ServerOptions, free_port
from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend

pytestmark = pytest.mark.triton


def run_and_write(backend, golden, root: Path, progress=None):
    return run_shapes(golden, backend, root, (2,), progress=progress)


def assert_one_line(error: pytest.ExceptionInfo, *parts: str) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"
    return message


def assert_nothing_written(root: Path) -> None:
    assert not root.exists() or list(root.iterdir()) == [], sorted(p.name for p in root.iterdir())


def test_server_not_running():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(BackendError) as err:
        TritonBackend(url, policy=CallPolicy(retries=2, backoff_s=0.01))
    assert_one_line(err, url, "not reachable", "connection refused", "after 2 retries", "diar_nn_g")


def test_model_not_loaded(triton_server):
    with pytest.raises(BackendError) as err:
        TritonBackend(triton_server.url, model_name="diar_nn_x", policy=CallPolicy(retries=0))
    assert_one_line(err, triton_server.url, "'diar_nn_x'", "no ready model", "diar_nn_g READY")


def test_server_killed_mid_run(golden, runs_root):
    calls = []

    with serving(ServerOptions(model_spec=MODEL, numerics=NUMERICS)) as server:
        backend = TritonBackend(server.url, policy=CallPolicy(retries=2, backoff_s=0.05))

        def kill_after_three(n: int) -> None:  # runs between calls, in the runner's thread
            calls.append(n)
            if len(calls) == 3:
                server.kill()

        with pytest.raises(BackendError) as err:
            run_and_write(backend, golden, runs_root, progress=kill_after_three)
        backend.close()
    assert len(calls) == 3
    assert_one_line(err, server.url, "not reachable", "after 2 retries", "lane k=")
    assert_nothing_written(runs_root)


def test_request_timeout(golden, runs_root, monkeypatch):
    monkeypatch.setenv("HARNESS_SLOW_SECONDS", "2")  # the server inherits it
    with serving(ServerOptions(model_spec="lanes.controls:slow", numerics=NUMERICS)) as server:
        backend = TritonBackend(server.url, policy=CallPolicy(timeout_s=0.5, retries=3, backoff_s=0.05))
        with pytest.raises(BackendError) as err:
            run_and_write(backend, golden, runs_root)
        backend.close()
    assert_one_line(err, server.url, "'diar_nn_g'", "did not answer within timeout_s=0.5 s", "exact lane k=1 OP 0")
    assert_nothing_written(runs_root)


def test_wrong_output_shape(golden, runs_root):
    windows = golden.geometry.windows_per_block
    with serving(ServerOptions(model_spec="lanes.controls:wrong_shape", numerics=NUMERICS)) as server:
        backend = TritonBackend(server.url)
        assert backend.fingerprint != golden.fingerprint  # a control names itself
        with pytest.raises(BackendError) as err:
            run_and_write(backend, golden, runs_root)
        backend.close()
    assert_one_line(
        err,
        server.url,
        "exact lane k=1 OP 0",
        "output SEGMENTATION has shape",
        f"[{windows - 1}, ",
        f"expected [{windows}, ",
    )
    assert_nothing_written(runs_root)


def test_broken_repository_fails_startup_with_the_log(tmp_path):
    repo = tmp_path / "repo" / "diar_nn_g"
    (repo / "1").mkdir(parents=True)
    (repo / "config.pbtxt").write_text(
        'name: "diar_nn_g"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "SPAN", data_type: TYPE_FP32, dims: [ -1 ] } ]\n'
        'output [ { name: "SEGMENTATION", data_type: TYPE_FP32, dims: [ -1 ] } ]\n'
    )
    (repo / "1" / "model.py").write_text("raise RuntimeError('deliberately broken model')\n")
    from lanes.backends.triton.server import TritonServer

    server = TritonServer(ServerOptions(model_spec=MODEL, repository=tmp_path / "repo", startup_timeout_s=60))
    with pytest.raises(BackendError) as err:
        server.start()
    message = str(err.value)
    assert message.startswith("Triton server exited during startup")
    assert "deliberately broken model" in message  # the log's last lines say why
    assert not server.running() and server.leftovers() == []


def test_a_killed_serve_leaves_no_server_no_folder_and_no_shared_memory(tmp_path):
    """``harness serve`` SIGKILLed (no chance to stop its server): its reaper stops the server's
    process group and removes the temporary folder and the backend's shared-memory files."""
    import os
    import subprocess
    import sys
    import time

    from lanes.backends.triton.process_group import group_members
    from lanes.backends.triton.server import SHM_DIR

    before_tmp = set(Path("/tmp").glob("diar-triton-*"))
    before_shm = set(SHM_DIR.glob("diar_triton_*"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "serve", "--model", "small", "--set", "numerics.threads=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 240
        line = ""
        while "served at" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "served at" in line, f"serve did not come up: {line!r} (exit {proc.poll()})"
        new_tmp = set(Path("/tmp").glob("diar-triton-*")) - before_tmp
        new_shm = set(SHM_DIR.glob("diar_triton_*")) - before_shm
        assert new_tmp, "the server's temporary folder should exist while it runs"
        servers = [
            pid
            for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if _comm(pid) == "tritonserver" and _tree_has(pid, proc.pid)
        ]
        assert servers, "no tritonserver process under harness serve"
        pgid = os.getpgid(servers[0])
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        group_members(pgid) or any(p.exists() for p in new_tmp) or any(p.exists() for p in new_shm)
    ):
        time.sleep(0.2)
    assert group_members(pgid) == [], "a server process outlived its harness"
    assert not any(p.exists() for p in new_tmp), sorted(map(str, new_tmp))
    assert not any(p.exists() for p in new_shm), sorted(map(str, new_shm))


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return int(text[text.rfind(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _tree_has(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        pid = _parent(pid)
    return False
