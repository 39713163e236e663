"""Runs the lanes over a corpus, group by group, interleaved, so machine drift hits every lane alike.

The corpus is walked in groups of blocks (the least common multiple of the shapes, so every shape
packs whole groups; capped); within a group the exact lane runs first, then each packed shape,
for OP 0, then for each voiceprint OP. Each lane's calls of a group go to the backend together
(``call_many``), so a backend may keep several in flight.

Memory is bounded by a group: blocks come from an iterator, and each lane's outputs of a group go
to ``sink(lane, outputs)`` (which may write them in a background thread) before the next group.

Voiceprint requests come from the engine's mask function. The plan's ``voiceprint_inputs`` (``[lanes]
voiceprint_inputs``; the run manifest's ``mode``) says whose: **isolated**, every lane gets the same
WEIGHTS/IDX (the golden's, asked of ``golden_inputs`` per group, or the exact lane's own segmentation),
so the voiceprint network is judged alone; **chained**, each lane derives them from its own
segmentation, as production would.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.config import VOICEPRINT_INPUTS
from harness.data.blocks import Block
from harness.data.errors import LaneError
from harness.data.geometry import Geometry
from harness.data.masks import MaskPolicy, VoiceprintRows, voiceprint_rows
from harness.data.ops import ALL_OPS, Op
from harness.data.outputs import LaneOutputs, OutputCollector
from harness.data.shape import EXACT, Shape, ShapeError, lane_name
from harness.packing import HARNESS_PACKER, Packer
from lanes.backend import Backend
from lanes.lanes import CallLog, CallRecord, ExactLane, FastLane
from lanes.memory import check_fits, in_process_device, measure_peak

_MAX_GROUP = 256

Progress = Callable[[int], None]
Sink = Callable[[str, LaneOutputs], None]


# the golden's WEIGHTS/IDX of a group of blocks (isolated voiceprint inputs without the exact lane's)
GoldenInputs = Callable[[list[str]], Mapping[Op, Mapping[str, VoiceprintRows]]]


@dataclass(frozen=True)
class RunPlan:
    shapes: tuple[int, ...] = ()
    release_shapes: Mapping[Op, tuple[int, ...]] = field(default_factory=lambda: {op: (1,) for op in ALL_OPS})
    voiceprint_inputs: str = "isolated"  # one of VOICEPRINT_INPUTS; the run manifest's "mode" (file key)
    pad_to_fixed: bool = False
    include_exact: bool = True
    exact_repeats: int = 1
    ops: tuple[Op, ...] = ALL_OPS
    mask_policy: MaskPolicy = MaskPolicy()
    warmup: bool = True  # one untimed call per lane, shape and OP first (lazy init, cuDNN autotuning)

    def __post_init__(self) -> None:
        if self.voiceprint_inputs not in VOICEPRINT_INPUTS:
            raise LaneError(f"unknown voiceprint inputs {self.voiceprint_inputs!r}: expected one of "
                            f"{VOICEPRINT_INPUTS}")
        try:
            for k in self.shapes:
                Shape(k, "packed shape")  # the range is Shape's (harness.data.shape); the plan keeps the ints
        except ShapeError as exc:
            raise LaneError(f"{exc} (the plan's shapes: {list(self.shapes)})") from None
        if not self.include_exact and not self.shapes:
            raise LaneError("nothing to run: no exact lane and no packed shapes")
        if self.exact_repeats < 1:
            raise LaneError("exact_repeats must be >= 1")
        if Op.SEGMENTATION not in self.ops:
            raise LaneError("OP 0 must run: the voiceprint requests are derived from it")

    def group_size(self) -> int:
        if not self.shapes:
            return 16
        size = math.lcm(*self.shapes)
        return size if size <= _MAX_GROUP else max(self.shapes)

    def lanes(self) -> list[str]:
        names = [lane_name(EXACT, r) for r in range(self.exact_repeats if self.include_exact else 0)]
        return names + [lane_name(k) for k in self.shapes]

    def calls(self, blocks: int) -> int:
        """Network calls this plan makes over ``blocks`` blocks (for progress bars)."""
        total, g = 0, self.group_size()
        for start in range(0, blocks, g):
            n = min(g, blocks - start)
            per_op = (n * self.exact_repeats if self.include_exact else 0) + sum(math.ceil(n / k) for k in self.shapes)
            total += per_op * len(self.ops)
        return total


def run_lanes(
    blocks: Iterable[Block],
    backend: Backend,
    plan: RunPlan,
    sink: Sink,
    golden_inputs: GoldenInputs | None = None,
    packer: Packer = HARNESS_PACKER,
    progress: Progress | None = None,
    log: CallLog | None = None,
) -> CallLog:
    """Run the plan over ``blocks`` (OP 0 blocks of audio), giving each lane's outputs of each group
    to ``sink``. Every network call made (the warm-up excluded) is appended to ``log`` (a list by
    default; a writer of the call log file keeps memory flat) and ``log`` is returned."""
    geometry = backend.geometry
    if plan.voiceprint_inputs == "isolated" and not plan.include_exact and golden_inputs is None:
        raise LaneError("a plan of isolated voiceprint inputs and no exact lane needs the golden's voiceprint inputs")
    if plan.include_exact and 1 not in plan.release_shapes.get(Op.SEGMENTATION, ()):
        raise LaneError("this runner interleaves block by block: the release shape must be 1 block per call")
    tick = progress or (lambda n: None)
    log = [] if log is None else log
    exact = ExactLane(backend, plan.release_shapes, log)
    fast = {k: FastLane(backend, k, log, plan.pad_to_fixed, packer) for k in plan.shapes}
    repeats = plan.exact_repeats if plan.include_exact else 0
    iterator = iter(blocks)
    first = True
    while True:
        members = list(itertools.islice(iterator, plan.group_size()))
        if not members:
            break
        _check_group(members)
        if first and plan.warmup:
            _warm_up(members, backend, plan, packer, getattr(progress, "phase", None))
        first = False
        order = [b.id for b in members]
        exact_out = [OutputCollector(geometry) for _ in range(repeats)]
        fast_out = {k: OutputCollector(geometry) for k in plan.shapes}
        # OP 0
        for r, collector in enumerate(exact_out):
            for block, out in zip(members, exact.run(members, replica=r), strict=True):
                collector.add_segmentation(block.id, block.valid, out)
            tick(len(members))
        for k, lane in fast.items():
            chunks = _chunks(members, k)
            for chunk, outs in zip(chunks, lane.run(chunks), strict=True):
                for block, out in zip(chunk, outs, strict=True):
                    fast_out[k].add_segmentation(block.id, block.valid, out)
            tick(len(chunks))
        # OP 1 / OP 2
        given = golden_inputs(order) if golden_inputs is not None else None
        for op in plan.ops:
            if op is Op.SEGMENTATION:
                continue
            shared = _shared_rows(members, op, given, exact_out, geometry, plan.mask_policy)
            for r, collector in enumerate(exact_out):
                _voiceprint_exact(exact, members, shared, op, geometry, collector, r)
                tick(len(members))
            for k, lane in fast.items():
                chunks = _chunks(members, k)
                rows = [[shared[b.id] if plan.voiceprint_inputs == "isolated" else
                         voiceprint_rows(fast_out[k].segmentation_of(b.id), b.valid, op, geometry, plan.mask_policy)
                         for b in chunk] for chunk in chunks]
                _voiceprint_fast(lane, chunks, rows, op, geometry, fast_out[k])
                tick(len(chunks))
        for r, collector in enumerate(exact_out):
            sink(lane_name(EXACT, r), collector.finish(order))
        for k, collector in fast_out.items():
            sink(lane_name(k), collector.finish(order))
    return log


def _shared_rows(members: list[Block], op: Op, given: Mapping[Op, Mapping[str, VoiceprintRows]] | None,
                 exact_out: list[OutputCollector], geometry: Geometry, policy: MaskPolicy) -> dict[str, VoiceprintRows]:
    """The WEIGHTS/IDX every lane gets with isolated voiceprint inputs (and the exact lane with both)."""
    shared = {}
    for block in members:
        if given is not None:
            if op not in given:
                raise LaneError(f"the golden holds no OP {int(op)} inputs")
            # a block absent from the golden's OP table had no speaker with enough frames: no rows
            shared[block.id] = given[op].get(block.id) or no_rows(geometry)
        elif exact_out:
            seg = exact_out[0].segmentation_of(block.id)
            shared[block.id] = voiceprint_rows(seg, block.valid, op, geometry, policy)
        else:
            raise LaneError("voiceprint inputs need the golden's or the exact lane's segmentation")
    return shared


def _voiceprint_exact(lane: ExactLane, members: list[Block], shared: dict[str, VoiceprintRows], op: Op,
                      geometry: Geometry, collector: OutputCollector, replica: int) -> None:
    requests = [b.with_voiceprint(op, shared[b.id].weights, shared[b.id].idx, shared[b.id].speakers, geometry)
                for b in members]
    for req, answer in zip(requests, lane.run(requests, replica=replica), strict=True):
        collector.add_voiceprint(op, req.id, shared[req.id], answer)


def _voiceprint_fast(lane: FastLane, chunks: list[list[Block]], rows: list[list[VoiceprintRows]], op: Op,
                     geometry: Geometry, collector: OutputCollector) -> None:
    requests = [[b.with_voiceprint(op, r.weights, r.idx, r.speakers, geometry) for b, r in zip(chunk, chunk_rows,
                                                                                               strict=True)]
                for chunk, chunk_rows in zip(chunks, rows, strict=True)]
    sending = [i for i, reqs in enumerate(requests) if sum(r.rows for r in reqs)]
    answers = dict(zip(sending, lane.run([requests[i] for i in sending]), strict=True))
    for i, reqs in enumerate(requests):
        outs = answers.get(i) or [_empty(geometry) for _ in reqs]
        for req, row_set, out in zip(reqs, rows[i], outs, strict=True):
            collector.add_voiceprint(op, req.id, row_set, out)


def _warm_up(first: list[Block], backend: Backend, plan: RunPlan, packer: Packer,
             phase: Callable[[str | None], None] | None = None) -> None:
    """Run every lane's first call once, untimed and discarded: the first call of a shape pays
    one-off costs (allocator growth, oneDNN primitive creation, cuDNN autotuning) that are not
    the shape's throughput. The exact lane's warm-up (one block per call) is measured, and packed
    shapes whose requests cannot fit the device are refused before their first call
    (:mod:`lanes.memory`). ``phase`` (the progress bar's) is told each step, ``warm-up: OP 0 k=4
    (3 of 12)``, and None at the end: minutes of it on a CPU are neither silent nor per-block work."""
    scratch: list[CallRecord] = []
    g = backend.geometry
    runs: list[tuple[Callable, int, str]] = []
    if plan.include_exact:
        runs.append((lambda bs: ExactLane(backend, plan.release_shapes, scratch).run(bs[:1]), 1, "exact lane"))
    for k in plan.shapes:
        lane = FastLane(backend, k, scratch, plan.pad_to_fixed, packer)
        runs.append((lambda bs, lane=lane: lane.run([bs])[0], k, f"k={k}"))
    steps = len(runs) * len(plan.ops)
    say = phase or (lambda label: None)

    def warm(run: Callable, k: int, index: int = 0, name: str = "exact lane") -> list[int | None]:
        start = len(scratch)
        chunk = first[:k]
        say(f"warm-up: OP 0 {name} ({index * len(plan.ops) + plan.ops.index(Op.SEGMENTATION) + 1} of {steps})")
        segs = run(chunk)
        chunk = chunk[: len(segs)]
        for j, op in enumerate(plan.ops):
            if op.is_voiceprint:
                say(f"warm-up: OP {int(op)} {name} ({index * len(plan.ops) + j + 1} of {steps})")
                rows = [voiceprint_rows(s, b.valid, op, g, plan.mask_policy) for b, s in zip(chunk, segs, strict=True)]
                if sum(r.idx.shape[0] for r in rows):
                    run([b.with_voiceprint(op, r.weights, r.idx, r.speakers, g)
                         for b, r in zip(chunk, rows, strict=True)])
        return [c.peak_device_bytes for c in scratch[start:]]

    device = in_process_device(backend)
    for i, (run, k, name) in enumerate(runs):
        if i == 0 and plan.include_exact and plan.shapes and device is not None:
            again = lambda run=run, k=k, i=i, name=name: warm(run, k, i, name)  # noqa: E731
            check_fits(plan.shapes, plan.pad_to_fixed, len(first), device, measure_peak(again, device), again)
        else:
            warm(run, k, i, name)
    say(None)


def check_request_sizes(max_span_samples: int, blocks: int, backend: Backend, plan: RunPlan) -> None:
    """Refuse, before any call, a shape whose largest pack exceeds the backend's request limit."""
    limit = getattr(backend, "max_request_bytes", None)
    if not limit:
        return
    g = backend.geometry
    for k in sorted(plan.shapes, reverse=True):
        real = k if plan.pad_to_fixed else min(k, blocks)
        per_window = 8 + 4 + 4 + g.speakers * (g.frames_per_window * 4 + 4)
        per_block = max_span_samples * 4 + g.windows_per_block * per_window
        estimate = real * per_block
        if estimate > limit:
            raise LaneError(
                f"shape k={k} needs requests of about {estimate / 2**20:.1f} MiB, over the backend's limit of "
                f"{limit / 2**20:.1f} MiB (max_request_bytes; Triton's --http-max-input-size): at most about "
                f"{max(1, limit // per_block)} blocks per call fit"
            )


def no_rows(geometry: Geometry) -> VoiceprintRows:
    return VoiceprintRows(np.zeros((0, geometry.frames_per_window), np.float32), np.zeros(0, np.int32),
                          np.zeros(0, np.int32))


def _empty(geometry: Geometry) -> np.ndarray:
    return np.zeros((0, geometry.embedding_dim), dtype=np.float32)


def _chunks(items: Sequence[Block], k: int) -> list[list[Block]]:
    return [list(items[i : i + k]) for i in range(0, len(items), k)]


def _check_group(blocks: list[Block]) -> None:
    for b in blocks:
        if b.op is not Op.SEGMENTATION:
            raise LaneError(f"block {b.id!r}: corpus blocks must be OP 0 audio blocks, got OP {int(b.op)}")
