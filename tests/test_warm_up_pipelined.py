"""The warm-up is prepared ahead of the device (lanes/running/warm_up.py). Run serially, each call would wait for the
host to derive, pack and validate the next request: at C1 = 0.05 ms per window that was 46 % of the lanes'
idle time (benchmarks/device_gaps.py). No timing here: what is checked is that the calls
are queued ahead (a call finds the next ones already submitted), that the pipelined and the serial warm-up send
the same requests in the same order, and that a lane's voiceprint rows are shared only with a bitwise-equal
answer. The models here record the order they are entered in, so they get one call at a time (two calls in
flight may enter in either order: tests/test_two_in_flight.py)."""

from __future__ import annotations

import hashlib
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from harness.data.masks import MaskPolicy, voiceprint_rows
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from lanes.backends.backend import InProcessBackend
from lanes.running.run_plan import RunPlan
from tests.runner_digest import null_setup, run_collect


@pytest.fixture(scope="module")
def null():
    return null_setup(4)


class Recording:
    """The null model, recording every request it is sent (a digest of its tensors) in order; call
    ``hold`` (1-based) waits until ``ready()`` holds (or 30 s pass) and records whether it did."""

    def __init__(self, inner, hold=0, ready=lambda: True):
        self.inner, self.hold, self.ready = inner, hold, ready
        self.geometry, self.fingerprint = inner.geometry, inner.fingerprint
        self.sent, self.held = [], None
        self.changed = threading.Condition()

    def infer(self, request):
        self.sent.append(
            hashlib.sha256(b"".join(np.ascontiguousarray(request[k]).tobytes() for k in sorted(request))).hexdigest()
        )
        if len(self.sent) == self.hold:
            with self.changed:
                self.held = self.changed.wait_for(self.ready, timeout=30)
        return self.inner.infer(request)


class Counting(InProcessBackend):
    """The in-process backend, counting the calls submitted to its device queue."""

    submitted = 0

    @contextmanager
    def pipelined(self):
        with super().pipelined() as submit:

            def counted(call):
                self.submitted += 1
                with self.model.changed:
                    self.model.changed.notify_all()
                return submit(call)

            yield counted


def test_a_warm_up_call_finds_the_next_ones_already_queued(null):
    """The 4th device call is k=2's OP 0 warm-up (after the exact lane's three, measured alone): it waits until
    k=4's OP 0 warm-up is submitted behind it. The serial warm-up submitted nothing while a call ran (its calls
    went to the backend one at a time from the host thread), so this call waited its 30 s in vain."""
    inner, blocks = null
    backend = None

    def ready():
        return backend.submitted >= 5  # the exact lane's 3, k=2's OP 0 and k=4's OP 0

    model = Recording(inner.model, hold=4, ready=ready)
    backend = Counting(model, NumericSettings(), calls_in_flight=1)
    run_collect(blocks, backend, RunPlan(shapes=(2, 4)))
    assert model.held is True, (
        "k=2's OP 0 warm-up call (the 4th) waited 30 s for k=4's OP 0 warm-up to be "
        "submitted behind it, in vain: the warm-up is not queued ahead of the device "
        f"({backend.submitted} call(s) submitted over the whole run)"
    )


def test_the_pipelined_warm_up_sends_what_the_serial_one_sends_in_the_same_order(null):
    inner, blocks = null
    sent = {}
    for name, piped in (("piped", True), ("serial", False)):
        model = Recording(inner.model)
        run_collect(
            blocks,
            InProcessBackend(model, NumericSettings(), calls_in_flight=1),
            RunPlan(shapes=(2, 4), pipeline=piped),
        )
        sent[name] = model.sent
    assert sent["piped"] == sent["serial"]
    assert len(sent["piped"]) > 9 * 3  # the warm-up's 3 lanes x 3 OPs, then the timed calls


def test_voiceprint_rows_are_shared_only_with_a_bitwise_equal_answer(null):
    from lanes.running.warm_up import _RowsCache

    inner, blocks = null
    g, block = inner.geometry, blocks[0]
    seg = inner.model.infer(block.tensors())[Op.SEGMENTATION.output_name]
    other = seg.copy()
    other[:, :, 0] += 5.0  # another answer: class 0 wins every frame
    rows = _RowsCache(g, MaskPolicy())
    first = rows(block, Op.VOICEPRINT, seg)
    assert rows(block, Op.VOICEPRINT, seg.copy()) is first  # the same answer: computed once
    changed = rows(block, Op.VOICEPRINT, other)
    want = voiceprint_rows(other, block.valid, Op.VOICEPRINT, g, MaskPolicy())
    assert changed is not first
    for a, b in ((changed.weights, want.weights), (changed.idx, want.idx), (changed.speakers, want.speakers)):
        np.testing.assert_array_equal(a, b)
    assert not (np.array_equal(first.idx, changed.idx) and np.array_equal(first.weights, changed.weights))


@pytest.mark.parametrize("fail_at", [2, 5, 9])
def test_an_error_in_a_warm_up_call_stops_the_queue_there_with_its_one_line_error(null, fail_at):
    """Queued ahead, a failing warm-up call still ends the run at that call: nothing after it runs on the
    device, no call is logged, no thread is left (the exact lane's 3 calls, then k=2's and k=4's OP 0, ...)."""
    from harness.base.errors import BackendError
    from tests.test_pipelined_lanes import Failing, our_threads

    inner, blocks = null
    model = Failing(inner.model, fail_at)
    log = []
    with pytest.raises(BackendError) as caught:
        run_collect(
            blocks, InProcessBackend(model, NumericSettings(), calls_in_flight=1), RunPlan(shapes=(2, 4)), log=log
        )
    message = str(caught.value)
    assert "\n" not in message and message.endswith("model raised RuntimeError: the device fell over"), message
    assert model.calls == fail_at and log == [] and our_threads() == []
