"""One judge per output kind; everything OP-specific about a verdict lives in its judge's modules
(``<kind>_judge``: tolerance, limits, noise-floor figures; ``<kind>_evidence``: figures and checks)."""

from harness.data.ops import Op
from harness.data.tolerances import SegmentationTolerance, VoiceprintTolerance
from harness.judging.judges.judge_base import Check, Judge, OpVerdict
from harness.judging.judges.segmentation_judge import SegmentationJudge
from harness.judging.judges.voiceprint_judge import VoiceprintJudge

JUDGES: tuple[Judge, ...] = (SegmentationJudge(), VoiceprintJudge())


def judge_for(op: Op) -> Judge:
    return next(j for j in JUDGES if j.applies_to(op))


__all__ = [
    "JUDGES",
    "Check",
    "Judge",
    "OpVerdict",
    "SegmentationJudge",
    "SegmentationTolerance",
    "VoiceprintJudge",
    "VoiceprintTolerance",
    "judge_for",
]
