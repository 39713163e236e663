"""The local server: repository filling, serve_forever, and a stop that leaves nothing behind."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from triton_support import NUMERICS

from harness.base.errors import BackendError
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from lanes.backends.triton import server as server_module
from lanes.backends.triton.process_group import group_members
from lanes.backends.triton.server import (
    REPOSITORY,
    ServerOptions,
    TritonServer,
    fill_config,
    serve_forever,
)

pytestmark = pytest.mark.triton


def test_shipped_config_declares_the_contract():
    text = (REPOSITORY / "diar_nn_g" / "config.pbtxt").read_text()
    for name, dtype, dims in [
        ("SPAN", "FP32", "-1"),
        ("OFFSETS", "INT64", "-1"),
        ("VALID", "INT32", "-1"),
        ("OP", "INT32", "1"),
        ("WEIGHTS", "FP32", "-1, -1"),
        ("IDX", "INT32", "-1"),
        ("SEGMENTATION", "FP32", "-1, -1, -1"),
        ("EMBEDDINGS", "FP32", "-1, -1"),
        ("MODEL_INFO", "STRING", "1"),
    ]:
        assert re.search(rf'name: "{name}", data_type: TYPE_{dtype}, dims: \[ {dims} \]', text), name
    assert 'backend: "python"' in text and "max_batch_size: 0" in text
    assert (REPOSITORY / "diar_nn_g" / "1" / "model.py").is_file()


def test_fill_config_sets_parameters_and_instances():
    text = (REPOSITORY / "diar_nn_g" / "config.pbtxt").read_text()
    numerics = json.dumps(NumericSettings(threads=1, mkldnn=False).to_dict())
    filled = fill_config(text, {"MODEL_SPEC": "pkg.mod:make", "NUMERICS": numerics, "NEW": "x"}, instances=3)
    assert 'parameters { key: "MODEL_SPEC" value: { string_value: "pkg.mod:make" } }' in filled
    assert '"full"' not in filled
    escaped = numerics.replace('"', '\\"')
    assert f'parameters {{ key: "NUMERICS" value: {{ string_value: "{escaped}" }} }}' in filled
    assert 'parameters { key: "NEW" value: { string_value: "x" } }' in filled
    assert "count: 3" in filled and "count: 1" not in filled
    assert filled.count('key: "MODEL_SPEC"') == 1


def test_serve_forever_stops_on_sigterm_and_leaves_nothing(tmp_path: Path, monkeypatch):
    """Also: a port taken between choosing and binding it is retried with other ports,
    extra_pythonpath reaches the stub (a factory outside the installed packages), ``instances``
    starts that many stubs, and a model that raises answers that one request with an error (not
    retried) and goes on serving."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    ports = iter([taken_port])
    real_free_port = server_module.free_port
    monkeypatch.setattr(server_module, "free_port", lambda: next(ports, None) or real_free_port())
    (tmp_path / "my_factories.py").write_text(
        "import numpy as np\n"
        "from lanes.controls.defects import InvariantModel, _named\n\n"
        "class Raising(InvariantModel):\n"
        "    def infer(self, request):\n"
        "        if np.asarray(request['SPAN']).shape[0] == 3:  # the test's sentinel request\n"
        "            raise RuntimeError('boom\\nsecond line')\n"
        "        return super().infer(request)\n\n"
        "def build(seed=0, device='cpu'):\n"
        "    model = _named(Raising('small', seed, device), 'raising')\n"
        "    model.name = 'from-extra-pythonpath'\n"
        "    return model\n"
    )
    seen: dict = {}

    def on_ready(url: str) -> None:
        seen["url"] = url
        with urllib.request.urlopen(f"{url}/v2/health/ready", timeout=5) as answer:
            seen["ready"] = answer.status
        seen["stubs"] = [p for p in group_members(_server_pid(url)) if _comm(p).startswith("triton_python")]
        from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend

        with TritonBackend(url, policy=CallPolicy(retries=3, backoff_s=2.0)) as backend:
            seen["model"] = backend.environment()["model"]["name"]
            sentinel = {
                "SPAN": np.zeros(3, np.float32),
                "OFFSETS": np.zeros(1, np.int64),
                "VALID": np.full(1, 3, np.int32),
                "OP": np.zeros(1, np.int32),
            }
            start = time.perf_counter()
            try:
                backend.call(Op.SEGMENTATION, sentinel, 1, 0, "sentinel request")
            except BackendError as exc:
                seen["error"], seen["error_s"] = str(exc), time.perf_counter() - start
            seen["after"] = backend.call(
                Op.SEGMENTATION, {**sentinel, "SPAN": np.zeros(4, np.float32)}, 1, 0, "after"
            ).output.shape
        os.kill(os.getpid(), signal.SIGTERM)  # what Ctrl-C / a service manager sends

    options = ServerOptions(
        model_spec="my_factories:build", numerics=NUMERICS, instances=2, extra_pythonpath=(str(tmp_path),)
    )
    before = signal.getsignal(signal.SIGTERM)
    with taken:
        server = serve_forever(options, on_ready=on_ready)
    assert signal.getsignal(signal.SIGTERM) is before  # handlers restored
    assert seen["url"] == server.url != f"http://127.0.0.1:{taken_port}"
    assert seen["ready"] == 200
    assert seen["model"] == "from-extra-pythonpath"
    assert "sentinel request" in seen["error"] and "RuntimeError: boom second line" in seen["error"]
    assert seen["error_s"] < 1.5  # not retried (backoff is 2 s)
    assert seen["after"][0] == 1
    assert len(seen["stubs"]) == 2
    assert not server.running()
    assert server.leftovers() == []


def test_stop_is_idempotent_and_start_twice_is_refused(triton_server):
    with pytest.raises(BackendError, match="already running"):
        triton_server.start()
    idle = TritonServer(ServerOptions())
    idle.stop()
    idle.stop()
    assert idle.leftovers() == []


def _server_pid(url: str) -> int:
    """The tritonserver process listening at ``url`` (found by its --http-port argument)."""
    port = url.rsplit(":", 1)[1]
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"tritonserver") and f"--http-port={port}".encode() in args:
            return int(cmdline.parent.name)
    raise AssertionError(f"no tritonserver process serves {url}")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
