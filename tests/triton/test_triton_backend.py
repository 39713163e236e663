"""TritonBackend against the session server: answers, refusals and the retry policy."""

from __future__ import annotations

import time

import numpy as np
import pytest
from triton_support import blocks_of  # noqa: I001

from harness.base.errors import BackendError
from harness.data import ops
from harness.data.ops import Op
from harness.packers.packing import pack
from lanes.backends.triton import triton_backend as triton_backend_module
from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend

pytestmark = pytest.mark.triton


def segmentation_request(golden, blocks: int = 1):
    packed = pack(blocks_of(golden)[:blocks])
    return packed.op, packed.tensors(), packed.windows, packed.rows


def test_call_matches_in_process_bitwise(triton_backend, inprocess_backend, golden):
    op, request, windows, rows = segmentation_request(golden, blocks=2)
    remote = triton_backend.call(op, request, windows, rows, "two blocks")
    local = inprocess_backend.call(op, request, windows, rows, "two blocks")
    assert remote.output.dtype == np.float32 and remote.peak_device_bytes is None and remote.wall_s > 0
    assert np.array_equal(remote.output, local.output)


def test_a_bad_request_is_the_models_final_answer_and_the_server_survives(triton_server, golden):
    op, request, windows, rows = segmentation_request(golden)
    bad = dict(request)
    bad[ops.VALID] = np.full_like(request[ops.VALID], 10**6)
    backend = TritonBackend(triton_server.url, policy=CallPolicy(retries=3, backoff_s=2.0))
    start = time.perf_counter()
    with pytest.raises(BackendError) as err:
        backend.call(op, bad, windows, rows, "block b0")
    assert time.perf_counter() - start < 1.5, "a model's error answer must not be retried"
    message = str(err.value)
    assert "\n" not in message
    for part in ("block b0", triton_server.url, "the model answered an error", "BlockError", "VALID[0]"):
        assert part in message
    assert backend.call(op, request, windows, rows, "after").output.shape[0] == windows  # still serving
    backend.close()


def test_a_request_triton_rejects_is_final(triton_backend, golden):
    op, request, windows, rows = segmentation_request(golden)
    bad = dict(request)
    bad[ops.OP] = np.array([0, 0], dtype=np.int32)  # config says dims [1]
    with pytest.raises(BackendError) as err:
        triton_backend.call(op, bad, windows, rows, "block b0")
    assert "refused the request (HTTP 400" in str(err.value) and "\n" not in str(err.value)


def test_too_large_request_is_refused_before_sending(triton_server, golden):
    op, request, windows, rows = segmentation_request(golden, blocks=2)
    backend = TritonBackend(triton_server.url, policy=CallPolicy(max_request_bytes=10_000))
    assert backend.max_request_bytes == 10_000
    with pytest.raises(BackendError) as err:
        backend.call(op, request, windows, rows, "fast lane k=2")
    message = str(err.value)
    assert "fast lane k=2" in message and "exceeds max_request_bytes" in message and "smaller k" in message
    backend.close()


def test_bad_url_is_refused():
    with pytest.raises(BackendError, match="not an http"):
        TritonBackend("ftp://127.0.0.1:1")


def test_connection_errors_are_retried_with_backoff(triton_backend, monkeypatch):
    sleeps: list[float] = []
    monkeypatch.setattr(triton_backend_module.time, "sleep", sleeps.append)
    answers = iter([ConnectionRefusedError(), ConnectionResetError(), "ok"])

    def send():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert triton_backend._with_retries("call", send) == "ok"
    assert sleeps == [triton_backend.backoff_s, 2 * triton_backend.backoff_s]


def test_retries_are_bounded(triton_backend, monkeypatch):
    monkeypatch.setattr(triton_backend_module.time, "sleep", lambda s: None)
    attempts = []

    def send():
        attempts.append(1)
        raise ConnectionRefusedError()

    with pytest.raises(BackendError, match=r"not reachable \(connection refused\) after 3 retries"):
        triton_backend._with_retries("block b0", send)
    assert len(attempts) == triton_backend.retries + 1 == 4


@pytest.mark.parametrize(
    ("status", "message", "retried"),
    [
        ("500", "internal failure", True),
        ("503", "model busy", True),
        ("500", "diar_nn_g model error: RuntimeError: boom", False),  # the model's answer: final
        ("400", "bad input", False),
    ],
)
def test_http_errors_retry_on_5xx_only(triton_backend, monkeypatch, status, message, retried):
    from tritonclient.utils import InferenceServerException

    monkeypatch.setattr(triton_backend_module.time, "sleep", lambda s: None)
    attempts = []

    def send():
        attempts.append(1)
        raise InferenceServerException(message, status=status)

    with pytest.raises(BackendError) as err:
        triton_backend._with_retries("block b0", send)
    assert len(attempts) == (triton_backend.retries + 1 if retried else 1)
    assert "block b0" in str(err.value) and "\n" not in str(err.value)


def test_wrong_output_is_named(triton_backend, golden):
    op, request, windows, rows = segmentation_request(golden)
    with pytest.raises(BackendError, match=r"block b0 .*output SEGMENTATION has shape"):
        triton_backend.call(op, request, windows + 1, rows, "block b0")  # expects one window more
    assert Op.SEGMENTATION.output_name == "SEGMENTATION"
