"""Tolerances per OP: what "gives the release's answers" means for each network.

Three modes (each OP's ``mode``; ``--tolerance`` sets all three):

- ``bitwise``: every output bit equal (NaN never equal);
- ``tolerance``: absolute limits (defaults from what a batching change does to a healthy model:
  pyannote-audio #2050 measured 2.3e-6 max difference, cosine 0.9999998);
- ``noise-floor``: limits equal to how much the exact lane differs *from itself* (stored with the
  golden), times ``noise_floor_factor``; a golden that reproduced bitwise makes this bitwise.

The keys of each OP are its judge's (:mod:`harness.judging.judges`), declared here, in the data layer, because
every file that records a verdict holds them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from harness.data.modes import ToleranceMode, ToleranceModeField
from harness.data.ops import Op

Finite = Annotated[float, Field(allow_inf_nan=False, ge=0)]
Rate = Annotated[float, Field(allow_inf_nan=False, ge=0, le=1)]


class SegmentationTolerance(BaseModel):
    """``[tolerances.op0]``: limits for the segmentation log-probabilities and their decisions."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    mode: ToleranceModeField = Field(
        default=ToleranceMode.TOLERANCE,
        description="bitwise | tolerance | noise-floor (limits = the golden's own noise x factor)",
    )
    max_abs: Finite = Field(default=1e-4, description="largest absolute difference of a log-probability")
    max_ulp: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="largest ULP distance; reported always, gated only if set"
    )
    max_confident_flips: Annotated[int, Field(ge=0)] = Field(
        default=0, description="frames whose class may change although the golden's top-two margin >= near_tie_margin"
    )
    near_tie_margin: Finite = Field(
        default=0.1, description="nats between the golden's top two classes below which a flip is a near tie"
    )
    max_flip_rate: Annotated[float, Field(allow_inf_nan=False, ge=0, le=1)] = Field(
        default=1e-3, description="95 % upper bound of flipped frames / audio frames (3/n with no flip)"
    )
    noise_floor_factor: Annotated[float, Field(allow_inf_nan=False, ge=1)] = Field(
        default=1.0, description="noise-floor mode: limits = the golden's own noise x this"
    )


class VoiceprintTolerance(BaseModel):
    """``[tolerances.op1]`` / ``[tolerances.op2]``: limits for one embedding per row."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    mode: ToleranceModeField = Field(
        default=ToleranceMode.TOLERANCE,
        description="bitwise | tolerance | noise-floor (limits = the golden's own noise x factor)",
    )
    min_cosine: Annotated[float, Field(allow_inf_nan=False, ge=-1, le=1)] = Field(
        default=0.99999, description="smallest cosine similarity of a row's embedding with the golden's"
    )
    max_abs: Finite = Field(default=1e-4, description="largest absolute difference of an embedding element")
    max_rel_l2: Finite = Field(default=1e-3, description="largest ||run - golden|| / ||golden|| of a row")
    max_ulp: Annotated[int, Field(ge=0)] | None = Field(
        default=None, description="largest ULP distance; gated only if set"
    )
    max_failed_row_rate: Rate = Field(
        default=0.05, description="95 % upper bound of rows out of tolerance (a sample-size gate: 3/n with none)"
    )
    max_mask_changed_row_rate: Rate = Field(
        default=0.05,
        description="chained mode: 95 % upper bound of rows whose WEIGHTS changed through near-tie OP 0 flips",
    )
    noise_floor_factor: Annotated[float, Field(allow_inf_nan=False, ge=1)] = Field(
        default=1.0, description="noise-floor mode: limits = the golden's own noise x this"
    )


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
        line's ``--tolerance`` does not come here: it is merged into the file's tables (harness.release_config)."""
        tables = self.model_dump()
        return Tolerances.model_validate({op: {**table, "mode": tolerance_mode} for op, table in tables.items()})


__all__ = ["SegmentationTolerance", "Tolerances", "VoiceprintTolerance"]
