"""Two calls in flight for a model without ``stage`` that two threads may enter (lanes/running/calls_in_flight.py,
lanes/running/device_queue.py): the outputs, written files and call log are the serial path's, bitwise; a model that
cannot be entered twice (a Lock, an RLock, a worker of its own) is serialised with one note, never deadlocked;
the simulated device is one device (its device parts never overlap). No timing assertions: what is checked is
which calls were inside the model together, the order answers are taken in, and what the files hold."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import ModelError
from harness.data.numeric_settings import NumericSettings
from lanes.backends.backend import InProcessBackend
from lanes.models.null_model import NullModel, _config_geometry
from lanes.running.calls_in_flight import decide
from lanes.running.device_queue import DeviceQueue, QueueStopped
from lanes.running.run_plan import RunPlan
from lanes.running.runner import FastVariant
from lanes.simulation.simulated_device import SimulatedDevice, busy_fraction
from tests.cli_run import harness_cli
from tests.contract_models import Locked, OneWorker, Wrapped
from tests.runner_digest import calls_digest, null_setup, outputs_digest, recorded_and_run, run_collect
from tests.test_pipelined_lanes import Serial, our_threads

HOLD_S = 30.0  # the most a call waits inside the model for a second one (never reached where two are in flight)


HOLD_AT = (
    5  # the call held: after the exact lane's warm-up (its three calls are sent one by one, lanes.running.warm_up)
)


class Meeting(NullModel):
    """The null model that notes how many calls are inside it at once; with ``hold``, its ``HOLD_AT``-th call waits
    inside (at most ``HOLD_S``) until the next has come in, so two in flight are seen whatever the machine's speed."""

    def __init__(self, hold: bool = True) -> None:
        super().__init__(_config_geometry("small"), "small")
        self.hold = hold
        self.inside = self.most = self.entered = 0
        self.met: bool | None = None
        self.changed = threading.Condition()

    def infer(self, request):
        with self.changed:
            self.entered += 1
            self.inside += 1
            self.most = max(self.most, self.inside)
            mine = self.entered
            self.changed.notify_all()
        try:
            if mine == HOLD_AT and self.hold:
                with self.changed:
                    self.met = self.changed.wait_for(lambda: self.entered > HOLD_AT, timeout=HOLD_S)
            return super().infer(request)
        finally:
            with self.changed:
                self.inside -= 1


class RLocked(Wrapped):
    """Thread-safe with a re-entrant lock around the call."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.RLock()

    def infer(self, request):
        with self.lock:
            return super().infer(request)


class LockedButDeclared(Locked):
    """Declares two calls may be inside, and holds a lock: the second call waits at the lock, nothing more."""

    concurrent_calls = True


class Deadlocks(Wrapped):
    """Two calls inside at once wait for each other for ever (a lock-order bug)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Barrier(3)

    def infer(self, request):
        request["OP"]
        if threading.current_thread().name.startswith("entry-probe"):
            self.arrived.wait()  # a third party never comes: both calls stay inside
        return super().infer(request)


@pytest.fixture(scope="module")
def null():
    return null_setup(10)


def plan(mode: str = "isolated") -> RunPlan:
    variants = (
        FastVariant(
            4,
            ("k4.d", "k4.d2"),
            lambda m, k: [[(b, c) for b in m[i : i + 2] for c in (0, 1)] for i in range(0, len(m), 2)],
        ),
    )
    return RunPlan(shapes=(2, 4), voiceprint_inputs=mode, variants=variants, exact_repeats=2)


# ------------------------------------------------------------------------------------------ the same answers


@pytest.mark.parametrize("mode", ["isolated", "chained"])
def test_two_in_flight_gives_the_serial_outputs_and_call_log_bitwise(null, mode):
    _, blocks = null
    model = Meeting()
    two = InProcessBackend(model, NumericSettings())
    assert two.in_flight.calls == 2 and two.in_flight.how == "declared"
    out_two, log_two = run_collect(blocks, two, plan(mode))
    assert model.met is True and model.most == 2, "the second call never had a third beside it"
    one_model = Meeting(hold=False)  # one at a time: a third call could never come in beside the second
    out_one, log_one = run_collect(
        blocks, InProcessBackend(one_model, NumericSettings(), calls_in_flight=1), plan(mode)
    )
    assert one_model.most == 1
    serial = Serial(InProcessBackend(Meeting(hold=False), NumericSettings()))
    out_serial, log_serial = run_collect(blocks, serial, plan(mode))
    assert outputs_digest(out_two) == outputs_digest(out_one) == outputs_digest(out_serial)
    assert calls_digest(log_two) == calls_digest(log_one) == calls_digest(log_serial) and len(log_two) > 50
    assert our_threads() == []


