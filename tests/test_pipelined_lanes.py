"""Pipelined lanes: the device queue runs the calls in exactly the serial order while the host
prepares the next request and takes the previous answer. Outputs, written files and the call log are
the serial path's, bitwise; an error in call n stops the queue at n, surfaces as its one-line error in
the main thread, and leaves no thread behind. No timing assertions: the order is what is checked."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import BackendError, Interrupted, clear_interrupt, request_interrupt
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from lanes.backends.backend import InProcessBackend
from lanes.backends.backend_api import CallResult
from lanes.running.device_queue import DeviceQueue, Ordered, QueueStopped
from lanes.running.run_plan import RunPlan
from lanes.running.runner import FastVariant
from tests.runner_digest import calls_digest, null_setup, outputs_digest, recorded_and_run, run_collect

OURS = ("device-queue", "lanes-reader", "golden-inputs")


class Serial:
    """The same backend without ``pipelined()``: the serial path (a stage through ``call_many``)."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)


class Failing:
    """The null model, raising in its ``fail_at``-th call (1-based); ``interrupt``: a Ctrl-C arrives instead."""

    def __init__(self, inner, fail_at, interrupt=False):
        self.inner, self.fail_at, self.interrupt, self.calls = inner, fail_at, interrupt, 0
        self.geometry, self.fingerprint = inner.geometry, inner.fingerprint

    def infer(self, request):
        self.calls += 1
        if self.calls == self.fail_at:
            if not self.interrupt:
                raise RuntimeError("the device fell over")
            request_interrupt("SIGINT")
        return self.inner.infer(request)


@pytest.fixture(scope="module")
def null():
    return null_setup(10)


def our_threads():
    return [t.name for t in threading.enumerate() if t.name.startswith(OURS)]


@pytest.mark.parametrize("mode", ["isolated", "chained"])
def test_pipelined_and_serial_runs_give_the_same_outputs_and_the_same_call_order(null, mode):
    backend, blocks = null
    variants = (
        FastVariant(
            4,
            ("k4.d", "k4.d2"),
            lambda m, k: [[(b, c) for b in m[i : i + 2] for c in (0, 1)] for i in range(0, len(m), 2)],
        ),
    )
    plan = RunPlan(shapes=(2, 4), voiceprint_inputs=mode, variants=variants, exact_repeats=2)
    piped_out, piped = run_collect(blocks, backend, plan)
    serial_out, serial = run_collect(blocks, Serial(backend), plan)
    assert outputs_digest(piped_out) == outputs_digest(serial_out)
    assert calls_digest(piped) == calls_digest(serial) and len(piped) == len(serial) > 0
    assert our_threads() == []


def test_a_recorded_golden_and_a_run_are_the_same_files_pipelined_or_serial(null, tmp_path):
    backend, _ = null
    files, calls = {}, {}
    for name, b in (("piped", backend), ("serial", Serial(backend))):
        files[name], calls[name] = recorded_and_run(b, tmp_path / name)
    assert files["piped"] == files["serial"] and len(files["piped"]) > 8
    assert calls["piped"] == calls["serial"]


@pytest.mark.parametrize("in_flight", [1, 2])
@pytest.mark.parametrize("fail_at", [1, 5, 23])
def test_an_error_in_call_n_stops_the_queue_there_and_surfaces_as_its_one_line_error(null, fail_at, in_flight):
    inner, blocks = null
    model = Failing(inner.model, fail_at + 18)  # the warm-up's 3 x (1 + 5) calls come first
    backend = InProcessBackend(model, NumericSettings(), calls_in_flight=in_flight)
    log = []
    with pytest.raises(BackendError) as caught:
        run_collect(blocks, backend, RunPlan(shapes=(2, 4, 8, 16, 32)), log=log)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(("exact lane k=1 OP ", "fast lane k="))
    assert message.endswith("model raised RuntimeError: the device fell over")
    if in_flight == 1:
        assert model.calls == fail_at + 18  # nothing after the failing call ran on the device
        assert len(log) == fail_at - 1  # the calls before it were taken, in order, and only those
    else:  # two calls inside at once may enter the model in either order: the n-th entry is call n - 1, n or n + 1
        failed = len(log) + 1 + 18  # the failing call's place in submission order (the calls before it were taken)
        assert fail_at + 18 - 1 <= failed <= fail_at + 18 + 1
        assert model.calls <= failed + 1  # after it, only the call already in flight beside it ran
    assert our_threads() == []


