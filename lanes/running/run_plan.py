"""A run's plan: which lanes run over the corpus and how, checked when it is made.

The exact lane (and its repeats), the packed shapes and their variants (:mod:`lanes.running.variants`), the OPs,
whose WEIGHTS/IDX the voiceprint requests get (``voiceprint_inputs``), the warm-up and the pipeline; and
what follows from them: the group of blocks every lane runs at a time, the lanes' names, the number of
network calls. :func:`lanes.running.runner.run_lanes` runs it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.base.errors import LaneError
from harness.data.masks import MaskPolicy
from harness.data.modes import VOICEPRINT_INPUTS, VoiceprintInputs
from harness.data.ops import ALL_OPS, Op
from harness.data.shape import EXACT, Shape, ShapeError, lane_name
from lanes.backends.backend_api import Backend
from lanes.running.variants import FastVariant, check_variants

_MAX_GROUP = 256


@dataclass(frozen=True)
class RunPlan:
    shapes: tuple[Shape, ...] = ()  # every one a Shape (a number given is made one)
    release_shapes: Mapping[Op, tuple[int, ...]] = field(default_factory=lambda: {op: (1,) for op in ALL_OPS})
    voiceprint_inputs: VoiceprintInputs = VoiceprintInputs.ISOLATED
    pad_to_fixed: bool = False
    include_exact: bool = True
    exact_repeats: int = 1
    ops: tuple[Op, ...] = ALL_OPS
    mask_policy: MaskPolicy = MaskPolicy()
    warmup: bool = True  # one untimed call per lane, shape and OP first (lazy init, cuDNN autotuning)
    warmup_packed: bool = True  # the packed shapes' too (False: the exact lane's only: lanes.running.warm_up)
    variants: tuple[
        FastVariant, ...
    ] = ()  # more lanes at a plain shape (lanes.running.variants): after the plain shapes
    pipeline: bool = True  # the next request prepared while the device runs this one (lanes.running.device_queue)

    def __post_init__(self) -> None:
        if self.voiceprint_inputs not in VOICEPRINT_INPUTS:
            raise LaneError(
                f"unknown voiceprint inputs {self.voiceprint_inputs!r}: expected one of {VOICEPRINT_INPUTS}"
            )
        object.__setattr__(self, "voiceprint_inputs", VoiceprintInputs(self.voiceprint_inputs))  # a word given
        try:
            shapes = tuple(Shape(k, "packed shape") for k in self.shapes)  # the range is Shape's (harness.data.shape)
        except ShapeError as exc:
            raise LaneError(f"{exc} (the plan's shapes: {list(self.shapes)})") from None
        object.__setattr__(self, "shapes", shapes)
        if not self.include_exact and not self.shapes:
            raise LaneError("nothing to run: no exact lane and no packed shapes")
        if self.exact_repeats < 1:
            raise LaneError("exact_repeats must be >= 1")
        if Op.SEGMENTATION not in self.ops:
            raise LaneError("OP 0 must run: the voiceprint requests are derived from it")
        check_variants(self.variants, self.shapes)

    def group_size(self) -> int:
        if not self.shapes:
            return 16
        size = math.lcm(*self.shapes)
        return size if size <= _MAX_GROUP else max(self.shapes)

    def lanes(self) -> list[str]:
        names = [lane_name(EXACT, r) for r in range(self.exact_repeats if self.include_exact else 0)]
        return names + [lane_name(k) for k in self.shapes] + [name for v in self.variants for name in v.lanes]

    def calls(self, blocks: int) -> int:
        """Network calls this plan makes over ``blocks`` blocks (for progress bars)."""
        total, g = 0, self.group_size()
        for start in range(0, blocks, g):
            n = min(g, blocks - start)
            per_op = (n * self.exact_repeats if self.include_exact else 0) + sum(math.ceil(n / k) for k in self.shapes)
            per_op += sum(v.request_count(n) for v in self.variants)  # a packed arrangement's, the neighbours' two
            total += per_op * len(self.ops)
        return total


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