def test_with_two_in_flight_the_calls_times_add_up_to_no_more_than_the_lanes(null):
    """A call's time starts at its start or the previous call's end, whichever is later: the times of calls that
    overlapped are not counted twice, so they sum to at most the lanes' wall (the harness's share stays >= 0)."""
    _, blocks = null
    model = SimulatedDevice(_config_geometry("small"), "small", c0_ms=0.5, c1_ms=0.01)
    backend = InProcessBackend(model, NumericSettings())
    begin = time.perf_counter()
    _, log = run_collect(blocks, backend, RunPlan(shapes=(2, 4)))
    wall = time.perf_counter() - begin
    assert backend.in_flight.calls == 2
    assert all(c.wall_s >= 0 for c in log)
    assert sum(c.wall_s for c in log) <= wall
    # the device parts: one at a time, every call's device time inside its own
    busy, span, fraction = busy_fraction(model.intervals())
    assert fraction <= 1.0 and busy <= span


def test_a_recorded_golden_and_a_run_are_the_same_files_with_two_in_flight_or_one(null, tmp_path):
    files, calls, flights = {}, {}, {}
    for name, n in (("two", 2), ("one", 1)):
        b = InProcessBackend(Meeting(hold=n == 2), NumericSettings(), calls_in_flight=n)
        files[name], calls[name] = recorded_and_run(b, tmp_path / name)
        flights[name] = b.model.most
    assert files["two"] == files["one"] and len(files["two"]) > 8
    assert calls["two"] == calls["one"]
    assert flights == {"two": 2, "one": 1}


# ------------------------------------------------------------------------------------------ serialised, not deadlocked


@pytest.mark.parametrize("model_type", [Locked, RLocked, OneWorker])
def test_a_model_that_cannot_be_entered_twice_is_serialised_with_one_note(null, model_type):
    _, blocks = null
    notes: list[str] = []
    backend = InProcessBackend(model_type(), NumericSettings(), note=notes.append, entry_wait_s=0.5)
    out, log = run_collect(blocks, backend, plan())
    assert backend.in_flight.calls == 1 and backend.in_flight.how == "probed"
    assert len(notes) == 1 and "one call at a time" in notes[0] and "concurrent_calls = False" in notes[0], notes
    reference, reference_log = run_collect(blocks, Serial(InProcessBackend(Wrapped(), NumericSettings())), plan())
    assert outputs_digest(out) == outputs_digest(reference) and calls_digest(log) == calls_digest(reference_log)
    assert our_threads() == []


def test_a_reentrant_model_is_given_two_calls_without_a_note(null):
    """Negative control of the note: the same model as Locked, without its lock."""
    notes: list[str] = []
    backend = InProcessBackend(Wrapped(), NumericSettings(), note=notes.append, entry_wait_s=0.5)
    assert backend.in_flight.calls == 2 and backend.in_flight.how == "probed" and notes == []
    assert backend.environment()["calls_in_flight"] == 2


def test_a_model_declaring_two_calls_but_holding_a_lock_is_not_deadlocked(null):
    _, blocks = null
    backend = InProcessBackend(LockedButDeclared(), NumericSettings())
    assert backend.in_flight.calls == 2  # declared: not asked
    out, log = run_collect(blocks, backend, plan())
    reference, reference_log = run_collect(blocks, Serial(InProcessBackend(Wrapped(), NumericSettings())), plan())
    assert outputs_digest(out) == outputs_digest(reference) and calls_digest(log) == calls_digest(reference_log)


def test_a_model_whose_two_calls_never_end_is_refused_in_one_line():
    model = Deadlocks()
    backend = InProcessBackend(model, NumericSettings())
    with pytest.raises(ModelError) as caught:
        decide(model, backend.geometry, backend._probe_call, "model 'deadlocks'", wait_s=0.2, end_s=0.5)
    message = str(caught.value)
    assert "\n" not in message and "did not end within" in message and "concurrent_calls = False" in message
    model.arrived.abort()  # the probe's threads end