@pytest.mark.parametrize("in_flight", [1, 2])
def test_an_interrupt_stops_the_run_after_the_call_in_flight_and_leaves_no_thread(null, in_flight):
    inner, blocks = null
    model = Failing(inner.model, 25, interrupt=True)
    backend = InProcessBackend(model, NumericSettings(), calls_in_flight=in_flight)
    try:
        with pytest.raises(Interrupted):
            run_collect(blocks, backend, RunPlan(shapes=(2, 4)))
    finally:
        clear_interrupt()
    assert 25 <= model.calls <= 25 + in_flight - 1  # the calls in flight end; the queued ones are dropped
    assert our_threads() == []


@settings(max_examples=60)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.integers(-1, 39))
def test_the_device_queue_runs_jobs_in_submission_order_and_nothing_after_a_failure(work, fail_at):
    executed = []
    device = DeviceQueue("device-queue test")

    def job(i, spin):
        for _ in range(spin * 50):  # a little work, so the submitter runs ahead or behind
            pass
        executed.append(i)
        if i == fail_at:
            raise ValueError(i)
        return i

    futures = [device.submit(lambda i=i, s=s: job(i, s)) for i, s in enumerate(work)]
    futures[-1].exception()  # waits: the last job ran, or was dropped after a failure
    device.close()
    stop = fail_at if 0 <= fail_at < len(work) else len(work) - 1
    assert executed == list(range(stop + 1))
    for i, f in enumerate(futures):
        if i < stop or (i == stop and fail_at != stop):
            assert f.result() == i
        elif i == stop:
            assert isinstance(f.exception(), ValueError)
        else:
            assert isinstance(f.exception(), QueueStopped)
    assert not device.alive


class Echo:
    """A backend whose answers name their call: the order they are taken in is observable."""

    geometry = None

    def __init__(self):
        self.sent = []

    def call_many(self, calls):
        self.sent += [c[4] for c in calls]
        return [CallResult(c[4], 0.0, None) for c in calls]


class Ticket:
    def __init__(self, future):
        self.future = future

    def done(self):
        return self.future.done()

    def result(self):
        return self.future.result()


@settings(max_examples=60)
@given(
    st.lists(st.tuples(st.sampled_from(["stage", "then", "wait"]), st.integers(0, 4)), max_size=25),
    st.integers(1, 6),
    st.booleans(),
)
def test_answers_are_taken_in_push_order_whatever_the_bounds_and_waits(steps, max_calls, piped):
    backend, device, taken, pushed = Echo(), DeviceQueue("device-queue order"), [], []

    def submit(call):
        return Ticket(device.submit(lambda: (backend.sent.append(call[4]), CallResult(call[4], 0.0, None))[1]))

    try:
        line = Ordered(backend, submit if piped else None, max_calls=max_calls)
        marks = [0]
        for n, (kind, size) in enumerate(steps):
            if kind == "stage":
                names = [f"{n}.{j}" for j in range(size)]
                pushed += names
                marks.append(
                    line.stage(
                        [((Op.SEGMENTATION, {}, 1, 0, name), lambda r: taken.append(r.output)) for name in names]
                    )
                )
            elif kind == "then":
                pushed.append(f"then {n}")
                marks.append(line.then(lambda n=n: taken.append(f"then {n}")))
            else:
                mark = marks[size % len(marks)]
                line.wait(mark)
                assert len(taken) >= mark
        line.drain()
    finally:
        device.close()
    assert taken == pushed
    assert backend.sent == [p for p in pushed if not p.startswith("then")]
