"""Serving as the engine does: requests in flight at once through call_many, and the same bits.

The engine keeps about two requests in flight per GPU; the Triton backend's default concurrency
is therefore 2. These tests hold it to its promises over the real session server: outputs are
bitwise the same at concurrency 1 and 2 (and equal to in-process), results come back in call
order, the number of requests in flight reaches but never exceeds the setting, and failures are
retried or named per call.
"""

from __future__ import annotations

import numpy as np
import pytest
from triton_support import packed_calls

from harness.base.errors import BackendError
from harness.data import ops
from harness.data.ops import ALL_OPS
from lanes.backends.triton import triton_backend as triton_backend_module
from lanes.backends.triton.triton_backend import DEFAULT_CONCURRENCY, TritonBackend

pytestmark = pytest.mark.triton


def test_default_concurrency_is_two(triton_backend, inprocess_backend):
    assert DEFAULT_CONCURRENCY == 2 == triton_backend.concurrency
    assert inprocess_backend.concurrency == 1
    assert triton_backend.environment()["concurrency"] == 2


def test_call_many_at_concurrency_1_and_2_is_bitwise_identical(triton_server, inprocess_backend, golden):
    calls = packed_calls(golden)  # every OP at k = 1, 2, 4 over the golden's corpus
    assert {c[0] for c in calls} == set(ALL_OPS)
    outputs = {}
    for concurrency in (1, 2):
        with TritonBackend(triton_server.url, concurrency=concurrency) as backend:
            outputs[concurrency] = [r.output for r in backend.call_many(calls)]
    local = [r.output for r in inprocess_backend.call_many(calls)]
    differ = [c[4] for c, a, b in zip(calls, outputs[1], outputs[2], strict=True) if not np.array_equal(a, b)]
    assert differ == [], f"{len(differ)} of {len(calls)} calls differ between concurrency 1 and 2: {differ[:3]}"
    assert all(np.array_equal(a, b) for a, b in zip(outputs[2], local, strict=True))
    # negative control: the comparison sees a one-ULP change in one element of one call
    changed = outputs[2][5].copy()
    changed.flat[7] = np.nextafter(changed.flat[7], np.float32(np.inf))
    assert not np.array_equal(outputs[1][5], changed)


@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_call_many_keeps_order_and_honours_concurrency(triton_server, golden, monkeypatch, concurrency):
    calls = packed_calls(golden, ks=(1, 2), ops=(ops.Op.SEGMENTATION,))
    active, peak = [0], [0]
    real = TritonBackend._attempt

    def counting(self, call):  # the real request, counted while it is on the wire
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        try:
            return real(self, call)
        finally:
            active[0] -= 1

    monkeypatch.setattr(TritonBackend, "_attempt", counting)
    with TritonBackend(triton_server.url, concurrency=concurrency) as backend:
        many = backend.call_many(calls)
        one_by_one = [backend.call(*c) for c in calls[:4]]
    assert peak[0] == concurrency
    assert [r.output.shape[0] for r in many] == [c[2] for c in calls]  # windows of each call, in order
    for a, b in zip(many, one_by_one, strict=False):
        assert np.array_equal(a.output, b.output)
        assert a.peak_device_bytes is None and a.wall_s > 0


def test_call_many_names_the_failing_call_and_the_others_still_answer(triton_server, golden):
    calls = packed_calls(golden, ks=(1,), ops=(ops.Op.SEGMENTATION,))[:6]
    op, request, windows, rows, _ = calls[3]
    bad = (op, {**request, ops.VALID: np.full_like(request[ops.VALID], 10**6)}, windows, rows, "the bad one")
    with TritonBackend(triton_server.url, concurrency=2) as backend:
        with pytest.raises(BackendError) as err:
            backend.call_many(calls[:3] + [bad] + calls[4:])
        message = str(err.value)
        assert "\n" not in message and message.startswith("the bad one (Triton")
        assert "the model answered an error" in message and "more of the" not in message
        with pytest.raises(BackendError, match=r"^the bad one .* \(1 more of the 4 calls sent together failed"):
            backend.call_many([bad, calls[0], bad, calls[1]])
        assert len(backend.call_many(calls)) == len(calls)  # still serving


def test_call_many_retries_a_dropped_call_alone(triton_server, golden, monkeypatch):
    monkeypatch.setattr(triton_backend_module.time, "sleep", lambda s: None)
    calls = packed_calls(golden, ks=(2,), ops=(ops.Op.SEGMENTATION,))
    real = TritonBackend._attempt
    dropped = []

    def drop_once(self, call):
        if call.where.startswith(calls[2][4]) and not dropped:
            dropped.append(call.where)
            raise ConnectionResetError("injected")
        return real(self, call)

    with TritonBackend(triton_server.url, concurrency=2) as backend:
        expected = [r.output for r in backend.call_many(calls)]
        monkeypatch.setattr(TritonBackend, "_attempt", drop_once)
        again = backend.call_many(calls)
    assert len(dropped) == 1
    assert all(np.array_equal(a, b.output) for a, b in zip(expected, again, strict=True))