def test_a_locked_model_is_recorded_through_the_cli_serialised_with_a_note(capsys, monkeypatch, tmp_path):
    """As a user runs it: a team's model behind a lock records the golden its lock-free twin records, bitwise."""
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "corpus.parquet"
    code, _, err = harness_cli(
        capsys, monkeypatch, "corpus", "synth", str(corpus), "--model", "tests.contract_models:wrapped", "--blocks", "3"
    )
    assert code == 0, err
    found = {}
    for spec in ("tests.contract_models:locked", "tests.contract_models:wrapped"):
        code, out, err = harness_cli(
            capsys, monkeypatch, "golden", "record", "--model", spec, "--corpus", str(corpus), "--goldens",
            str(tmp_path / spec.rpartition(":")[2]), "--release", "g", "--no-progress",
        )  # fmt: skip
        assert code == 0, err
        found[spec] = err
        from golden.store import load_golden

        golden = load_golden(tmp_path / spec.rpartition(":")[2] / "g")
        found[spec] = (err, {k: v.sha256 for k, v in golden.manifest.files.items() if k != "calls.parquet"})
    locked_err, locked_files = found["tests.contract_models:locked"]
    free_err, free_files = found["tests.contract_models:wrapped"]
    notes = [ln for ln in locked_err.splitlines() if ln.startswith("harness: note:")]
    assert len(notes) == 1 and "one call at a time" in notes[0], locked_err
    assert "one call at a time" not in free_err
    assert locked_files == free_files


# ------------------------------------------------------------------------------------------ the device queue


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.integers(-1, 29))
def test_two_workers_run_at_most_two_consecutive_jobs_and_nothing_after_a_failure(work, fail_at):
    started, inside, pairs = [], set(), []
    lock = threading.Lock()
    device = DeviceQueue("device-queue test", workers=2)

    def job(i, spin):
        with lock:
            started.append(i)
            inside.add(i)
            pairs.append(frozenset(inside))
        time.sleep(spin * 1e-4)
        with lock:
            inside.discard(i)
        if i == fail_at:
            raise ValueError(i)
        return i

    futures = [device.submit(lambda i=i, s=s: job(i, s)) for i, s in enumerate(work)]
    for f in futures:
        f.exception()  # waits: every job ran, or was dropped
    device.close()
    assert all(len(p) <= 2 and (len(p) < 2 or max(p) - min(p) == 1) for p in pairs), pairs
    stop = fail_at if 0 <= fail_at < len(work) else len(work) - 1
    assert set(range(stop + 1)) <= set(started) <= set(range(stop + 2))  # the one in flight beside it may end
    for i, f in enumerate(futures):
        if i < stop or (i == stop and fail_at != stop):
            assert f.result() == i
        elif i == stop:
            assert isinstance(f.exception(), ValueError)
        elif i == stop + 1 and i in started:
            assert f.result() == i
        else:
            assert isinstance(f.exception(), QueueStopped)
    assert not device.alive


# ------------------------------------------------------------------------------------------ one simulated device


def _hammer(model: SimulatedDevice, request, threads: int = 4, calls: int = 5) -> None:
    def run():
        for _ in range(calls):
            model.infer(request)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)


def test_the_simulated_devices_calls_never_overlap_on_the_device(null):
    _, blocks = null
    model = SimulatedDevice(_config_geometry("small"), "small", c0_ms=1.0, c1_ms=0.0, device="sim-test-a")
    _hammer(model, blocks[0].tensors())
    iv = model.intervals()
    order = iv[np.argsort(iv[:, 0])]
    assert len(iv) == 20 and (order[1:, 0] >= order[:-1, 1]).all(), "two device parts overlapped"
    busy, span, fraction = busy_fraction(iv)
    assert fraction <= 1.0 and busy == pytest.approx(float((iv[:, 1] - iv[:, 0]).sum()))


def test_negative_control_a_device_lock_per_call_lets_the_device_parts_overlap(null, monkeypatch):
    """The check above can fail: with a lock of its own per call (no shared device) four threads overlap."""
    import contextlib

    _, blocks = null
    model = SimulatedDevice(_config_geometry("small"), "small", c0_ms=20.0, c1_ms=0.0, device="sim-test-b")
    monkeypatch.setattr(model, "_device", contextlib.nullcontext())
    barrier = threading.Barrier(4)
    original = NullModel.infer

    def together(self, request):  # every call's host part ends at once: four device parts begin together
        out = original(self, request)
        barrier.wait(30)
        return out

    monkeypatch.setattr(NullModel, "infer", together)
    _hammer(model, blocks[0].tensors(), calls=1)
    iv = model.intervals()
    order = iv[np.argsort(iv[:, 0])]
    assert not (order[1:, 0] >= order[:-1, 1]).all()
