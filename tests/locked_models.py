"""Plug-in models that three threads cannot enter at once, for the module floors' tests (``--model
tests.locked_models:locked``): the reference ``small`` model whose ``infer`` takes a ``threading.Lock`` (a common
way to make a model thread-safe), an ``RLock``, or runs every call on one worker thread (a model that
serialises its calls). Their answers are the small model's, bit for bit."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from lanes.models.diar_nn_g.model import DiarNNG


class LockedModel(DiarNNG):
    def __init__(self, lock: object) -> None:
        super().__init__("small", 0, "cpu")
        self.lock = lock

    def infer(self, request):
        with self.lock:  # type: ignore[attr-defined]
            return super().infer(request)


class SerialisedModel(DiarNNG):
    def __init__(self) -> None:
        super().__init__("small", 0, "cpu")
        self.worker = ThreadPoolExecutor(1, thread_name_prefix="serialised-model")

    def infer(self, request):
        return self.worker.submit(super().infer, request).result()


def locked(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return LockedModel(threading.Lock())


def rlocked(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return LockedModel(threading.RLock())


def serialised(seed: int = 0, device: str = "cpu") -> DiarNNG:
    return SerialisedModel()
