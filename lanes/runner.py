"""Runs the lanes over a corpus, interleaved, so machine drift hits every lane alike.

The corpus is walked in groups of blocks (the least common multiple of the shapes, so every
shape packs whole groups); within a group the exact lane runs first, then each packed
shape, for OP 0, then for each voiceprint OP. Voiceprint requests come from the engine's
mask function: in **isolated** mode every lane gets the same WEIGHTS/IDX (the golden's, or
the exact lane's segmentation), so the voiceprint network is judged alone; in **chained**
mode each lane derives them from its own segmentation, as production would.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from harness.blocks import Block
from harness.errors import LaneError
from harness.geometry import Geometry
from harness.masks import MaskPolicy, VoiceprintRows, voiceprint_rows
from harness.ops import ALL_OPS, Op
from harness.outputs import LaneOutputs, OutputCollector
from lanes.backend import Backend
from lanes.lanes import CallRecord, ExactLane, FastLane

MODES = ("isolated", "chained")
_MAX_GROUP = 256


@dataclass(frozen=True)
class RunPlan:
    shapes: tuple[int, ...] = ()
    release_shapes: Mapping[Op, tuple[int, ...]] = field(default_factory=lambda: {op: (1,) for op in ALL_OPS})
    mode: str = "isolated"
    pad_to_fixed: bool = False
    include_exact: bool = True
    exact_repeats: int = 1
    ops: tuple[Op, ...] = ALL_OPS
    mask_policy: MaskPolicy = MaskPolicy()
    warmup: bool = True  # one untimed call per lane, shape and OP first (lazy init, cuDNN autotuning)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise LaneError(f"unknown lane mode {self.mode!r}: expected one of {MODES}")
        if any(k < 1 for k in self.shapes):
            raise LaneError(f"packed shapes must be >= 1, got {list(self.shapes)}")
        if not self.include_exact and not self.shapes:
            raise LaneError("nothing to run: no exact lane and no packed shapes")
        if self.exact_repeats < 1:
            raise LaneError("exact_repeats must be >= 1")
        if Op.SEGMENTATION not in self.ops:
            raise LaneError("OP 0 must run: the voiceprint requests are derived from it")

    def group_size(self) -> int:
        if not self.shapes:
            return 1
        size = math.lcm(*self.shapes)
        return size if size <= _MAX_GROUP else max(self.shapes)

    def calls(self, blocks: int) -> int:
        """Network calls this plan makes over ``blocks`` blocks (for progress bars)."""
        total, g = 0, self.group_size()
        for start in range(0, blocks, g):
            n = min(g, blocks - start)
            per_op = (n * self.exact_repeats if self.include_exact else 0) + sum(math.ceil(n / k) for k in self.shapes)
            total += per_op * len(self.ops)
        return total


@dataclass(eq=False)
class RunResult:
    exact: list[LaneOutputs]  # one per repeat (empty when the exact lane did not run)
    fast: dict[int, LaneOutputs]
    calls: list[CallRecord]


Progress = Callable[[int], None]


def run_lanes(
    blocks: Sequence[Block],
    backend: Backend,
    plan: RunPlan,
    voiceprint_inputs: Mapping[Op, Mapping[str, VoiceprintRows]] | None = None,
    progress: Progress | None = None,
) -> RunResult:
    """Run the plan over ``blocks`` (OP 0 blocks of audio). See the module doc."""
    geometry = backend.geometry
    if plan.mode == "isolated" and not plan.include_exact and voiceprint_inputs is None:
        raise LaneError("isolated mode without the exact lane needs the golden's voiceprint inputs")
    check_request_sizes(blocks, backend, plan)
    tick = progress or (lambda n: None)
    log: list[CallRecord] = []
    exact = ExactLane(backend, plan.release_shapes, log)
    fast = {k: FastLane(backend, k, log, plan.pad_to_fixed) for k in plan.shapes}
    exact_out = [OutputCollector(geometry) for _ in range(plan.exact_repeats if plan.include_exact else 0)]
    fast_out = {k: OutputCollector(geometry) for k in plan.shapes}
    if plan.include_exact and exact.shape != 1:
        raise LaneError("this runner interleaves block by block: the release shape must be 1 block per call")

    group = plan.group_size()
    if plan.warmup and blocks:
        _warm_up(list(blocks[:group]), backend, plan)
    for start in range(0, len(blocks), group):
        members = list(blocks[start : start + group])
        _check_ops(members)
        # OP 0
        for block in members:
            for r, collector in enumerate(exact_out):
                (out,) = exact.run([block], replica=r)
                collector.add_segmentation(block.id, block.valid, out)
                tick(1)
        for k, lane in fast.items():
            for chunk in _chunks(members, k):
                for block, out in zip(chunk, lane.run(chunk), strict=True):
                    fast_out[k].add_segmentation(block.id, block.valid, out)
                tick(1)
        # OP 1 / OP 2
        for op in plan.ops:
            if op is Op.SEGMENTATION:
                continue
            shared = {}
            for block in members:
                if voiceprint_inputs is not None:
                    if op not in voiceprint_inputs:
                        raise LaneError(f"the golden holds no OP {int(op)} inputs")
                    # a block absent from the golden's OP table had no speaker with enough frames: no rows
                    shared[block.id] = voiceprint_inputs[op].get(block.id) or no_rows(geometry)
                elif exact_out:
                    seg = exact_out[0].segmentation_of(block.id)
                    shared[block.id] = voiceprint_rows(seg, block.valid, op, geometry, plan.mask_policy)
            for block in members:
                for r, collector in enumerate(exact_out):
                    _voiceprint_call(lambda bs, r=r: exact.run(bs, replica=r), [block], [shared[block.id]], op,
                                     geometry, collector)
                    tick(1)
            for k, lane in fast.items():
                for chunk in _chunks(members, k):
                    if plan.mode == "isolated":
                        chunk_rows = [shared[b.id] for b in chunk]
                    else:
                        chunk_rows = [voiceprint_rows(fast_out[k].segmentation_of(b.id), b.valid, op, geometry,
                                                      plan.mask_policy) for b in chunk]
                    _voiceprint_call(lane.run, chunk, chunk_rows, op, geometry, fast_out[k])
                    tick(1)
    order = [b.id for b in blocks]
    return RunResult([c.finish(order) for c in exact_out], {k: c.finish(order) for k, c in fast_out.items()}, log)


def _warm_up(first: list[Block], backend: Backend, plan: RunPlan) -> None:
    """Run every lane's first call once, untimed and discarded: the first call of a shape pays
    one-off costs (allocator growth, oneDNN primitive creation, cuDNN autotuning) that are not
    the shape's throughput."""
    scratch: list[CallRecord] = []
    lanes = [(ExactLane(backend, plan.release_shapes, scratch).run, 1)] if plan.include_exact else []
    lanes += [(FastLane(backend, k, scratch, plan.pad_to_fixed).run, k) for k in plan.shapes]
    g = backend.geometry
    for run, k in lanes:
        chunk = first[:k]
        segs = run(chunk)
        for op in plan.ops:
            if op.is_voiceprint:
                rows = [voiceprint_rows(s, b.valid, op, g, plan.mask_policy) for b, s in zip(chunk, segs, strict=True)]
                if sum(r.idx.shape[0] for r in rows):
                    run([b.with_voiceprint(op, r.weights, r.idx, r.speakers, g) for b, r in zip(chunk, rows,
                                                                                              strict=True)])


