"""One judge per output kind; everything OP-specific about a verdict lives in its judge's module."""

from typing import TYPE_CHECKING, Any

from harness.data.ops import Op
from harness.judges.base import Judge
from harness.judges.segmentation import SegmentationJudge, SegmentationTolerance
from harness.judges.voiceprint import VoiceprintJudge, VoiceprintTolerance

JUDGES: tuple[Judge, ...] = (SegmentationJudge(), VoiceprintJudge())


if TYPE_CHECKING:
    from harness.judges.base import Check, OpVerdict


def __getattr__(name: str) -> Any:
    """``Check`` and ``OpVerdict``, bound on first use (see harness.judges.base: an import cycle otherwise)."""
    if name in ("Check", "OpVerdict"):
        from harness.judges import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def judge_for(op: Op) -> Judge:
    return next(j for j in JUDGES if j.applies_to(op))


__all__ = ["JUDGES", "Check", "Judge", "OpVerdict", "SegmentationJudge", "SegmentationTolerance", "VoiceprintJudge",
           "VoiceprintTolerance", "judge_for"]
