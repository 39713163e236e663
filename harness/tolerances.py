"""Tolerances per OP: what "gives the release's answers" means for each network.

Three modes (each OP's ``mode``; ``--tolerance`` sets all three):

- ``bitwise``: every output bit equal (NaN never equal);
- ``tolerance``: absolute limits (defaults from what a batching change does to a healthy model:
  pyannote-audio #2050 measured 2.3e-6 max difference, cosine 0.9999998);
- ``noise-floor``: limits equal to how much the exact lane differs *from itself* (stored with the
  golden), times ``noise_floor_factor``; a golden that reproduced bitwise makes this bitwise.

The keys of each OP are declared by its judge (:mod:`harness.judges`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.data.ops import Op
from harness.judges import SegmentationTolerance, VoiceprintTolerance
from harness.judges.base import TOLERANCE_MODES


class Tolerances(BaseModel):
    """``[tolerances]``: one table per OP."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    op0: SegmentationTolerance = Field(default_factory=SegmentationTolerance)
    op1: VoiceprintTolerance = Field(default_factory=VoiceprintTolerance)
    op2: VoiceprintTolerance = Field(default_factory=VoiceprintTolerance)

    def for_op(self, op: Op) -> SegmentationTolerance | VoiceprintTolerance:
        return (self.op0, self.op1, self.op2)[int(op)]

    def with_mode(self, tolerance_mode: str) -> Tolerances:
        """Every OP judged in ``tolerance_mode`` (each OP's key ``mode``), validated by the judges' own models: an
        unknown mode is refused there (a pydantic ValidationError, a ValueError), as in harness.toml. The command
        line's ``--tolerance`` does not come here: it is merged into the file's tables (harness.config)."""
        tables = self.model_dump()
        return Tolerances.model_validate({op: {**table, "mode": tolerance_mode} for op, table in tables.items()})

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tolerances:
        return cls.model_validate(data)


__all__ = ["TOLERANCE_MODES", "SegmentationTolerance", "Tolerances", "VoiceprintTolerance"]
