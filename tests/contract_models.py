"""Models that break (or keep) one part of the model contract each, for ``harness model check`` and for the
commands that refuse a broken model before any work (tests/test_model_check.py). Each wraps the null model at
the small geometry (table look-ups: fast, batch-invariant, bitwise), so what a check sees is the one defect."""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping

import numpy as np

from harness.data import ops
from harness.data.geometry import Geometry
from lanes.models.null_model import NullModel, _config_geometry


class Wrapped:
    """The null model behind a plain ``infer``: the contract, kept."""

    def __init__(self, geometry: Geometry | None = None) -> None:
        self.inner = NullModel(geometry or _config_geometry("small"), "small")
        self.geometry = self.inner.geometry
        self.fingerprint = self.inner.fingerprint

    def describe(self) -> dict:
        return {"name": f"contract-{type(self).__name__.lower()}", "fingerprint": self.fingerprint}

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.inner.infer(request)


class NoFingerprint(Wrapped):
    def describe(self) -> dict:
        return {"name": "no-fingerprint"}  # as docs/models.md's example once read: the fingerprint left out


class Locked(Wrapped):
    """Thread-safe the common way: a lock around the call (two calls can never be inside at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self.lock:
            return super().infer(request)


class OneWorker(Wrapped):
    """Serialises itself: every call is queued to one worker thread of its own, which reads the request."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: queue.Queue = queue.Queue()
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            request, answer = self.calls.get()
            try:
                answer.put(("ok", super().infer(request)))
            except Exception as exc:  # handed back to the caller
                answer.put(("raised", exc))

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        answer: queue.Queue = queue.Queue()
        self.calls.put((request, answer))
        kind, value = answer.get()
        if kind == "raised":
            raise value
        return value


class WritesItsRequest(Wrapped):
    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().infer(request)
        np.asarray(request[ops.SPAN])[:1] = 0.5  # normalises its input in place
        return out


class Drifting(Wrapped):
    """Answers a little differently every call (dropout left on, a counter in the graph): ``step`` per call."""

    def __init__(self, step: float = 1e-3) -> None:
        super().__init__()
        self.step, self.calls = float(step), 0

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.calls += 1
        return {
            k: (v + np.float32(self.step * self.calls)).astype(np.float32) for k, v in super().infer(request).items()
        }


def wrapped() -> Wrapped:
    return Wrapped()


def no_fingerprint() -> NoFingerprint:
    return NoFingerprint()


def locked() -> Locked:
    return Locked()


def one_worker() -> OneWorker:
    return OneWorker()


def writes_its_request() -> WritesItsRequest:
    return WritesItsRequest()


def drifting(step: float = 1e-3) -> Drifting:
    return Drifting(step)


def frames_past_the_window() -> Wrapped:
    """A geometry whose last frames start past the window (frame_step too large): they never hold audio."""
    return Wrapped(Geometry(window_samples=16_000, frames_per_window=56, frame_step=400, embedding_dim=32))
