"""The same call run several times side by side, each module's outputs compared as they are produced.

The golden's module floors compare three calls of one request module by module (two plain passes and
one with every leaf module moved by one ulp). Kept whole, the passes' outputs are gigabytes on the full
networks; written out and read back (:mod:`harness.localisation.activations`), they cost more time than the network.
Run side by side, one thread per call, each hooked module waits for the same module of the other calls
(a barrier), the outputs are compared by a function the caller gives, and dropped: one module's outputs
per call in memory, no copy, and the calls share the cores.

That needs every call to run the same modules in the same order, which calls of one request do. A call
that runs another module, or another number of them, or from another thread, or that fails, breaks the
barrier: every call stops, and :class:`OutOfStep` (or the failure) is raised, so the caller can measure the
sequential way. Calls of one request must not share mutable state that differs between them: the
passes' own state (the jitter) is asked per call (:func:`current`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.hooks import RemovableHandle

END = "<end of the call>"
TIMEOUT_S = 3600.0  # a barrier that waits longer than an hour is a bug, not a slow network
_local = threading.local()


class OutOfStep(RuntimeError):
    """The calls did not run the same modules in the same order (or one hooked module ran off its thread)."""


def current() -> int | None:
    """The index of the call this thread runs (None outside a lockstep call)."""
    value = getattr(_local, "index", None)
    return value if isinstance(value, int) else None


@dataclass
class _Rendezvous:
    n: int
    compare: Callable[[str, list[torch.Tensor]], None]
    names: list[str | None] = field(default_factory=list)
    tensors: list[torch.Tensor | None] = field(default_factory=list)
    failure: BaseException | None = None

    def __post_init__(self) -> None:
        self.names = [None] * self.n
        self.tensors = [None] * self.n
        self.barrier = threading.Barrier(self.n, action=self._meet, timeout=TIMEOUT_S)

    def _meet(self) -> None:
        names = set(self.names)
        try:
            if len(names) != 1:
                raise OutOfStep(f"the calls ran different modules at the same step: {sorted(map(str, names))}")
            (name,) = names
            if name != END:
                assert name is not None
                shapes = {tuple(t.shape) for t in self.tensors if t is not None}
                if len(shapes) == 1 and all(t is not None for t in self.tensors):
                    self.compare(name, [t for t in self.tensors if t is not None])
        except BaseException as exc:
            self.failure = exc
            raise
        finally:
            self.names = [None] * self.n
            self.tensors = [None] * self.n

    def arrive(self, name: str, tensor: torch.Tensor | None) -> None:
        index = current()
        if index is None:
            self.failure = self.failure or OutOfStep(f"module {name} ran outside the calls' own threads")
            self.barrier.abort()
            raise self.failure
        self.names[index], self.tensors[index] = name, tensor
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            raise self.failure or OutOfStep("a call stopped") from None


def run(
    calls: Sequence[Callable[[], Mapping[str, np.ndarray]]],
    nets: Mapping[str, torch.nn.Module],
    compare: Callable[[str, list[torch.Tensor]], None],
) -> list[np.ndarray]:
    """Run every call at once, the first in this thread, with every module of ``nets`` (and each network's
    input) hooked; ``compare(module, [each call's output])`` at each module, in execution order, when the
    outputs have one shape. The calls' answers, in order. Raises :class:`OutOfStep`, or a call's failure."""
    meet = _Rendezvous(len(calls), compare)
    handles: list[RemovableHandle] = []

    def hook(name: str, pre: bool) -> Callable[..., None]:
        def seen(value: object) -> None:
            first = value[0] if isinstance(value, tuple | list) and value else value
            tensor = first.detach() if isinstance(first, torch.Tensor) and first.dim() > 0 else None
            meet.arrive(name, tensor)

        if pre:
            return lambda module, args: seen(args)
        return lambda module, args, output: seen(output)

    from harness.localisation.first_divergence import INPUT  # the input's name, as localisation names it

    for prefix, top in nets.items():
        handles.append(top.register_forward_pre_hook(hook(f"{prefix} {INPUT}", pre=True)))
        for name, module in top.named_modules():
            if name:
                handles.append(module.register_forward_hook(hook(f"{prefix}.{name}", pre=False)))
    answers: list[Any] = [None] * len(calls)

    def one(index: int) -> None:
        _local.index = index
        try:
            (answers[index],) = calls[index]().values()
            meet.arrive(END, None)
        except BaseException as exc:
            meet.failure = meet.failure or exc
            meet.barrier.abort()
        finally:
            _local.index = None

    threads = [
        threading.Thread(target=one, args=(i,), name=f"harness-lockstep-{i}", daemon=True) for i in range(1, len(calls))
    ]
    try:
        for t in threads:
            t.start()
        one(0)
    finally:
        for t in threads:
            t.join()
        for h in handles:
            h.remove()
    if meet.failure is not None:
        raise meet.failure
    return [np.asarray(a) for a in answers]
