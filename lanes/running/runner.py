"""Runs the lanes over a corpus, group by group, interleaved, so machine drift hits every lane alike.

The corpus is walked in groups of blocks (the least common multiple of the shapes, so every shape
packs whole groups; capped); within a group the exact lane runs first, then each packed shape,
for OP 0, then for each voiceprint OP. With a backend that offers ``pipelined()`` (in-process) the
calls go, in exactly that order, to a device queue (:mod:`lanes.running.device_queue`) while the host
prepares the next request and takes the previous answers; otherwise each lane's calls of a group go
to the backend together (``call_many``), so a backend may keep several in flight. Before the first
group, every lane's warm-up (:mod:`lanes.running.warm_up`) goes the same way, the first group's calls right
behind it.

A plan's ``variants`` (:mod:`lanes.running.variants`: ``FastVariant``, ``Arranger``) are more lanes at a plain
shape, the same group in another arrangement or twice (``k4.a1``, ``k4.d`` + ``k4.d2``, ``k4.r2``): they
run after the plain shapes in every group and OP, with the voiceprint OPs in OP 0's arrangement, and
their calls are logged with ``CallRecord.variant`` = the variant's (first) lane, so a shape's own
figures (throughput, request counts) stay its plain lane's. Without variants the calls and outputs are
what they were before variants existed (tests/test_runner_variants.py pins their digests).

Memory is bounded by a few groups: blocks come from an iterator (pipelined: one group read ahead in
a thread), at most two groups are in flight, the host runs at most 64 calls / 256 MiB of requests
ahead of the device, and each lane's outputs of a group go to ``sink(lane, outputs)`` (which may
write them in a background thread) once the group's last answer is taken.

Voiceprint requests come from the engine's mask function. The plan's ``voiceprint_inputs`` (``[lanes]
voiceprint_inputs``; the run manifest's ``mode``) says whose: **isolated**, every lane gets the same
WEIGHTS/IDX (the golden's, asked of ``golden_inputs`` per group, or the exact lane's own segmentation),
so the voiceprint network is judged alone; **chained**, each lane derives them from its own
segmentation, as production would.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from harness.base.errors import LaneError
from harness.base.overlap import prefetch
from harness.base.workers import SettlingPool
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.masks import MaskPolicy, VoiceprintRows, voiceprint_rows
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, OutputCollector
from harness.data.shape import EXACT, lane_name
from harness.packers.packing import HARNESS_PACKER, Packer
from lanes.backends.backend_api import Backend, Call
from lanes.running.device_queue import Ordered, ordered
from lanes.running.lanes import CallLog, ExactLane, FastLane, Take
from lanes.running.neighbour_controls import CONTROL_SUFFIX, NeighbourControls
from lanes.running.run_plan import RunPlan
from lanes.running.variants import FILLER, Arranger, Entry, FastVariant, arrangement, consecutive, sent_as
from lanes.running.warm_up import warm_up

__all__ = ["Arranger", "FastVariant", "GoldenInputs", "LaneHooks", "run_lanes"]

Progress = Callable[[int], None]
Sink = Callable[[str, LaneOutputs], None]


# the golden's WEIGHTS/IDX of a group of blocks (isolated voiceprint inputs without the exact lane's)
GoldenInputs = Callable[[list[str]], Mapping[Op, Mapping[str, VoiceprintRows]]]


@dataclass(frozen=True)
class LaneHooks:
    """What a caller of :func:`run_lanes` follows the lanes with: ``progress``, ticked per call; ``log``, the call
    log every network call (the warm-up excluded) is appended to (None: a new list; a writer of the call log
    file keeps memory flat); ``on_first_queued``, called once, the first group read and its warm-up queued."""

    progress: Progress | None = None
    log: CallLog | None = None
    on_first_queued: Callable[[], object] | None = None
    controls: NeighbourControls | None = None  # the neighbour lanes' control repeats, sent after the last group


def run_lanes(
    blocks: Iterable[Block],
    backend: Backend,
    plan: RunPlan,
    sink: Sink,
    golden_inputs: GoldenInputs | None = None,
    packer: Packer = HARNESS_PACKER,
    hooks: LaneHooks = LaneHooks(),
) -> CallLog:
    """Run the plan over ``blocks`` (OP 0 blocks of audio), giving each lane's outputs of each group
    to ``sink``. Every network call made (the warm-up excluded) is appended to ``hooks.log`` (a list by
    default; a writer of the call log file keeps memory flat) and the log is returned.
    ``hooks.on_first_queued``: called once, the first group read and its warm-up queued, just before its calls are
    (the group may wait on its own calls, so not after them); a caller's background start-up (the nightly's
    scoring kernels, :func:`harness.compute.metrics.start_warming`) then runs while the device has work, not
    beside the start-up it would slow.

    Pipelined (``plan.pipeline`` and a backend with ``pipelined()``, :mod:`lanes.running.device_queue`): the
    calls go to the device in exactly the serial order while this thread prepares the next requests
    and takes the previous answers; at most two groups are in memory. The outputs and the call log
    are the serial path's, bitwise (tests/test_pipelined_lanes.py)."""
    geometry = backend.geometry
    if plan.voiceprint_inputs == "isolated" and not plan.include_exact and golden_inputs is None:
        raise LaneError("a plan of isolated voiceprint inputs and no exact lane needs the golden's voiceprint inputs")
    if plan.include_exact and 1 not in plan.release_shapes.get(Op.SEGMENTATION, ()):
        raise LaneError("this runner interleaves block by block: the release shape must be 1 block per call")
    progress, on_first_queued = hooks.progress, hooks.on_first_queued
    tick = progress or (lambda n: None)
    log = [] if hooks.log is None else hooks.log
    exact = ExactLane(backend, plan.release_shapes, log)
    fast: list[_FastLane] = [
        (FastLane(backend, k, log, plan.pad_to_fixed, packer), (lane_name(k),), None) for k in plan.shapes
    ]
    fast += [
        (FastLane(backend, v.k, log, plan.pad_to_fixed, packer, variant=v.lanes[0]), v.lanes, v) for v in plan.variants
    ]
    first = True
    with (
        ordered(backend, plan.pipeline) as line,
        SettlingPool(1, "golden-inputs") as reader,
        contextlib.closing(_groups(blocks, plan.group_size(), line.pipelined)) as groups,
    ):
        ends: deque[int] = deque()  # the marks of the groups whose outputs are not yet given to the sink
        run = _Group(line, exact, fast, plan, geometry, sink, tick, hooks.controls)
        for members in groups:
            while len(ends) >= 2:  # at most two groups in memory
                line.wait(ends.popleft())
            if first and plan.warmup:  # pushed ahead of the first group's calls (lanes.running.warm_up)
                warm_up(members, backend, plan, packer, line, getattr(progress, "phase", None))
            if first and on_first_queued is not None:
                on_first_queued()
            first = False
            given = _given(golden_inputs, [b.id for b in members], reader if line.pipelined else None)
            ends.append(_run_group(members, given, run))
        line.drain()
        if (
            hooks.controls is not None
        ):  # the neighbour lanes' moved requests, sent once more (lanes.running.neighbour_controls)
            control_lanes = {
                v.k: FastLane(backend, v.k, log, plan.pad_to_fixed, packer, variant=v.lanes[0] + CONTROL_SUFFIX)
                for v in plan.variants
                if v.fill is not None
            }
            line.stage(hooks.controls.requests(control_lanes))
            line.drain()
    return log


