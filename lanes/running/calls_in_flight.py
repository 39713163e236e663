"""How many calls an in-process model is given at once: one, or two where two threads may be inside it together.

A model that implements ``stage`` (:mod:`lanes.running.staging`) already overlaps its host part with the device: its
host
part runs when a call is submitted, in the lanes' thread, and one device-queue worker runs the device parts in
order. A model without ``stage`` (a team's own model, almost always) does its host part inside ``infer``: checking
the request, cutting windows, allocating outputs, on a GPU the copies and the Python around the kernels. Called
one at a time, the device waits through all of it. With two calls in flight (two device-queue workers,
:class:`lanes.running.device_queue.DeviceQueue`) the host part of call n+1 runs while call n computes, and the answers
are still taken in submission order (:class:`lanes.running.device_queue.Ordered`): the call log and every output are
what one call at a time makes.

That is only safe for a model two threads may enter at once, answering each call as it would alone. Which
models are is known before the lanes start:

- the model says so: ``concurrent_calls = True`` (two calls may be inside ``infer`` together) or ``False`` (one
  at a time: a lock around the call, state shared between calls, a defect whose place depends on call order),
  an attribute or a property of the model (:func:`lanes.models.model_api.declared_concurrency`; anything but a bool is
  refused when the model is loaded);
- otherwise the harness asks it (:func:`harness.host.concurrent_entry.probe_concurrent_entry`: one synthetic
  block's OP 0 request alone, then from two threads at once, within a bounded wait): two calls that meet inside
  the model and answer as the call alone, bitwise, give two in flight; anything else (a ``Lock`` or ``RLock``
  around the call, calls queued to a worker of the model's own, answers that differ when two overlap, a call
  that raises) serialises its calls, with one note saying why; a model whose two calls never end is refused
  (it cannot be called again), naming the declaration that avoids the question.

A declaration is trusted: ``harness model check`` runs the probe all the same and fails a model that declares
``True`` but answers differently with two calls inside.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from harness.base.errors import HarnessError, ModelError, one_line
from harness.data.geometry import Geometry
from harness.host.concurrent_entry import DEFAULT_WAIT_S, Entry, probe_concurrent_entry
from lanes.models.model_api import DECLARATION, declared_concurrency, staged_entry

MAX_IN_FLIGHT = (
    2  # calls in flight at once for a model that may be entered twice (the host part of one, the other's device part)
)
ADVICE = f"declare `{DECLARATION} = False` on the model to skip this check, or make infer() safe to enter twice"

Call = Callable[[Mapping[str, np.ndarray]], Mapping[str, object]]


@dataclass(frozen=True)
class InFlight:
    """The decision: ``calls`` in flight at once (1 or 2), ``how`` it was decided (``staged``, ``declared``,
    ``probed``, ``given``: the caller's), and ``note``: what the user is told (None: nothing to say)."""

    calls: int
    how: str
    note: str | None = None


def decide(
    model: object,
    geometry: Geometry,
    call: Call,
    where: str,
    wait_s: float = DEFAULT_WAIT_S,
    prepare: Callable[[], None] | None = None,
    end_s: float | None = None,
) -> InFlight:
    """How many calls ``model`` is given at once (module doc). ``call`` sends one OP 0 request the way the lanes do
    (through the backend: its numeric settings, its checks of the answer); ``prepare`` runs first in each of the
    probe's threads (a CUDA device bound); ``where`` names the model in a note or a refusal; ``end_s``: the probe's
    bound on two calls' end (default: its own)."""
    if staged_entry(model) is not None:
        return InFlight(1, "staged")
    declared = declared_concurrency(model, where)
    if declared is not None:
        return InFlight(MAX_IN_FLIGHT if declared else 1, "declared")
    request = probe_request(geometry)
    try:
        probe = probe_concurrent_entry(call, request, wait_s=wait_s, end_s=end_s, prepare=prepare)
    except HarnessError as exc:  # the call alone failed: the lanes will say so on their own first call
        return InFlight(
            1,
            "probed",
            f"{where}: one call at a time (the check of two calls at once could not run: {one_line(exc, 200)})",
        )
    except Exception as exc:  # a model may raise anything
        return InFlight(
            1,
            "probed",
            f"{where}: one call at a time (the check of two calls at once could not run: {type(exc).__name__}: "
            f"{one_line(exc, 200)})",
        )
    if probe.entry is Entry.STUCK:
        raise ModelError(f"{where}: {probe.detail.split(':')[0]}: it cannot be called again in this process; {ADVICE}")
    if probe.concurrent:
        return InFlight(MAX_IN_FLIGHT, "probed")
    return InFlight(1, "probed", f"{where}: one call at a time: {probe.detail} ({ADVICE})")


def probe_request(geometry: Geometry) -> dict[str, np.ndarray]:
    """One synthetic block's OP 0 request at ``geometry`` (the corpus's own synthesis: speech, a short window)."""
    from harness.corpus.synth import iter_synth_blocks  # deferred: only a model that is asked needs it

    block = next(iter(iter_synth_blocks(geometry, 1, seed=0)))[0]
    return dict(block.tensors())


def say(note: str) -> None:
    """A note on stderr, as the command line prints its notes."""
    print(f"harness: note: {note}", file=sys.stderr, flush=True)
