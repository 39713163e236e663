"""One judge per output kind; everything OP-specific about a verdict lives in its judge's module."""

from harness.data.ops import Op
from harness.judges.base import Check, Judge, OpVerdict
from harness.judges.segmentation import SegmentationJudge, SegmentationTolerance
from harness.judges.voiceprint import VoiceprintJudge, VoiceprintTolerance

JUDGES: tuple[Judge, ...] = (SegmentationJudge(), VoiceprintJudge())


def judge_for(op: Op) -> Judge:
    return next(j for j in JUDGES if j.applies_to(op))


__all__ = ["JUDGES", "Check", "Judge", "OpVerdict", "SegmentationJudge", "SegmentationTolerance", "VoiceprintJudge",
           "VoiceprintTolerance", "judge_for"]