def _groups(blocks: Iterable[Block], size: int, ahead: bool) -> Generator[list[Block], None, None]:
    """The corpus in groups of ``size`` blocks, checked; pipelined, the next group is read (decoded,
    validated) in a thread while this one runs (:func:`harness.base.overlap.prefetch`, one group ahead)."""

    def read() -> Iterator[list[Block]]:
        iterator = iter(blocks)
        while members := list(itertools.islice(iterator, size)):
            _check_group(members)
            yield members

    yield from prefetch(read(), depth=1, name="lanes-reader") if ahead else read()  # closed with this one


def _given(
    golden_inputs: GoldenInputs | None, order: list[str], reader: SettlingPool | None
) -> Callable[[], Mapping[Op, Mapping[str, VoiceprintRows]] | None]:
    """The golden's voiceprint inputs of a group, when first asked for (after its OP 0 calls are pushed),
    or, pipelined, read meanwhile in a thread (Parquet decoding releases the GIL): the device then
    never waits for the golden's file between a group's OP 0 and OP 1."""
    if golden_inputs is None:
        return lambda: None
    if reader is None:
        return lambda: golden_inputs(order)
    return reader.submit(golden_inputs, order).result


# a packed lane: the lane, its names per copy index (a plain shape's one; a variant's), the variant or None
_FastLane = tuple[FastLane, tuple[str, ...], FastVariant | None]
_Placed = tuple[FastLane, list[list[Entry]], list[OutputCollector]]


