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

It also needs a model that three threads can enter at once. One that cannot (``infer`` under a
``threading.Lock`` or ``RLock``, calls serialised behind one worker, an extension that holds a lock through
a call) lets one pass in and keeps the others out, and the pass inside waits at its first module for
passes that never come. So no wait at a module is open-ended: every pass must reach a module within
:data:`MIN_WAIT_S` of the first one there, or :data:`GAP_FACTOR` times the longest time any module has
taken so far, whichever is longer (:meth:`_Rendezvous.bound`); past that bound the barrier is broken and
:class:`NotReentrant` raised (an :class:`OutOfStep`: the caller measures one pass after another, the same
figures). The threads are then joined with a bound too (:data:`JOIN_S`, or the same factor of the longest
module): a pass that does not return after the others stopped ends the command in one line. Out of reach:
an extension that holds the GIL and never returns stops every thread, this one's timer included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.hooks import RemovableHandle

END = "<end of the call>"
MIN_WAIT_S = 10.0  # every pass reaches a module within this of the first one there (the least bound)...
GAP_FACTOR = 8.0  # ...or this many times the longest a module has taken so far, whichever is longer
JOIN_S = 60.0  # after a failure, each pass must return within this (or the factor of the longest module)
_local = threading.local()


class OutOfStep(RuntimeError):
    """The calls did not run the same modules in the same order (or one hooked module ran off its thread)."""


class NotReentrant(OutOfStep):
    """Not every call reached a module within the bound of the first one there: the model lets one call in at
    a time (a lock, a serialised model), so the calls cannot run side by side."""


class PassStuck(RuntimeError):
    """A call did not return within the bound after the others stopped (the model does not return)."""


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
        self.barrier = threading.Barrier(self.n, action=self._meet)
        self.last_meeting = time.monotonic()  # when the calls last met (at first: when they started)
        self.longest = 0.0  # the longest time between two meetings so far: a module's time
        self._lock = threading.Lock()

    def bound(self) -> float:
        """How long a call that reached a module waits for the others there (module doc)."""
        return max(MIN_WAIT_S, GAP_FACTOR * self.longest)

    def _meet(self) -> None:
        now = time.monotonic()
        self.longest, self.last_meeting = max(self.longest, now - self.last_meeting), now
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
            self.fail(OutOfStep(f"module {name} ran outside the calls' own threads"))
            assert self.failure is not None
            raise self.failure
        self.names[index], self.tensors[index] = name, tensor
        bound = self.bound()
        started = time.monotonic()
        try:
            self.barrier.wait(timeout=bound)
        except threading.BrokenBarrierError:
            waited = time.monotonic() - started
            if waited >= 0.99 * bound:  # this call timed the barrier out (not one that found it broken by another)
                missing = self.n - sum(1 for n in self.names if n is not None)
                self.fail(
                    NotReentrant(
                        f"{missing} of {self.n} passes did not reach {name} within {bound:.0f} s of the first: the "
                        "model lets one call in at a time (a lock around infer, calls serialised, an extension "
                        "holding a lock), so the passes cannot run side by side"
                    )
                )
            raise self.failure or OutOfStep("a call stopped") from None

    def fail(self, exc: BaseException) -> None:
        """Record the first failure (the one every call raises) and break the barrier for every call."""
        with self._lock:
            self.failure = self.failure or exc
        self.barrier.abort()


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
            meet.fail(exc)
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
        stuck = _joined(threads, max(JOIN_S, GAP_FACTOR * meet.longest))
        for h in handles:
            h.remove()
    if stuck:
        raise PassStuck(
            f"{stuck} of {len(calls)} passes did not return within {max(JOIN_S, GAP_FACTOR * meet.longest):.0f} s "
            f"after the others stopped ({meet.failure}): the model's infer does not return"
        )
    if meet.failure is not None:
        raise meet.failure
    return [np.asarray(a) for a in answers]


def _joined(threads: Sequence[threading.Thread], bound_s: float) -> int:
    """Join ``threads``, all within ``bound_s`` seconds; how many are still running after it."""
    deadline = time.monotonic() + bound_s
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    return sum(1 for t in threads if t.is_alive())
