"""The voiceprint judge (OP 1 and OP 2): one embedding per (block, window, speaker) row.

This module holds the judge itself: its tolerance keys (``[tolerances.op1]``/``op2``), its noise-floor
figures and its limits per tolerance mode (the embedding's, and the rates of chained mode). How rows are
matched, judged and attributed to OP 0's flips is its evidence
(:mod:`harness.judging.judges.voiceprint_evidence`, with its row helpers in
:mod:`harness.judging.judges.voiceprint_rows`). Everything OP 1/2 lives in these modules, and a new
voiceprint metric is added in them only: its limit here, its value and its check in the evidence.
"""

from __future__ import annotations

from typing import Any

from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits, VoiceprintLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.tolerances import VoiceprintTolerance
from harness.judging.judges.floor_figures import MAX_ABS, MAX_ULP, FloorFigure, cosine_words, unsaid
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
        self, tol: VoiceprintTolerance, floor: dict[str, Any] | None, sample_bound: bool = True
    ) -> VoiceprintLimits:
        shared = {
            "max_failed_row_rate": tol.max_failed_row_rate if sample_bound else None,
            "max_mask_changed_row_rate": tol.max_mask_changed_row_rate,
        }

        def from_floor(f: dict[str, Any]) -> dict[str, Any]:
            k = tol.noise_floor_factor
            min_cos = f.get("min_cosine")
            return {
                "bitwise": False,
                "max_abs": float(f["max_abs"]) * k,
                "max_ulp": tol.max_ulp,
                "min_cosine": 1.0 - (1.0 - (1.0 if min_cos is None else float(min_cos))) * k,
                "max_rel_l2": float(f.get("max_rel_l2") or 0.0) * k,
                **shared,
            }

        return VoiceprintLimits.model_validate(
            limits_for_mode(
                tol.mode,
                floor,
                bitwise=lambda: {
                    "bitwise": True,
                    "max_abs": 0.0,
                    "max_ulp": 0,
                    "min_cosine": 1.0,
                    "max_rel_l2": 0.0,
                    **shared,
                },
                noise_floor=from_floor,
                tolerance=lambda: {
                    "bitwise": False,
                    "max_abs": tol.max_abs,
                    "max_ulp": tol.max_ulp,
                    "min_cosine": tol.min_cosine,
                    "max_rel_l2": tol.max_rel_l2,
                    **shared,
                },
            )
        )

    def evidence(
        self, op: Op, geometry: Geometry, limits: OpLimits, voiceprint_inputs: VoiceprintInputs
    ) -> VoiceprintEvidence:
        assert isinstance(limits, VoiceprintLimits), type(limits)  # a judge is given its own limits
        return VoiceprintEvidence(op, geometry, limits, voiceprint_inputs)