def check_request_sizes(blocks: Sequence[Block], backend: Backend, plan: RunPlan) -> None:
    """Refuse, before any call, a shape whose largest pack exceeds the backend's request limit."""
    limit = getattr(backend, "max_request_bytes", None)
    if not limit:
        return
    g = backend.geometry
    for k in sorted(plan.shapes, reverse=True):
        largest = sorted((b.span.nbytes for b in blocks), reverse=True)[:k]
        # SPAN + OFFSETS/VALID + (OP 1/2) WEIGHTS for up to every speaker of every window
        estimate = sum(largest) + k * g.windows_per_block * (8 + 4 + 4 + g.speakers * (g.frames_per_window * 4 + 4))
        if estimate > limit:
            per_block = max(1, sum(largest) // max(1, len(largest)))
            raise LaneError(
                f"shape k={k} needs requests of about {estimate / 2**20:.1f} MiB, over the backend's limit of "
                f"{limit / 2**20:.1f} MiB (max_request_bytes; Triton's --http-max-input-size): at most about "
                f"{limit // per_block} blocks per call fit"
            )


def pack_members(block_ids: Sequence[str], shapes: Sequence[int], k: int, block_id: str) -> list[str]:
    """The blocks that shared a call with ``block_id`` at shape k (the runner's grouping)."""
    group = RunPlan(shapes=tuple(shapes), include_exact=False).group_size()
    i = list(block_ids).index(block_id)
    start = (i // group) * group
    members = list(block_ids[start : start + group])
    j = (i - start) // k * k
    return members[j : j + k]


def _voiceprint_call(run: Callable, chunk: list[Block], rows: list[VoiceprintRows], op: Op, geometry: Geometry,
                     collector: OutputCollector) -> None:
    requests = [b.with_voiceprint(op, r.weights, r.idx, r.speakers, geometry) for b, r in zip(chunk, rows, strict=True)]
    if sum(r.rows for r in requests) == 0:
        outs = [_empty(geometry) for _ in requests]  # the engine sends nothing when no speaker is found
    else:
        outs = run(requests)
    for req, row_set, out in zip(requests, rows, outs, strict=True):
        collector.add_voiceprint(op, req.id, row_set, out)


def no_rows(geometry: Geometry) -> VoiceprintRows:
    return VoiceprintRows(np.zeros((0, geometry.frames_per_window), np.float32), np.zeros(0, np.int32),
                          np.zeros(0, np.int32))


def _empty(geometry: Geometry) -> np.ndarray:
    return np.zeros((0, geometry.embedding_dim), dtype=np.float32)


def _chunks(items: list[Block], k: int) -> list[list[Block]]:
    return [items[i : i + k] for i in range(0, len(items), k)]


def _check_ops(blocks: list[Block]) -> None:
    for b in blocks:
        if b.op is not Op.SEGMENTATION:
            raise LaneError(f"block {b.id!r}: corpus blocks must be OP 0 audio blocks, got OP {int(b.op)}")
