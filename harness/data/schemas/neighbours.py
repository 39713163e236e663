"""Schema of the neighbour evidence: a block's answer at its own slot beside neighbours of other audio.

The run's lane ``k4.n`` (``lanes.running.neighbour_lane``) answers every block at its slot of its plain request, in a
request of the plain request's geometry whose other blocks carry other audio. Per OP, scoring compares
each block's answer there with its plain lane's, bit for bit (:class:`NeighbourOp`): an honest network on a
deterministic backend answers it identically, so a moved answer is a leak whatever its size, unless the
backend does not reproduce itself. That is measured by control repeats the run makes itself (the plain
requests concerned, and their neighbour requests, sent once more exactly as before: :class:`ControlFigures`,
the run manifest's ``neighbour_controls``) and by the shape's repeats (``--repeats``). The outcome is
re-derived by promotion from these figures alone (``harness.evidence.neighbour_evidence``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.data.schemas.base import Count, Frozen, NonNeg
from harness.data.schemas.verdicts import OpVerdictModel

Outcome = Literal["bitwise", "leak", "inconclusive"]


class ControlFigures(Frozen):
    """The control repeats of one shape and OP: requests whose blocks moved beside other neighbours, sent again
    exactly as before, and how their answers compared with the first time."""

    plain_sent: Count = Field(description="plain requests sent once more exactly as the plain lane sent them")
    plain_reproduced: Count = Field(description="of them, answered bitwise as the first time (every block)")
    neighbour_sent: Count = Field(description="neighbour requests sent once more")
    neighbour_reproduced: Count = Field(description="of them, answered bitwise as the first time (answered blocks)")
    units: Count = Field(description="windows (OP 0) or voiceprint rows (OP 1/2) compared again")
    units_differing: Count = Field(description="those whose bits differ from the first time")
    max_abs: NonNeg | None = Field(description="largest |again - first| (None: a non-finite value)")
    max_ulp: Count = Field(description="largest ULP distance between the two sends")

    @model_validator(mode="after")
    def _counts(self) -> ControlFigures:
        if self.plain_reproduced > self.plain_sent or self.neighbour_reproduced > self.neighbour_sent:
            raise ValueError("more requests reproduced than sent")
        if self.units_differing > self.units:
            raise ValueError("more units differing than compared")
        return self

    @property
    def sent(self) -> int:
        return self.plain_sent + self.neighbour_sent

    @property
    def reproduced(self) -> bool:
        """Every request sent again was answered bitwise as the first time."""
        return self.plain_reproduced == self.plain_sent and self.neighbour_reproduced == self.neighbour_sent

    @staticmethod
    def merged(parts: list[ControlFigures]) -> ControlFigures:
        """Several shards' controls of one shape and OP as one: counts summed, figures the worst."""
        worst = [p.max_abs for p in parts]
        return ControlFigures(
            plain_sent=sum(p.plain_sent for p in parts),
            plain_reproduced=sum(p.plain_reproduced for p in parts),
            neighbour_sent=sum(p.neighbour_sent for p in parts),
            neighbour_reproduced=sum(p.neighbour_reproduced for p in parts),
            units=sum(p.units for p in parts),
            units_differing=sum(p.units_differing for p in parts),
            max_abs=None if any(w is None for w in worst) else max([0.0, *(w for w in worst if w is not None)]),
            max_ulp=max([0, *(p.max_ulp for p in parts)]),
        )


class MovedBlock(Frozen):
    """The first block (corpus order) whose answer moved beside other neighbours."""

    block: str
    slot: str | None = Field(description="its slot in its request (as the plain lane sent it; None: not placed)")
    neighbours: list[str] = Field(description="the blocks whose audio was replaced around it, with their slots")
    units: Count = Field(description="its windows (OP 0) or rows (OP 1/2)")
    units_moved: Count
    max_abs: NonNeg | None = Field(description="None: a non-finite value")
    max_ulp: Count


class NeighbourOp(Frozen):
    """One OP of one shape: every block's answer at its slot beside other neighbours, against its plain answer."""

    blocks: Count = Field(description="blocks compared")
    blocks_moved: Count = Field(description="blocks whose answer differs in any bit")
    units: Count = Field(description="windows (OP 0) or voiceprint rows (OP 1/2) compared")
    units_moved: Count
    max_abs: NonNeg | None = Field(description="largest |beside other neighbours - plain| (None: non-finite)")
    max_ulp: Count
    first: MovedBlock | None = Field(description="the first block that moved (None: none)")
    controls: ControlFigures | None = Field(description="the control repeats of this shape and OP (None: none sent)")
    repeats_bitwise: bool | None = Field(
        description="the shape's repeats (--repeats) reproduced bitwise at this OP (None: no repeats)"
    )
    reference_noise: NonNeg | None = Field(
        None,
        description="the run-to-run difference at this OP measured elsewhere: by any shape's control repeats of "
        "the run (a canary: by its shape's evidence); None: none measured",
    )
    run_reproduced: bool | None = Field(
        None,
        description="every control repeat of the run answered bitwise alike (a canary: its shape's); None: none sent",
    )
    noise_max_abs: NonNeg | None = Field(
        description="the run-to-run difference of the same request: the largest of the controls' and the repeats' "
        "(0: reproduced bitwise; None: not measured, or non-finite)"
    )
    beyond_noise: Count = Field(description="blocks that moved more than the run-to-run difference allows")
    outcome: Outcome = Field(
        description="bitwise: the neighbours' audio moved nothing; leak: it moved an answer on a backend that "
        "reproduces itself, or beyond its run-to-run difference; inconclusive: within that difference"
    )
    line: str = Field(description="what the evidence found, in one line")
    verdict: OpVerdictModel = Field(
        description="the windows or rows that moved (== 0; gated unless inconclusive): a failure is a leak"
    )
    run_to_run: OpVerdictModel | None = Field(
        description="inconclusive: the run-to-run difference of the same request judged with the limits of the "
        "OP's mode (a failure: not reproducible); None otherwise"
    )

    @model_validator(mode="after")
    def _counts(self) -> NeighbourOp:
        if self.blocks_moved > self.blocks or self.units_moved > self.units:
            raise ValueError("more moved than compared")
        if (self.blocks_moved == 0) != (self.outcome == "bitwise"):
            raise ValueError("outcome 'bitwise' exactly when no block moved")
        return self


class ShapeNeighbours(Frozen):
    """``shapes[k].neighbours`` of score.json: the neighbour evidence of one shape, per OP."""

    lane: str = Field(description="the neighbour lane, e.g. 'k4.n'")
    ops: dict[Literal["0", "1", "2"], NeighbourOp]
    leak: bool = Field(description="some OP's answers moved with the neighbours' audio: the shape is refused")

    @model_validator(mode="after")
    def _leak(self) -> ShapeNeighbours:
        if self.leak != any(v.outcome == "leak" for v in self.ops.values()):
            raise ValueError("leak disagrees with its OPs")
        return self
