"""May two calls of a model be in flight at once? A probe that answers in seconds, never waiting longer.

Why: keeping two calls in flight (the lanes' device queue staging the next request while one computes, the
module floors' passes meeting at every module) deadlocks on a model that cannot be entered twice: a
``threading.Lock`` or ``RLock`` around its call, a model that queues every call to one worker of its own, a C
extension holding a lock through the call. Each is a legitimate way to make a model thread-safe; the harness
must notice it, serialise the calls, and say so, within seconds.

How, without a timing guess: each of two threads calls the model with the same request wrapped in a mapping
of its own. The first read of a request (any key, its length, its keys) holds that call there until the
other call has read its own request too, for at most ``wait_s``. Two calls that meet inside the model were
in flight at once; a second call that never reads its request while the first one is held inside it was
kept out (a lock, a queue): after ``wait_s`` the first goes on, and the second follows it. Both must then
end within ``end_s``; a model that deadlocks with two calls inside is reported stuck (its threads are
daemons, left behind, and the process can still exit). Answers are compared with the call alone, bitwise: a
model that lets two calls in but answers differently when they overlap (a shared buffer) may not keep two
in flight either.

Only :attr:`EntryProbe.concurrent` (``Entry.TOGETHER``) allows two calls in flight; every other answer means
the harness serialises the model's calls. The probe imports nothing but numpy: the lanes, the floors and the
model check (``harness model check``) ask it alike.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from harness.base.errors import check_interrupted, one_line

DEFAULT_WAIT_S = 5.0  # how long the first call waits inside the model for the second to come in
MIN_END_S = 60.0  # the least time both calls get to end once they have met (or the wait is over)
END_PER_CALL = 20.0  # ... or this many times the call alone, whichever is longer

Call = Callable[[Mapping[str, np.ndarray]], Mapping[str, object]]


class Entry(StrEnum):
    TOGETHER = "together"  # both calls were inside at once, and each answered as the call alone, bitwise
    SERIALISED = "serialised"  # the second call did not come in while the first was held inside
    DIFFERS = "differs"  # both came in, but an answer differs from the call alone
    RAISED = "raised"  # a call raised with two in flight
    STUCK = "stuck"  # the two calls did not end within the bound
    UNSEEN = "unseen"  # the model never read its request through the mapping it was given: cannot tell


@dataclass(frozen=True)
class EntryProbe:
    """What the probe found: ``entry``, and in words ``detail`` (what happened, and what the harness does)."""

    entry: Entry
    detail: str
    waited_s: float  # how long the first call was held inside the model waiting for the second

    @property
    def concurrent(self) -> bool:
        """Two calls may be in flight at once."""
        return self.entry is Entry.TOGETHER


class _Meeting:
    """Two calls, each held at its first read of its request until the other has read its own (or ``wait_s``)."""

    def __init__(self, wait_s: float) -> None:
        self._wait_s = wait_s
        self._cond = threading.Condition()
        self._arrived = [False, False]
        self._open = False
        self.met = False
        self.read = False  # some call read its request
        self.waited_s = 0.0

    def arrive(self, slot: int) -> None:
        with self._cond:
            if self._arrived[slot]:
                return
            self._arrived[slot] = True
            self.read = True
            if all(self._arrived):
                self.met = self.met or not self._open
                self._open = True
                self._cond.notify_all()
                return
            if self._open:
                return
            start = time.perf_counter()
            self._cond.wait_for(lambda: self._open, timeout=self._wait_s)
            self.waited_s = time.perf_counter() - start
            self._open = True  # met, or the wait is over: from here on nobody waits
            self._cond.notify_all()

    def leave(self, slot: int) -> None:
        """A call ended (or raised) without reading its request: the other one no longer waits for it."""
        with self._cond:
            if not self._arrived[slot]:
                self._arrived[slot] = True
                self._open = True
                self._cond.notify_all()


class _HeldRequest(Mapping[str, np.ndarray]):
    """The request as one of the two calls sees it: any read is that call's arrival at the meeting."""

    def __init__(self, request: Mapping[str, np.ndarray], meeting: _Meeting, slot: int) -> None:
        self._request, self._meeting, self._slot = request, meeting, slot

    def __getitem__(self, key: str) -> np.ndarray:
        self._meeting.arrive(self._slot)
        return self._request[key]

    def __iter__(self) -> Iterator[str]:
        self._meeting.arrive(self._slot)
        return iter(self._request)

    def __len__(self) -> int:
        self._meeting.arrive(self._slot)
        return len(self._request)


