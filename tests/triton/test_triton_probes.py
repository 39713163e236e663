"""Facts the design notes could only infer from source (seed 000), measured on the bundled server.

The probe models (``probe_repository/``, Python backend, no torch) answer, per request, how many
requests the ``execute()`` call that served it held and which inputs it received. docs/triton.md
records each fact with the test that establishes it:

- a ``dynamic_batching`` block on a ``max_batch_size: 0`` model still gives ``execute()`` one
  request per call, while the same batcher on ``max_batch_size: 8`` (the negative control) does
  give it several;
- the Python backend does not generate batch inputs (``BATCH_ACCUMULATED_ELEMENT_COUNT``) for a
  ragged batch, and does not concatenate ragged inputs either: each request keeps its own tensor;
- Triton 2.51 accepts a binary HTTP request larger than 64 MiB and has no ``--http-max-input-size``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from triton_support import serving

from lanes.backends.triton.server import Bundle, ServerOptions, TritonServer, server_env

pytestmark = pytest.mark.triton

PROBES = Path(__file__).parent / "probe_repository"
REQUESTS = 32  # in flight at once: far more than one execute() takes, so the queue is never empty
DELAY_S = 0.05  # each execute() sleeps this long (config parameter), so requests pile up behind it


@pytest.fixture(scope="module")
def probe_server() -> Iterator[TritonServer]:
    pytest.importorskip("tritonclient.http", reason="the Triton tests need the 'triton' extra")
    with serving(ServerOptions(repository=PROBES, verbatim=True, model_name="probe_unbatched")) as server:
        yield server


@pytest.fixture(scope="module")
def client(probe_server: TritonServer):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(
        probe_server.url.split("://")[1], concurrency=REQUESTS, network_timeout=120.0
    )
    yield client
    client.close()


def concurrent_reports(client, model: str, lengths: list[int], batched: bool) -> list[dict]:
    """Send one request per length, all at once, and return each request's REPORT (in order)."""
    import tritonclient.http as httpclient

    handles = []
    for i, n in enumerate(lengths):
        x = np.arange(n, dtype=np.float32) + 100 * i
        x = x.reshape(1, n) if batched else x
        tensor = httpclient.InferInput("X", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=True)
        handles.append(client.async_infer(model, [tensor]))
    return [json.loads(h.get_result(timeout=120).as_numpy("REPORT").reshape(-1)[0]) for h in handles]


def per_execute(reports: list[dict]) -> dict[int, int]:
    """execute() call -> requests it held, as the probe reported it."""
    calls: dict[int, int] = {}
    for r in reports:
        calls.setdefault(r["execute"], r["requests_in_execute"])
    return calls


def test_dynamic_batching_on_max_batch_size_0_still_gives_one_request_per_execute(client):
    config = client.get_model_config("probe_unbatched_dynamic")
    assert config["max_batch_size"] == 0 and "dynamic_batching" in config, "the batcher must be configured"
    for model in ("probe_unbatched", "probe_unbatched_dynamic"):
        reports = concurrent_reports(client, model, [5] * REQUESTS, batched=False)
        calls = per_execute(reports)
        assert set(calls.values()) == {1}, f"{model}: requests per execute() {sorted(calls.values())}"
        assert len(calls) == REQUESTS, f"{model}: {REQUESTS} requests took {len(calls)} execute() calls"
        assert [r["inputs"]["X"]["sum"] for r in reports] == [10.0 + 500 * i for i in range(REQUESTS)]


def test_negative_control_max_batch_size_8_with_the_same_batcher_gives_several_requests_per_execute(client):
    """Without this the probe could not tell 'never batched' from 'the load never overlapped'."""
    reports = concurrent_reports(client, "probe_batched_dynamic", [5] * REQUESTS, batched=True)
    calls = per_execute(reports)
    assert max(calls.values()) > 1 and max(calls.values()) <= 8, sorted(calls.values())
    assert sum(calls.values()) == REQUESTS
    # Control of the control: the same model with ragged shapes (no allow_ragged_batch) batches
    # only requests of equal shape (seed 000: "enforce equal shape").
    ragged = concurrent_reports(client, "probe_batched_dynamic", [3, 4, 5, 6] * (REQUESTS // 4), batched=True)
    by_call: dict[int, set] = {}
    for r in ragged:
        by_call.setdefault(r["execute"], set()).add(tuple(r["inputs"]["X"]["shape"]))
    assert all(len(shapes) == 1 for shapes in by_call.values()), by_call


def test_python_backend_gets_no_batch_input_for_a_ragged_batch(client):
    config = client.get_model_config("probe_ragged")
    assert config["batch_input"][0]["kind"] == "BATCH_ACCUMULATED_ELEMENT_COUNT"
    assert config["batch_input"][0]["target_name"] == ["INDEX"] and config["input"][0]["allow_ragged_batch"]
    lengths = [3, 4, 5] * 10  # the docs' worked example, [1,3] [1,4] [1,5], ten times over
    reports = concurrent_reports(client, "probe_ragged", lengths, batched=True)
    calls = per_execute(reports)
    assert max(calls.values()) > 1, f"no ragged batch formed: {sorted(calls.values())}"
    mixed = {}
    for r in reports:
        mixed.setdefault(r["execute"], set()).add(r["inputs"]["X"]["shape"][1])
    assert any(len(v) > 1 for v in mixed.values()), "no batch mixed lengths: not a ragged batch"
    for n, r in zip(lengths, reports, strict=True):
        assert sorted(r["inputs"]) == ["X"], f"received {sorted(r['inputs'])}: INDEX was generated"
        # ... and X is not concatenated across the batch: each request keeps its own [1, n]
        assert r["inputs"]["X"]["shape"] == [1, n]


def test_triton_2_51_accepts_a_binary_request_larger_than_64_mib(probe_server, client):
    import tritonclient.http as httpclient

    assert client.get_server_metadata()["version"] == "2.51.0"
    x = np.ones(72 * 2**20 // 4, dtype=np.float32)  # 72 MiB of binary tensor data
    x[-1] = 5.0
    tensor = httpclient.InferInput("X", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    report = json.loads(client.infer("probe_unbatched", [tensor]).as_numpy("REPORT").reshape(-1)[0])
    assert report["inputs"]["X"]["nbytes"] == x.nbytes == 72 * 2**20
    assert report["inputs"]["X"]["sum"] == float(x.size - 1 + 5)  # content arrived intact


def test_triton_2_51_has_no_http_max_input_size_option(tmp_path):
    bundle = Bundle.find()
    env = server_env(bundle, ServerOptions())
    usage = subprocess.run([str(bundle.binary), "--help"], env=env, capture_output=True, text=True, timeout=60)
    text = usage.stdout + usage.stderr
    assert "--http-thread-count" in text, "the help text lists the HTTP options (control)"
    assert "--http-max-input-size" not in text
    refused = subprocess.run(
        [str(bundle.binary), "--http-max-input-size=1048576", f"--model-repository={tmp_path}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "unrecognized option '--http-max-input-size=1048576'" in refused.stdout + refused.stderr
