"""Staged calls (lanes.running.staging): the host's part of call n+1 runs in the submitting thread while n
computes, and the answers, files and call log are the unstaged ones, bitwise. On CUDA the inputs are also
copied from pinned buffers on a stream of their own; the ring of pinned buffers is checked here with
stand-ins for pinned memory and CUDA events (this machine has no GPU: benchmarks/gpu_copy_overlap.py
checks the overlap itself on a GPU)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from examples import byo_torchscript
from harness.base.errors import BackendError
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from lanes import controls
from lanes.backends.backend import InProcessBackend
from lanes.models.diar_nn_g.model import DiarNNG
from lanes.models.model_api import load_model, staged_entry
from lanes.running import staging
from lanes.running.device_timeline import DeviceTimeline
from lanes.running.run_plan import RunPlan
from lanes.running.staging import InferOnly
from tests.runner_digest import calls_digest, outputs_digest, run_collect
from tests.test_pipelined_lanes import Serial, our_threads


@pytest.fixture(scope="module")
def blocks(small_model):
    return synth_corpus(small_model.geometry, 6, seed=3).blocks


def _both(model, blocks, plan):
    """Staged and pipelined; unstaged (the model behind infer alone) and serial: outputs and call logs."""
    backend = InProcessBackend(model, NumericSettings(threads=1))
    serial = Serial(InProcessBackend(InferOnly(model), NumericSettings(threads=1)))
    return run_collect(blocks, backend, plan), run_collect(blocks, serial, plan)


@pytest.mark.parametrize("mode", ["isolated", "chained"])
def test_staged_runs_of_the_reference_model_are_the_unstaged_ones_bitwise(small_model, blocks, mode):
    assert staged_entry(small_model) is not None
    plan = RunPlan(shapes=(2, 4), voiceprint_inputs=mode, exact_repeats=2)
    (piped, piped_calls), (serial, serial_calls) = _both(small_model, blocks, plan)
    assert outputs_digest(piped) == outputs_digest(serial)
    assert calls_digest(piped_calls) == calls_digest(serial_calls) and len(piped_calls) > 0
    assert our_threads() == []


@pytest.mark.parametrize(
    "spec",
    [
        "lanes.controls:leaky",
        "lanes.controls:cross_window_norm",
        "lanes.controls:nan_window",
        "lanes.controls:invariant",
    ],
)
def test_staged_negative_controls_keep_their_defects(blocks, spec):
    """A control that changes a hook (windows, finish) stages through it; one that overrides infer is
    called through its infer: either way its answers are its unstaged answers."""
    model = load_model(spec)
    (piped, _), (serial, _) = _both(model, blocks, RunPlan(shapes=(2,)))
    assert outputs_digest(piped) == outputs_digest(serial)


def test_a_torchscript_model_stages_its_wire_tensors(tmp_path, blocks):
    model = load_model(byo_torchscript.build(str(tmp_path / "tiny.pt")))
    assert staged_entry(model) is not None
    geometry_blocks = synth_corpus(model.geometry, 4, seed=5).blocks
    (piped, calls), (serial, _) = _both(model, geometry_blocks, RunPlan(shapes=(2,)))
    assert outputs_digest(piped) == outputs_digest(serial) and calls


def test_which_models_stage(small_model, tmp_path):
    assert staged_entry(controls.leaky()) is not None  # a hook changed: stage is still its answer
    assert staged_entry(controls.invariant()) is None  # infer overridden below stage: infer is its answer
    assert staged_entry(controls.slow()) is None
    assert staged_entry(load_model("lanes.models.null_model:small")) is None  # no stage at all

    class Both(DiarNNG):
        def infer(self, request):
            return super().infer(request)

        def stage(self, request, to_device):
            return super().stage(request, to_device)

    assert staged_entry(Both("small")) is not None
    patched = DiarNNG("small")
    patched.infer = lambda request: {}  # type: ignore[method-assign]
    assert staged_entry(patched) is None  # an instance's own infer is its answer
    timed = DeviceTimeline(small_model, "cpu", None)
    assert staged_entry(timed) is not None  # the wrapper stages its inner model, timed
    # a model that does not stage is wrapped without a stage: it keeps the calls in flight it gets unwrapped
    plain = DeviceTimeline(controls.invariant(), "cpu", None)
    assert staged_entry(plain) is None and isinstance(plain, DeviceTimeline)


class Threads(DiarNNG):
    """Notes which thread cut the windows (the host's part) and which finished an answer (the device's)."""

    def __init__(self) -> None:
        super().__init__("small")
        self.cut: set[str] = set()
        self.finished: set[str] = set()

    def windows(self, fields):
        self.cut.add(threading.current_thread().name)
        return super().windows(fields)

    def finish(self, op, output, fields):
        self.finished.add(threading.current_thread().name)
        return output


def test_the_host_part_runs_in_the_submitting_thread_and_the_device_part_in_the_queue(blocks):
    model = Threads()
    run_collect(blocks, InProcessBackend(model, NumericSettings(threads=1)), RunPlan(shapes=(2,)))
    assert model.cut == {threading.main_thread().name}
    assert len(model.finished) == 1 and next(iter(model.finished)).startswith("device-queue")


class FailsToStage(DiarNNG):
    """Its n-th request cannot be cut into windows (a model's own bug while staging)."""

    def __init__(self, fail_at: int) -> None:
        super().__init__("small")
        self.fail_at, self.calls, self.finished = fail_at, 0, 0

    def windows(self, fields):
        self.calls += 1
        if self.calls == self.fail_at:
            raise ValueError("cannot cut")
        return super().windows(fields)

    def finish(self, op, output, fields):
        self.finished += 1
        return output


@pytest.mark.parametrize("fail_at", [1, 7, 20])
def test_a_failure_while_staging_is_raised_in_its_turn_as_it_is_unstaged(blocks, fail_at):
    messages, logs, finished = [], [], []
    for staged in (True, False):
        model = FailsToStage(fail_at)
        backend = InProcessBackend(model if staged else InferOnly(model), NumericSettings(threads=1))
        log: list = []
        with pytest.raises(BackendError) as caught:
            run_collect(blocks, backend, RunPlan(shapes=(2, 4)), log=log)
        messages.append(str(caught.value))
        logs.append(calls_digest(log))
        finished.append(model.finished)
    assert messages[0] == messages[1] and messages[0].endswith("model raised ValueError: cannot cut")
    assert logs[0] == logs[1]  # the calls before it were taken, in order, and only those
    assert finished[0] == finished[1] == fail_at - 1  # every call before it ran, none after it
    assert our_threads() == []


def test_the_cpu_stager_copies_nothing_and_keeps_nothing_resident():
    stager = staging.Stager("cpu")
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    seen = []
    staged, compute = stager.stage(lambda to_device: (seen.append(to_device(array)), lambda: {"x": array})[1])
    assert np.shares_memory(seen[0].numpy(), array) and staged.ready is None
    assert stager.resident_bytes == 0 and compute()["x"] is array
    stager.ran(staged)
    assert stager.resident_bytes == 0


# ----------------------------------------------------------------------------------------- the pinned ring


class FakeEvent:
    def __init__(self, done: bool = False) -> None:
        self.done, self.waited = done, False

    def query(self) -> bool:
        return self.done

    def synchronize(self) -> None:
        self.waited = self.done = True


class PlainRing(staging.Stager):
    """The ring's bookkeeping with plain host tensors for pinned memory (no CUDA here)."""

    def __init__(self) -> None:
        super().__init__("cpu")
        self.allocated: list[int] = []

    def _allocate_pinned(self, size: int):
        import torch

        self.allocated.append(size)
        return torch.empty(size, dtype=torch.uint8)


def test_a_pinned_buffer_is_reused_only_once_its_copy_has_completed():
    ring = PlainRing()
    first = ring._pinned(100)
    first.claimed = True  # taken by the request being staged
    second = ring._pinned(100)
    assert second is not first  # never a buffer whose request is still being staged
    first.busy_until, first.claimed = FakeEvent(done=False), False
    assert ring._pinned(100) is not first  # its copy has not completed
    first.busy_until.done = True
    assert ring._pinned(100) is first  # now it has
    assert ring._pinned(3 << 20).host.numel() == 4 << 20  # sizes are whole powers of two from 1 MiB
    assert min(ring.allocated) == 1 << 20


def test_the_ring_is_bounded_and_waits_for_the_oldest_copy_when_all_are_in_flight():
    ring = PlainRing()
    events = []
    for _ in range(staging.PINNED_BUFFERS):
        buffer = ring._pinned(10)
        buffer.busy_until = FakeEvent(done=False)
        events.append(buffer.busy_until)
    assert len(ring._ring) == staging.PINNED_BUFFERS
    ring._pinned(10)  # every buffer in flight: the oldest is waited for and replaced
    assert events[0].waited and not any(e.waited for e in events[1:])
    assert len(ring._ring) == staging.PINNED_BUFFERS


def test_the_device_part_is_given_exactly_the_arrays_infer_uses(small_model, blocks):
    request = blocks[0].tensors()
    given: list[np.ndarray] = []
    plain = staging.host_tensors("cpu")

    def to_device(array: np.ndarray):
        given.append(array.copy())
        return plain(array)

    compute = small_model.stage(request, to_device)
    assert len(given) == 1 and np.array_equal(given[0], small_model.windows(request))  # OP 0: the windows
    staged, unstaged = compute(), small_model.infer(request)
    assert staged.keys() == unstaged.keys()
    for name in staged:
        assert staged[name].tobytes() == unstaged[name].tobytes()


# ------------------------------------------------------------------ the CUDA branch, with stand-ins for CUDA


class FakeStream:
    def __init__(self, name: str) -> None:
        self.name, self.waited_for = name, []

    def wait_event(self, event) -> None:
        self.waited_for.append(event)


class FakeCuda:
    """torch.cuda's calls that lanes.running.staging makes, recorded: streams, events, the current stream."""

    def __init__(self) -> None:
        import contextlib

        self.compute = FakeStream("compute")
        self.streams: list[FakeStream] = []
        self.events: list[FakeEvent] = []
        self.in_copy_stream = False
        self._contextlib = contextlib

    def Stream(self, device):  # noqa: N802 - torch's name
        self.streams.append(FakeStream("copy"))
        return self.streams[-1]

    def Event(self):  # noqa: N802 - torch's name
        event = RecordedEvent()
        self.events.append(event)
        return event

    def device(self, device):
        return self._contextlib.nullcontext()

    def stream(self, stream):
        cuda = self

        @self._contextlib.contextmanager
        def on() -> object:
            cuda.in_copy_stream = True
            try:
                yield
            finally:
                cuda.in_copy_stream = False

        return on()

    def current_stream(self, device):
        return self.compute


class RecordedEvent(FakeEvent):
    def __init__(self) -> None:
        super().__init__(done=False)
        self.recorded_on = None

    def record(self, stream) -> None:
        self.recorded_on = stream


def _device_tensor_type():
    import torch

    class OnDevice(torch.Tensor):
        """A host tensor standing in for a device one: it notes the streams it was used on."""

        def record_stream(self, stream) -> None:  # type: ignore[override]
            self.__dict__.setdefault("streams", []).append(stream)

    return OnDevice


class FakeTorch:
    """torch, but with CUDA stood in for: device tensors are host tensors, pinned memory is plain."""

    def __init__(self, cuda: FakeCuda) -> None:
        import torch

        self._torch, self.cuda, self.copies = torch, cuda, []
        self.on_device = _device_tensor_type()

    def __getattr__(self, name):
        return getattr(self._torch, name)

    def device(self, name):
        return self._torch.device(name)

    def empty(self, *shape, dtype=None, device=None, pin_memory=False):
        tensor = self._torch.empty(*shape, dtype=dtype)
        if device is not None:
            assert self.cuda.in_copy_stream, "a device tensor allocated outside the copy stream"
            tensor = tensor.as_subclass(self.on_device)
        return tensor


def test_the_cuda_branch_copies_every_input_through_the_ring_and_orders_the_compute(monkeypatch, small_model, blocks):
    """The CUDA branch run with stand-ins (no GPU here): each input is allocated on the copy stream and
    filled from a pinned view holding exactly its bytes; one event is recorded on the copy stream after
    the request's inputs; the compute stream waits for it and every input is marked used by the compute
    stream before compute runs; the answer is the unstaged one, bitwise; resident bytes rise and fall."""
    cuda = FakeCuda()
    monkeypatch.setattr(staging, "torch", FakeTorch(cuda))
    stager = staging.Stager("cuda:0")
    for op_blocks in ([blocks[0]], blocks[:3]):
        from harness.packers.packing import HARNESS_PACKER

        request = HARNESS_PACKER.pack(op_blocks).tensors() if len(op_blocks) > 1 else op_blocks[0].tensors()
        staged, compute = stager.stage(lambda to_device, r=request: small_model.stage(r, to_device))
        assert len(cuda.streams) == 1 and staged.ready is cuda.events[-1]  # one copy stream, one event a request
        assert staged.ready.recorded_on is cuda.streams[0]
        assert len(staged.tensors) == 1 and stager.resident_bytes == staged.nbytes >= staged.tensors[0].nbytes
        assert [b.busy_until is staged.ready for b in stager._ring].count(True) == 1  # its one input's buffer
        assert not any(b.claimed for b in stager._ring)
        tensors = list(staged.tensors)
        out = staged.run(compute)  # and, run, its inputs are no longer resident
        assert cuda.compute.waited_for[-1] is staged.ready
        assert all(t.streams == [cuda.compute] for t in tensors)
        assert stager.resident_bytes == 0
        unstaged = small_model.infer(request)
        assert {k: v.tobytes() for k, v in out.items()} == {k: v.tobytes() for k, v in unstaged.items()}
        for buffer in stager._ring:
            buffer.busy_until.done = True  # the copy completed: the next request may reuse the buffer
    again, _ = stager.stage(lambda to_device: small_model.stage(blocks[1].tensors(), to_device))
    assert len(stager._ring) == 2  # a one-block request again: a completed buffer reused, none allocated


def test_a_request_with_several_inputs_takes_one_buffer_each(monkeypatch):
    cuda = FakeCuda()
    monkeypatch.setattr(staging, "torch", FakeTorch(cuda))
    stager = staging.Stager("cuda:0")
    arrays = [np.arange(10, dtype=np.float32), np.arange(6, dtype=np.int64), np.arange(3, dtype=np.int32)]
    got = []
    staged, _ = stager.stage(lambda to_device: (got.extend(to_device(a) for a in arrays), lambda: {})[1])
    assert len(stager._ring) == 3 and len({id(b) for b in stager._ring}) == 3  # never one buffer twice
    for array, tensor in zip(arrays, got, strict=True):
        assert tensor.dtype == staging.torch.from_numpy(array).dtype and np.array_equal(tensor.numpy(), array)


def test_a_failure_while_staging_on_cuda_releases_the_buffers_it_claimed(monkeypatch):
    cuda = FakeCuda()
    monkeypatch.setattr(staging, "torch", FakeTorch(cuda))
    stager = staging.Stager("cuda:0")

    def stage(to_device):
        to_device(np.ones(4, dtype=np.float32))
        raise ValueError("bad request")

    with pytest.raises(ValueError):
        stager.stage(stage)
    assert [b.claimed for b in stager._ring] == [False] and stager._ring[0].busy_until is cuda.events[-1]
    assert stager.resident_bytes == 0


def test_the_timeline_wrapper_staged_logs_every_call_and_answers_as_its_inner_model(small_model, blocks):
    """Staged, the wrapper logs one interval per call, as many as unstaged, and answers as its inner model."""
    staged, unstaged = DeviceTimeline(small_model, "cpu", None), DeviceTimeline(small_model, "cpu", None)
    plan = RunPlan(shapes=(2,))
    piped, calls = run_collect(blocks[:3], InProcessBackend(staged, NumericSettings(threads=1)), plan)
    plain, _ = run_collect(blocks[:3], InProcessBackend(InferOnly(unstaged), NumericSettings(threads=1)), plan)
    assert staged_entry(staged) is not None and staged_entry(InferOnly(unstaged)) is None
    assert outputs_digest(piped) == outputs_digest(plain)
    assert len(staged.intervals()) == len(unstaged.intervals()) > len(calls) > 0  # the warm-up's calls too
