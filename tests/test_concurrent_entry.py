"""The two-calls-in-flight probe (harness.host.concurrent_entry): it answers for every kind of model, and it never
waits longer than its bound, whatever the model does.

Each kind: re-entrant (two calls meet inside); a Lock, an RLock, one worker thread (the second call never comes
in: serialised); a shared buffer (they meet, but answer differently); a model that refuses a second call
(raised); one that never reads its request (cannot tell); one that deadlocks with two calls inside (stuck,
within the bound). Only the first may keep two calls in flight.
"""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from harness.host.concurrent_entry import Entry, probe_concurrent_entry

REQUEST = {"SPAN": np.arange(64, dtype=np.float32), "OP": np.array([0], dtype=np.int32)}
WAIT = 0.5  # the tests' bound: every model here meets at once, or never


def honest(request):
    return {"OUT": np.asarray(request["SPAN"]) * np.float32(2)}


def with_lock(lock):
    def call(request):
        with lock:
            return honest(request)

    return call


def one_worker():
    calls: queue.Queue = queue.Queue()

    def work():
        while True:
            request, answer = calls.get()
            answer.put(honest(request))

    threading.Thread(target=work, daemon=True).start()

    def call(request):
        answer: queue.Queue = queue.Queue()
        calls.put((request, answer))
        return answer.get()

    return call


def shared_buffer():
    buffer = np.zeros(64, dtype=np.float32)
    count = [0]

    def call(request):
        buffer[:] = np.asarray(request["SPAN"])  # both calls read their request: they meet here, then share buffer
        count[0] += 1
        buffer[:] += count[0]
        return {"OUT": buffer.copy()}

    return call


def refuses_a_second():
    inside = threading.Semaphore(1)

    def call(request):
        if not inside.acquire(blocking=False):
            raise RuntimeError("busy: one call at a time")
        try:
            span = request["SPAN"]
            return honest({"SPAN": span})
        finally:
            inside.release()

    return call


def blind(request):
    return {"OUT": np.ones(3, dtype=np.float32)}


def run_bounded(call, **kw):
    """The probe in a thread of the test's own, so that a probe that hung would fail the test, not hang it."""
    found = []
    thread = threading.Thread(target=lambda: found.append(probe_concurrent_entry(call, REQUEST, **kw)), daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert found, "the probe did not return within 120 s"
    return found[0]


@pytest.mark.parametrize(
    "make,entry",
    [
        (lambda: honest, Entry.TOGETHER),
        (lambda: with_lock(threading.Lock()), Entry.SERIALISED),
        (lambda: with_lock(threading.RLock()), Entry.SERIALISED),
        (one_worker, Entry.SERIALISED),
        (shared_buffer, Entry.DIFFERS),
        (lambda: blind, Entry.UNSEEN),
    ],
    ids=["reentrant", "lock", "rlock", "one-worker", "shared-buffer", "blind"],
)
def test_every_kind_of_model_gets_its_answer(make, entry):
    probe = run_bounded(make(), wait_s=WAIT)
    assert probe.entry is entry, probe
    assert probe.concurrent is (entry is Entry.TOGETHER)
    if entry is not Entry.TOGETHER:
        assert probe.detail.endswith("the harness serialises its calls"), probe.detail


def test_a_model_that_refuses_a_second_call_is_serialised_not_failed():
    # the two calls race for the semaphore: either one raised (refused) or the second came in after the first ended
    probe = run_bounded(refuses_a_second(), wait_s=WAIT)
    assert probe.entry in (Entry.RAISED, Entry.SERIALISED) and not probe.concurrent, probe
    if probe.entry is Entry.RAISED:
        assert "RuntimeError: busy: one call at a time" in probe.detail


def test_a_model_that_deadlocks_with_two_calls_inside_is_stuck_within_the_bound():
    release = threading.Event()
    barrier_of_one = threading.Event()  # never set by the model itself: two calls inside wait forever

    def deadlocks(request):
        span = request["SPAN"]
        if threading.current_thread().name.startswith("entry-probe"):
            barrier_of_one.wait()  # both calls meet above, then neither ever ends
            release.wait()
        return honest({"SPAN": span})

    try:
        probe = run_bounded(deadlocks, wait_s=WAIT, end_s=0.5)
        assert probe.entry is Entry.STUCK and not probe.concurrent, probe
        assert "did not end within 1 s" in probe.detail, probe.detail
    finally:
        barrier_of_one.set()
        release.set()  # the probe's daemon threads end


def test_a_call_alone_that_raises_is_the_callers_error():
    def broken(request):
        raise ValueError("bad request")

    with pytest.raises(ValueError, match="bad request"):
        probe_concurrent_entry(broken, REQUEST, wait_s=WAIT)


def test_per_thread_settings_are_applied_in_each_calling_thread():
    seen = set()

    def prepare():
        seen.add(threading.current_thread().name)

    assert probe_concurrent_entry(honest, REQUEST, wait_s=WAIT, prepare=prepare).concurrent
    assert {"entry-probe-0", "entry-probe-1"} <= seen
