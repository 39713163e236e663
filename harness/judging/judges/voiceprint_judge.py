"""The voiceprint judge (OP 1 and OP 2): one embedding per (block, window, speaker) row.

This module holds the judge itself: its tolerance keys (``[tolerances.op1]``/``op2``), its noise-floor
figures and its limits per tolerance mode (the embedding's, and the rates of chained mode). How rows are
matched, judged and attributed to OP 0's flips is its evidence
(:mod:`harness.judging.judges.voiceprint_evidence`, with its row helpers in
:mod:`harness.judging.judges.voiceprint_rows`). Everything OP 1/2 lives in these modules, and a new
voiceprint metric is added in them only: its limit here, its value and its check in the evidence.
"""

from __future__ import annotations

from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits, VoiceprintLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.schemas.files import Floor
from harness.data.tolerances import VoiceprintTolerance
from harness.judging.judges.floor_figures import MAX_ABS, MAX_ULP, FloorFigure, FloorSource, cosine_words, unsaid
from harness.judging.judges.judge_base import limits_for_mode
from harness.judging.judges.voiceprint_evidence import VoiceprintEvidence


class VoiceprintJudge:
    kind = "voiceprint"
    tolerance = VoiceprintTolerance
    # its noise floor: how far apart two runs' embeddings are, element by element and row by row
    floor_figures: tuple[FloorFigure, ...] = (
        MAX_ABS,
        MAX_ULP,
        FloorFigure("min_cosine", "min_cosine_finite", "smaller", cosine_words),
        FloorFigure("max_rel_l2", "max_rel_l2_finite", "larger", unsaid),
    )

    def applies_to(self, op: Op) -> bool:
        return op.is_voiceprint

    def limits(
        self, tol: VoiceprintTolerance, floor: FloorSource | None, sample_bound: bool = True
    ) -> VoiceprintLimits:
        # floor: the golden's noise floor of this OP (its model, or its manifest's JSON: limits_for_mode parses it)
        def made(
            bitwise: bool, max_abs: float, max_ulp: int | None, min_cosine: float, max_rel_l2: float
        ) -> VoiceprintLimits:
            return VoiceprintLimits(
                mode=tol.mode,
                bitwise=bitwise,
                max_abs=max_abs,
                max_ulp=max_ulp,
                min_cosine=min_cosine,
                max_rel_l2=max_rel_l2,
                max_failed_row_rate=tol.max_failed_row_rate if sample_bound else None,
                max_mask_changed_row_rate=tol.max_mask_changed_row_rate,
            )

        def from_floor(f: Floor) -> VoiceprintLimits:
            k = tol.noise_floor_factor
            min_cos = 1.0 if f.min_cosine is None else f.min_cosine
            return made(False, f.max_abs * k, tol.max_ulp, 1.0 - (1.0 - min_cos) * k, (f.max_rel_l2 or 0.0) * k)

        return limits_for_mode(
            tol.mode,
            floor,
            bitwise=lambda: made(True, 0.0, 0, 1.0, 0.0),
            noise_floor=from_floor,
            tolerance=lambda: made(False, tol.max_abs, tol.max_ulp, tol.min_cosine, tol.max_rel_l2),
        )

    def evidence(
        self, op: Op, geometry: Geometry, limits: OpLimits, voiceprint_inputs: VoiceprintInputs
    ) -> VoiceprintEvidence:
        assert isinstance(limits, VoiceprintLimits), type(limits)  # a judge is given its own limits
        return VoiceprintEvidence(op, geometry, limits, voiceprint_inputs)