@dataclass(frozen=True)
class _Group:
    """What every group of one :func:`run_lanes` is run with: the device line, the lanes, the plan, the
    geometry, where the outputs go and the progress tick."""

    line: Ordered
    exact: ExactLane
    fast: list[_FastLane]
    plan: RunPlan
    geometry: Geometry
    sink: Sink
    tick: Progress
    controls: NeighbourControls | None = None


def _run_group(
    members: list[Block], golden_given: Callable[[], Mapping[Op, Mapping[str, VoiceprintRows]] | None], run: _Group
) -> int:
    """Push every call of one group, in the device order (OP 0: exact lane(s), plain shapes, variants; then
    each voiceprint OP alike), each answer taken into its lane's collector; returns the mark after
    which the group's outputs have gone to ``run.sink``."""
    line, exact, fast, plan = run.line, run.exact, run.fast, run.plan
    geometry, sink, tick = run.geometry, run.sink, run.tick
    order = [b.id for b in members]
    exact_out = [OutputCollector(geometry) for _ in range(plan.exact_repeats if plan.include_exact else 0)]
    placed: list[_Placed] = []
    for lane, names, variant in fast:  # a variant's arrangement is checked before any call of the group
        entries = consecutive(members, lane.k) if variant is None else arrangement(variant, members)
        placed.append((lane, entries, [OutputCollector(geometry) for _ in names]))
    exact_mark = 0
    for r, collector in enumerate(exact_out):
        mark = line.stage(exact.requests(members, r, functools.partial(_exact_segmentation, members, collector)))
        exact_mark = exact_mark or mark
        line.then(functools.partial(tick, len(members)))
    op0_marks = []
    for (lane, entries, outs), (_, _, variant) in zip(placed, fast, strict=True):
        fill = variant.fill if variant is not None else None
        sent = [[sent_as(b, c, fill) for b, c in chunk] for chunk in entries]
        op0_marks.append(line.stage(lane.requests(sent, functools.partial(_fast_segmentation, entries, outs))))
        line.then(functools.partial(tick, len(entries)))
    # the plain lane of each shape: a neighbour lane's rows are its (every block at its slot, the same geometry)
    plain_of = {lane.k: i for i, (lane, _, variant) in enumerate(fast) if variant is None}
    chained = plan.voiceprint_inputs == "chained"
    given = golden_given()
    shared_by_op: dict[Op, dict[str, VoiceprintRows]] = {}
    for op in plan.ops:
        if op is Op.SEGMENTATION:
            continue
        if given is None:
            line.wait(exact_mark)  # the shared rows are the exact lane's segmentation's
        shared = shared_by_op[op] = _shared_rows(members, op, given, exact_out, geometry, plan.mask_policy)
        for r, collector in enumerate(exact_out):
            requests = [
                b.with_voiceprint(op, shared[b.id].weights, shared[b.id].idx, shared[b.id].speakers, geometry)
                for b in members
            ]
            line.stage(
                exact.requests(requests, r, functools.partial(_exact_voiceprint, op, requests, shared, collector))
            )
            line.then(functools.partial(tick, len(members)))
        for (lane, entries, outs), mark, (_, _, variant) in zip(placed, op0_marks, fast, strict=True):
            fill = variant.fill if variant is not None else None
            source = outs if fill is None else [placed[plain_of[lane.k]][2][0]]  # whose segmentation gives the rows
            if chained:
                line.wait(mark if fill is None else op0_marks[plain_of[lane.k]])  # the rows' own segmentation
            feed = _Feed(entries, outs, source, None if chained else shared, fill)
            line.stage(_fast_voiceprint(lane, feed, op, geometry, plan.mask_policy))
            line.then(functools.partial(tick, len(entries)))

    def rows_of(plain: OutputCollector, op: Op, block_id: str) -> VoiceprintRows | None:
        """A block's WEIGHTS/IDX as its plain request carried them (for the neighbour lane's control repeats)."""
        if not chained:
            return shared_by_op.get(op, {}).get(block_id)
        valid = next(b.valid for b in members if b.id == block_id)
        return voiceprint_rows(plain.segmentation_of(block_id), valid, op, geometry, plan.mask_policy)

    def finish() -> None:
        for r, collector in enumerate(exact_out):
            sink(lane_name(EXACT, r), collector.finish(order))
        for (_, names, _), (_, _, outs) in zip(fast, placed, strict=True):
            for name, collector in zip(names, outs, strict=True):
                sink(name, collector.finish(order))
        if run.controls is not None:  # which neighbour requests moved: kept for a second send (bounded)
            for (lane, _, variant), (_, _, outs) in zip(fast, placed, strict=True):
                if variant is not None and variant.fill is not None:
                    plain = placed[plain_of[lane.k]][2][0]
                    run.controls.observe(lane.k, members, plain, outs[0], functools.partial(rows_of, plain), plan.ops)

    return line.then(finish)


