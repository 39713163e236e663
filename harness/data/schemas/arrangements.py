"""Schema of a shape's arrangements (``--arrangements N``): ``ShapeScore.arrangements`` in score.json.

Besides its plain lane (``k4``: consecutive chunks), a shape k >= 2 is run in N - 1 more arrangements of
the same blocks (``lanes.running.arrangers``): shuffled ones (``k4.a1`` ..: other neighbours, other slots) and
the duplicates (``k4.d`` + ``k4.d2``: every block twice in one request). Each arrangement lane is
judged against the golden exactly like the plain lane (``ops``), and against the plain lane itself
(``same_as_plain``: a block's answer must not depend on its slot or neighbours, judged on OP 0); the
two copies of the duplicates are judged against each other, every OP (``duplicates``). Every one of
these is judged with the limits of the OP's tolerance mode (``harness.evidence.rule``). Any failed check
refuses the shape, and promotion re-derives every one of them (``harness.evidence.arrangement_evidence``).
``slots`` says, per OP, how the blocks that sat in each slot (over every arrangement, the plain one
included) differ from the golden, so the report can name the worst slot.

Its verdicts are :mod:`harness.data.schemas.verdicts`'s ``OpVerdictModel`` (declared apart, so that this
module, imported first or after :mod:`harness.data.schemas.results`, which holds it, is complete either way).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.data.schemas.base import Count, Frozen, Number, OpKey, Positive
from harness.data.schemas.verdicts import OpVerdictModel

SlotKey = Annotated[str, Field(pattern=r"^(0|[1-9][0-9]{0,5}|pad)$")]
PAD = "pad"  # the slot of the last real block of a request holding fewer than k blocks


def slot_label(slot: str, k: int) -> str:
    """``"3"`` at k=4 -> ``"3 (last)"``; ``"0"`` -> ``"0 (first)"``; ``"pad"`` -> ``"next to padding"``."""
    if slot == PAD:
        return "next to padding"
    s = int(slot)
    return f"{s} (first)" if s == 0 else f"{s} (last)" if s == k - 1 else f"{s} (middle)"


class SlotFigures(Frozen):
    """The blocks that sat in one slot of a request (over every arrangement), against the golden."""

    placements: Count = Field(description="(block, arrangement) placements in this slot")
    units: Count = Field(description="windows (OP 0) or voiceprint rows (OP 1/2) they hold")
    differing: Count = Field(description="those whose bits differ from the golden's (or that the golden lacks)")
    max_abs: Number | None = Field(description="largest |lane - golden| (None: a non-finite value)")
    max_ulp: Count = Field(description="largest ULP distance (finite values)")
    worst_block: str | None = Field(description="the block of max_abs (None: none differs)")


class Spread(Frozen):
    """One figure of one OP across the shape's arrangements: the plain lane and every arrangement lane."""

    metric: str
    values: dict[str, Number | None] = Field(description="lane -> the figure against the golden (None: non-finite)")
    min: Number | None
    max: Number | None


class ArrangementLane(Frozen):
    """One arrangement lane of a shape: against the golden, and against the shape's plain lane."""

    lane: str
    arrangement: Positive = Field(description="its number: 1 .. N-1 (0 is the plain lane)")
    kind: Literal["shuffled", "duplicate"]
    passed: bool = Field(description="every check of ops and same_as_plain holds")
    ops: dict[OpKey, OpVerdictModel] = Field(description="against the golden, with the score's tolerances")
    same_as_plain: dict[OpKey, OpVerdictModel] = Field(
        description="a shuffled lane's OP 0 against the plain lane's (the same blocks in other slots, in requests of "
        "the same size), with the limits of its tolerance mode; empty for the duplicates"
    )
    blocks_differing_from_plain: dict[OpKey, Count] = Field(
        description="blocks whose answer differs in any bit from the plain lane's (OP 1/2: reported, not gated: a "
        "voiceprint request changes shape with its neighbours' rows)"
    )

    @model_validator(mode="after")
    def _passed(self) -> ArrangementLane:
        if self.passed != all(v.passed for v in [*self.ops.values(), *self.same_as_plain.values()]):
            raise ValueError("passed disagrees with its OPs")
        return self


class ShapeArrangements(Frozen):
    """Every arrangement of one shape (``--arrangements N``, N >= 2)."""

    arrangements: Annotated[int, Field(ge=2)] = Field(description="N: the plain arrangement included")
    seed: Count = Field(description="the shuffles' seed ([evidence] seed)")
    plain: str = Field(description="the plain lane (arrangement 0), e.g. 'k4'")
    lanes: dict[str, ArrangementLane]
    duplicates: dict[OpKey, OpVerdictModel] | None = Field(
        description="the duplicates' second copy against the first (same request), with the limits of its tolerance "
        "mode"
    )
    spread: dict[OpKey, list[Spread]] = Field(description="per OP, figures across the arrangements")
    slots: dict[OpKey, dict[SlotKey, SlotFigures]] = Field(
        description="per OP, per slot (0 .. k-1; 'pad': the last real block of a request short of k)"
    )
    worst_slot: dict[OpKey, SlotKey | None] = Field(
        description="per OP, the slot of the largest max_abs (None: no slot differs from the golden)"
    )
    passed: bool
    reasons: list[str] = Field(description="why the arrangements refuse the shape (empty: they do not)")

    @model_validator(mode="after")
    def _passed(self) -> ShapeArrangements:
        ok = all(lane.passed for lane in self.lanes.values()) and all(
            v.passed for v in (self.duplicates or {}).values()
        )
        if self.passed != ok:
            raise ValueError("passed disagrees with its lanes and duplicates")
        if self.passed == bool(self.reasons):
            raise ValueError("reasons are given exactly when the arrangements refuse the shape")
        return self


class ScoreEvidence(Frozen):
    """``Score.evidence``: how much evidence the run gathered per shape (the run manifest's ``evidence``)."""

    arrangements: Positive = Field(description="arrangements per shape, the plain one included (1: today's)")
    repeats: Positive = Field(description="runs of every packed lane (1: once)")
    seed: Count = Field(description="the arrangements' seed")