def probe_concurrent_entry(
    call: Call,
    request: Mapping[str, np.ndarray],
    wait_s: float = DEFAULT_WAIT_S,
    end_s: float | None = None,
    prepare: Callable[[], None] | None = None,
) -> EntryProbe:
    """Call ``call(request)`` alone, then from two threads at once, and say whether two calls may be in flight.

    ``prepare`` runs first in each thread (a backend's per-thread settings: torch's thread count is per
    thread). ``end_s``: how long both calls get to end once they have met (default: the longer of
    ``MIN_END_S`` and ``END_PER_CALL`` times the call alone). Nothing here waits longer than
    ``wait_s + end_s``; a call alone that raises is raised to the caller (the request is the caller's)."""

    if prepare is not None:
        prepare()
    start = time.perf_counter()
    alone = dict(call(dict(request)))
    bound = end_s if end_s is not None else max(MIN_END_S, END_PER_CALL * (time.perf_counter() - start))
    meeting = _Meeting(wait_s)
    answers: list[Mapping[str, object] | None] = [None, None]
    failures: list[BaseException | None] = [None, None]
    ended = [threading.Event(), threading.Event()]

    def run(slot: int) -> None:
        try:
            if prepare is not None:
                prepare()
            answers[slot] = call(_HeldRequest(request, meeting, slot))
        except BaseException as exc:  # a model may raise anything; it is the answer
            failures[slot] = exc
        finally:
            meeting.leave(slot)  # a call that never read its request must not hold the other one
            ended[slot].set()

    threads = [threading.Thread(target=run, args=(slot,), name=f"entry-probe-{slot}", daemon=True) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + wait_s + bound
    for event in ended:
        while not event.wait(timeout=min(0.1, max(0.0, deadline - time.monotonic()))):
            check_interrupted()
            if time.monotonic() >= deadline:
                return EntryProbe(
                    Entry.STUCK,
                    f"two calls at once did not end within {wait_s + bound:.0f} s (the call alone ends): the harness "
                    "serialises its calls",
                    meeting.waited_s,
                )
    return _judged(meeting, answers, failures, alone, wait_s)


def _judged(
    meeting: _Meeting,
    answers: list[Mapping[str, object] | None],
    failures: list[BaseException | None],
    alone: Mapping[str, object],
    wait_s: float,
) -> EntryProbe:
    waited = meeting.waited_s
    for failure in failures:
        if failure is not None:
            return EntryProbe(
                Entry.RAISED,
                f"a call raised with another in flight ({type(failure).__name__}: {one_line(failure, 160)}): the "
                "harness serialises its calls",
                waited,
            )
    if not meeting.met:
        if not meeting.read:
            return EntryProbe(
                Entry.UNSEEN,
                "the model never read the request it was given (it copies it elsewhere first?), so whether two calls "
                "may be in flight cannot be told: the harness serialises its calls",
                waited,
            )
        return EntryProbe(
            Entry.SERIALISED,
            f"a second call did not come in within {wait_s:g} s while the first was inside the model (a lock around "
            "the call, or calls queued to one worker): the harness serialises its calls",
            waited,
        )
    for slot, answer in enumerate(answers):
        differs = _difference(alone, answer)
        if differs is not None:
            return EntryProbe(
                Entry.DIFFERS,
                f"two calls were inside at once, and call {slot + 1} answered differently than the call alone "
                f"({differs}): the harness serialises its calls",
                waited,
            )
    return EntryProbe(
        Entry.TOGETHER, "two calls were inside at once, each answering as the call alone, bitwise", waited
    )


def _difference(alone: Mapping[str, object], answer: Mapping[str, object] | None) -> str | None:
    """None when ``answer`` holds what ``alone`` holds, bitwise; else what differs, in words."""
    if answer is None:
        return "no answer"
    if sorted(answer) != sorted(alone):
        return f"outputs {sorted(answer)} instead of {sorted(alone)}"
    for name, value in alone.items():
        a, b = np.asarray(value), np.asarray(answer[name])
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            return f"output {name} is not the same bits"
    return None
