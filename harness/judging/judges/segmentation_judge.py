"""The segmentation judge (OP 0): per-window, per-frame class log-probabilities.

This module holds the judge itself: its tolerance keys (``[tolerances.op0]``), its noise-floor figures
and its limits per tolerance mode. What it measures and checks, batch by batch, is its evidence
(:mod:`harness.judging.judges.segmentation_evidence`). Everything OP 0 lives in these two modules, and a
new OP 0 metric is added in them only: its limit here, its value and its check in the evidence.
"""

from __future__ import annotations

from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits, SegmentationLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.tolerances import SegmentationTolerance
from harness.judging.judges.floor_figures import MAX_ABS, MAX_ULP, FloorFigure, FloorSource, flips_words
from harness.judging.judges.judge_base import limits_for_mode
from harness.judging.judges.segmentation_evidence import SegmentationEvidence


class SegmentationJudge:
    kind = "segmentation"
    tolerance = SegmentationTolerance
    # its noise floor: how far apart two runs' log-probabilities are, and how many frames change class
    floor_figures: tuple[FloorFigure, ...] = (
        MAX_ABS,
        MAX_ULP,
        FloorFigure("argmax_flips", "flips", "count", flips_words),
    )

    def applies_to(self, op: Op) -> bool:
        return op is Op.SEGMENTATION

    def limits(
        self, tol: SegmentationTolerance, floor: FloorSource | None, sample_bound: bool = True
    ) -> SegmentationLimits:
        # floor: the golden's noise floor of OP 0 (its model, or its manifest's JSON: limits_for_mode parses it)
        def made(bitwise: bool, max_abs: float, max_ulp: int | None, max_confident_flips: int) -> SegmentationLimits:
            return SegmentationLimits(
                mode=tol.mode,
                bitwise=bitwise,
                max_abs=max_abs,
                max_ulp=max_ulp,
                max_confident_flips=max_confident_flips,
                near_tie_margin=tol.near_tie_margin,
                max_flip_rate=tol.max_flip_rate if sample_bound else None,
            )

        return limits_for_mode(
            tol.mode,
            floor,
            bitwise=lambda: made(True, 0.0, 0, 0),
            noise_floor=lambda f: made(False, f.max_abs * tol.noise_floor_factor, tol.max_ulp, tol.max_confident_flips),
            tolerance=lambda: made(False, tol.max_abs, tol.max_ulp, tol.max_confident_flips),
        )

    def evidence(
        self, op: Op, geometry: Geometry, limits: OpLimits, voiceprint_inputs: VoiceprintInputs
    ) -> SegmentationEvidence:
        assert isinstance(limits, SegmentationLimits), type(limits)  # a judge is given its own limits
        return SegmentationEvidence(geometry, limits)
