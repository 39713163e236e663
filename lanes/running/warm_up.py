"""The warm-up: every lane's first call of every OP once, untimed and discarded (``RunPlan.warmup``).

The first call of a shape pays one-off costs (allocator growth, oneDNN primitive creation, cuDNN
autotuning) that are not the shape's throughput; so before the timed calls each lane (the exact lane,
every packed shape) sends its first chunk of the first group once per OP and drops the answers, each
voiceprint request derived from that lane's own warm-up OP 0 answer (the engine's mask function).

Prepared ahead, as the timed calls are. Run serially, lane after lane, each call would wait for the
previous answer and for the host to derive, pack and validate the next request, and the device would
sit idle meanwhile: 46 % of the lanes' idle time at C0 = 2 ms, C1 = 0.05 ms per window, N = 256
(``benchmarks/device_gaps.py``; the threads starting beside it, the metrics kernels' compilation, the
corpus's hashing and reading, made each of those host steps slower). So:

- its calls go through the runner's device queue (:class:`lanes.running.device_queue.Ordered`), and the first
  group's timed calls are pushed right behind them;
- the packed shapes warm up in a group's own order, every shape's OP 0, then every shape's OP 1, then
  OP 2 (not shape by shape), so a shape's voiceprint rows, the one true dependency (on its OP 0
  answer), are derived while the device runs the calls before them;
- a block's rows are computed once per bitwise-equal answer (:class:`_RowsCache`: the shapes answer
  the blocks they share alike, often), not once per shape.

Where a first call's one-off costs are small against the call (an in-process CPU: oneDNN's primitives
take milliseconds, a full voiceprint call seconds), the packed shapes' warm-up is left out
(``RunPlan.warmup_packed``, ``[lanes] warm_up``): it repeated every shape's first group untimed, on a
4-block corpus every packed call. The exact lane's warm-up stays. It runs first and alone on an
in-process device (:mod:`lanes.running.memory`: nothing else in flight, so its peak is its own), and packed
shapes whose requests cannot fit the device are refused before their first call. The steps are named
to ``phase`` (the progress bar's) as the device reaches them, ``warm-up: OP 0 k=4 (3 of 12)`` numbered
in device order, and None at the end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.masks import MaskPolicy, VoiceprintRows, voiceprint_rows
from harness.data.ops import Op
from harness.packers.packing import Packer
from lanes.backends.backend_api import Backend, Call
from lanes.running.device_queue import Ordered
from lanes.running.lanes import CallRecord, ExactLane, FastLane, Take
from lanes.running.memory import check_fits, in_process_device, measure_peak

if TYPE_CHECKING:
    from lanes.running.run_plan import RunPlan

Phase = Callable[[str | None], None]


def warm_up(
    first: list[Block], backend: Backend, plan: RunPlan, packer: Packer, line: Ordered, phase: Phase | None = None
) -> None:
    """Push the warm-up of every lane (see the module doc) onto ``line``, ahead of the timed calls."""
    scratch: list[CallRecord] = []
    say = phase or (lambda label: None)
    g, ops = backend.geometry, plan.ops
    lanes: list[_Lane] = []
    if plan.include_exact:
        lanes.append(_Exact(ExactLane(backend, plan.release_shapes, scratch)))
    if plan.warmup_packed:
        lanes += [_Fast(FastLane(backend, k, scratch, plan.pad_to_fixed, packer)) for k in plan.shapes]
    rows_of = _RowsCache(g, plan.mask_policy)
    measured = plan.include_exact and bool(plan.shapes) and in_process_device(backend) is not None
    steps, done = len(lanes) * len(ops), 0

    def run(group: list[_Lane], alone: bool = False) -> None:
        """The lanes' warm-up in the group's order: every lane's OP 0, then every lane's OP 1, ...; ``alone``:
        each call taken before the next is sent (its peak memory is its own, even with two calls in flight)."""
        nonlocal done
        answers, marks = [], []
        for j, lane in enumerate(group):
            segs, items = _op0(lane, first[: lane.k])  # packed while the device runs the call before
            line.then(functools.partial(say, _label(Op.SEGMENTATION, lane, done + j + 1, steps)))
            marks.append(line.stage(items))
            if alone:
                line.drain()
            answers.append(segs)
        done += len(group)
        for op in ops:
            if not op.is_voiceprint:
                continue
            for j, (lane, segs, mark) in enumerate(zip(group, answers, marks, strict=True)):
                line.wait(mark)  # the one dependency: a lane's rows come from its own OP 0 answer
                line.then(functools.partial(say, _label(op, lane, done + j + 1, steps)))
                real = first[: len(segs)]  # a padded pack's answer holds the real blocks only
                rows = [rows_of(b, op, s) for b, s in zip(real, segs, strict=True)]
                if sum(int(r.idx.shape[0]) for r in rows):
                    line.stage(
                        lane.calls(
                            [
                                b.with_voiceprint(op, r.weights, r.idx, r.speakers, g)
                                for b, r in zip(real, rows, strict=True)
                            ],
                            [],
                        )
                    )
                    if alone:
                        line.drain()
            done += len(group)

    if measured:  # the exact lane alone first, finished before any packed call: its peak is its own
        line.drain()

        def again() -> list[int | None]:
            nonlocal done
            begin, done = len(scratch), 0
            run(lanes[:1], alone=True)
            line.drain()
            return [c.peak_device_bytes for c in scratch[begin:]]

        device = in_process_device(backend)
        assert device is not None
        check_fits(plan.shapes, plan.pad_to_fixed, len(first), device, measure_peak(again, device), again)
    run(lanes[1:] if measured else lanes)
    line.then(lambda: say(None))


def _label(op: Op, lane: _Lane, step: int, steps: int) -> str:
    return f"warm-up: OP {int(op)} {lane.name} ({step} of {steps})"


class _RowsCache:
    """A block's voiceprint rows from an OP 0 answer, computed once per answer: lanes that answered a
    block bitwise alike (the exact lane and every shape, often) share them. The rows are a function of
    the answer, the block's VALID and the OP alone (:func:`harness.data.masks.voiceprint_rows`), so a
    shared result is the one computing would give."""

    def __init__(self, geometry: Geometry, policy: MaskPolicy) -> None:
        self.g, self.policy = geometry, policy
        self._seen: dict[tuple[str, Op], tuple[np.ndarray, VoiceprintRows]] = {}

    def __call__(self, block: Block, op: Op, seg: np.ndarray) -> VoiceprintRows:
        known = self._seen.get((block.id, op))
        if known is not None and known[0].shape == seg.shape and np.array_equal(known[0], seg):
            return known[1]
        rows = voiceprint_rows(seg, block.valid, op, self.g, self.policy)
        self._seen[(block.id, op)] = (seg, rows)
        return rows


def _op0(lane: _Lane, chunk: list[Block]) -> tuple[list[np.ndarray], list[tuple[Call, Take]]]:
    """A lane's OP 0 warm-up call, packed: (where its answer goes, the call)."""
    segs: list[np.ndarray] = []
    return segs, lane.calls(chunk, segs)


class _Lane(Protocol):
    name: str
    k: int

    def calls(self, blocks: list[Block], answers: list[np.ndarray]) -> list[tuple[Call, Take]]:
        """The lane's calls for ``blocks`` (one chunk), each block's answer appended to ``answers``."""


class _Exact:
    name, k = "exact lane", 1

    def __init__(self, lane: ExactLane) -> None:
        self.lane = lane

    def calls(self, blocks: list[Block], answers: list[np.ndarray]) -> list[tuple[Call, Take]]:
        return list(self.lane.requests(blocks, 0, lambda i, out: answers.append(out)))


class _Fast:
    def __init__(self, lane: FastLane) -> None:
        self.lane, self.k, self.name = lane, lane.k, f"k={lane.k}"

    def calls(self, blocks: list[Block], answers: list[np.ndarray]) -> list[tuple[Call, Take]]:
        return list(self.lane.requests([blocks], lambda i, outs: answers.extend(outs)))
