"""System shared memory (``shm=True``): the same bits as HTTP, and nothing left in /dev/shm.

Nothing may be left after a run, an exception or a SIGKILL of the client: each region's name is
unlinked as soon as the server has registered (mapped) it, which these tests verify on the real
server (requests keep working, the server keeps listing the region, /dev/shm shows no name).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
import pytest
from triton_support import CONFIG, packed_calls, run_shapes

from harness.base.errors import BackendError
from harness.data.ops import ALL_OPS, Op
from harness.data.tolerances import Tolerances
from harness.pipeline.record import verify_golden
from harness.pipeline.score import score_run
from lanes.backends.triton import shm
from lanes.backends.triton.triton_backend import TritonBackend

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[2]


def registered(backend: TritonBackend) -> list[str]:
    """The regions the server lists as registered by this backend."""
    status = backend._client_now().get_system_shared_memory_status()
    return sorted(r["name"] for r in status if r["name"].startswith(backend.shm_prefix))


def test_shm_lanes_reproduce_the_golden_bitwise_with_no_name_in_dev_shm(triton_server, golden, tmp_path):
    seen = []
    with TritonBackend(triton_server.url, shm=True, concurrency=2) as backend:
        assert backend.environment()["transport"] == "shm"

        def look(n: int) -> None:  # between calls: regions registered, in use, and not in /dev/shm
            seen.append((registered(backend), shm.leftovers(backend.shm_prefix)))

        run = run_shapes(golden, backend, tmp_path / "runs", (2, 4), progress=look)
        check = score_run(golden, run, Tolerances()).verification
        assert verify_golden(golden, backend, CONFIG).status == "bitwise"
        prefix = backend.shm_prefix
    assert check.status == "bitwise" and sorted(check.ops) == [str(int(op)) for op in ALL_OPS], check
    assert all(names for names, _ in seen), "the server should list the registered regions"
    assert all(files == [] for _, files in seen), [files for _, files in seen if files][:1]
    assert shm.leftovers(prefix) == []


def test_shm_and_http_give_the_same_bits_at_every_op_and_k(triton_server, golden):
    calls = packed_calls(golden, ks=(1, 4))
    with TritonBackend(triton_server.url, shm=True) as via_shm, TritonBackend(triton_server.url) as via_http:
        a = via_shm.call_many(calls)
        b = via_http.call_many(calls)
        grown = registered(via_shm)
    assert all(np.array_equal(x.output, y.output) for x, y in zip(a, b, strict=True))
    assert 1 <= len(grown) <= via_shm.concurrency  # one region per request in flight


def test_negative_control_a_region_not_unlinked_is_seen(tmp_path):
    """The leftover check can see a region: one created and not unlinked shows up by its prefix."""
    prefix = f"{shm.PREFIX}{os.getpid()}_control_"
    region = shared_memory.SharedMemory(name=f"{prefix}0", create=True, size=4096)
    try:
        assert shm.leftovers(prefix) == [f"{prefix}0"]
    finally:
        region.close()
        region.unlink()
    assert shm.leftovers(prefix) == []


def test_an_exception_mid_run_leaves_nothing(triton_server, golden, tmp_path):
    """A failed request, then the harness itself raising between calls, with the backend never closed."""
    calls = packed_calls(golden, ks=(1,), ops=(Op.SEGMENTATION,))
    op, request, windows, rows, _ = calls[0]
    backend = TritonBackend(triton_server.url, shm=True, concurrency=2)
    prefix = backend.shm_prefix
    backend.call_many(calls[:4])
    with pytest.raises(BackendError, match="the model answered an error"):
        backend.call(op, {**request, "VALID": np.full_like(request["VALID"], 10**6)}, windows, rows, "bad")
    assert shm.leftovers(prefix) == []

    def crash(n: int) -> None:
        raise RuntimeError("the harness crashed between two calls")

    with pytest.raises(RuntimeError, match="crashed"):
        run_shapes(golden, backend, tmp_path / "runs", (4,), progress=crash)
    assert shm.leftovers(prefix) == []
    backend.close()
    assert shm.leftovers(prefix) == []


CLIENT = textwrap.dedent("""
    import sys, time
    from multiprocessing import shared_memory
    from lanes.backends.triton.triton_backend import TritonBackend
    from lanes.backends.triton import shm
    import numpy as np

    url = sys.argv[1]
    backend = TritonBackend(url, shm=True, concurrency=2)
    # The control: a region of this process's prefix that is never unlinked (as a client killed
    # between creating and registering a region would leave it).
    leak = shared_memory.SharedMemory(name=f"{shm.PREFIX}{__import__('os').getpid()}_leak", create=True, size=4096)
    request = {"SPAN": np.zeros(4000, np.float32), "OFFSETS": np.zeros(2, np.int64),
               "VALID": np.full(2, 1000, np.int32), "OP": np.zeros(1, np.int32)}
    from harness.data.ops import Op
    calls = [(Op.SEGMENTATION, request, 2, 0, f"call {i}") for i in range(4)]
    backend.call_many(calls)
    print(backend.shm_prefix, flush=True)
    while True:  # busy with requests when the kill comes
        backend.call_many(calls)
""")


def test_sigkill_of_the_client_leaves_no_region_of_ours(triton_server, tmp_path):
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(script), triton_server.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        prefix = proc.stdout.readline().strip()
        assert prefix.startswith(shm.PREFIX), proc.stderr.read() if proc.poll() is not None else prefix
        time.sleep(0.3)
        pid_prefix = f"{shm.PREFIX}{proc.pid}_"
        assert shm.leftovers(pid_prefix) == [f"{pid_prefix}leak"], "only the control while it runs"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the client and its children (Python's resource tracker too)
        proc.wait()
    assert shm.leftovers(prefix) == [], "the backend's regions outlived the kill"
    assert shm.leftovers(pid_prefix) == [f"{pid_prefix}leak"], "the control must survive the kill"
    # what the next backend does first: remove regions of processes that no longer exist
    assert f"{pid_prefix}leak" in shm.sweep_dead()
    assert shm.leftovers(pid_prefix) == []