def _exact_segmentation(members: list[Block], collector: OutputCollector, i: int, out: np.ndarray) -> None:
    collector.add_segmentation(members[i].id, members[i].valid, out)


def _exact_voiceprint(
    op: Op,
    requests: list[Block],
    shared: dict[str, VoiceprintRows],
    collector: OutputCollector,
    i: int,
    answer: np.ndarray,
) -> None:
    collector.add_voiceprint(op, requests[i].id, shared[requests[i].id], answer)


def _fast_segmentation(
    entries: list[list[Entry]], outs: list[OutputCollector], i: int, answers: list[np.ndarray]
) -> None:
    """A chunk's answers, each under its block's own id, into its copy's lane (a plain lane's: copy 0); a filled
    block's answer is dropped (lanes.running.neighbour_lane)."""
    for (block, copy), out in zip(entries[i], answers, strict=True):
        if copy != FILLER:
            outs[copy].add_segmentation(block.id, block.valid, out)


@dataclass(frozen=True)
class _Feed:
    """What one packed lane's voiceprint calls of a group are made from: its entries and collectors, the
    collectors whose segmentation gives chained rows (its own; a neighbour lane's: its plain lane's), the
    shared rows (isolated inputs; None: chained) and the fill of its filled entries."""

    entries: list[list[Entry]]
    outs: list[OutputCollector]
    source: list[OutputCollector]
    shared: dict[str, VoiceprintRows] | None
    fill: Callable[[Block], Block] | None


def _fast_voiceprint(
    lane: FastLane, feed: _Feed, op: Op, geometry: Geometry, policy: MaskPolicy
) -> Iterator[tuple[Call, Take]]:
    """One call per chunk with any rows, made as it is asked for (``feed.shared``: isolated inputs; None: each
    block's rows from its source lane's segmentation); a chunk without rows is not sent: no rows, at once."""
    for chunk in feed.entries:
        rows = [
            feed.shared[b.id]
            if feed.shared is not None
            else voiceprint_rows(
                feed.source[0 if c == FILLER else c].segmentation_of(b.id),
                b.valid,
                op,
                geometry,
                policy,
            )
            for b, c in chunk
        ]
        targets = [(feed.outs[c] if c != FILLER else None, b.id) for b, c in chunk]
        if not sum(int(r.idx.shape[0]) for r in rows):
            for (collector, block_id), row_set in zip(targets, rows, strict=True):
                if collector is not None:
                    collector.add_voiceprint(op, block_id, row_set, _empty(geometry))
            continue
        requests = [
            sent_as(b, c, feed.fill).with_voiceprint(op, r.weights, r.idx, r.speakers, geometry)
            for (b, c), r in zip(chunk, rows, strict=True)
        ]
        yield from lane.requests([requests], functools.partial(_fast_answers, op, targets, rows))


def _fast_answers(
    op: Op,
    targets: list[tuple[OutputCollector | None, str]],
    rows: list[VoiceprintRows],
    _: int,
    answers: list[np.ndarray],
) -> None:
    for (collector, block_id), row_set, out in zip(targets, rows, answers, strict=True):
        if collector is not None:  # None: a filled block, its answer dropped
            collector.add_voiceprint(op, block_id, row_set, out)


def _shared_rows(
    members: list[Block],
    op: Op,
    given: Mapping[Op, Mapping[str, VoiceprintRows]] | None,
    exact_out: list[OutputCollector],
    geometry: Geometry,
    policy: MaskPolicy,
) -> dict[str, VoiceprintRows]:
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


def no_rows(geometry: Geometry) -> VoiceprintRows:
    return VoiceprintRows(
        np.zeros((0, geometry.frames_per_window), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32)
    )


def _empty(geometry: Geometry) -> np.ndarray:
    return np.zeros((0, geometry.embedding_dim), dtype=np.float32)


def _check_group(blocks: list[Block]) -> None:
    for b in blocks:
        if b.op is not Op.SEGMENTATION:
            raise LaneError(f"block {b.id!r}: corpus blocks must be OP 0 audio blocks, got OP {int(b.op)}")
