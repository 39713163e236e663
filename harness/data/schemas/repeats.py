"""Schema of a packed lane's own noise (``--repeats N``): ``ShapeScore.repeats`` in score.json.

A shape's plain lane (``k4``) is run N times in the same run (``k4``, ``k4.r2`` .. ``k4.rN``), each
repeat interleaved with the exact lane like the first. How much the repeats differ from the first
run is measured with the golden's own noise-floor measure (``harness.judging.reproduction.noise_floor``:
the same judges, the same figures), so it sits beside the release's floor and reads "as
reproducible as the release" or not. In every tolerance mode every repeat is also judged against
the first run by that OP's judge, with the limits the mode gives against the golden (``pairs``): a
failed check refuses the shape, and promotion re-derives those checks
(``harness.evidence.repeat_evidence.repeats_hold``). An OP that holds those limits but is less reproducible
than the release gets a warning line instead.

Its verdicts are :mod:`harness.data.schemas.verdicts`'s ``OpVerdictModel`` (declared apart, so that this
module, imported first or after :mod:`harness.data.schemas.results`, which holds it, is complete either way).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from harness.data.modes import ToleranceModeField
from harness.data.schemas.base import Count, Frozen, OpKey
from harness.data.schemas.files import Floor
from harness.data.schemas.verdicts import OpVerdictModel


class RepeatOp(Frozen):
    """One OP of one shape: how often and how much its packed lane disagrees with itself."""

    op: Literal[0, 1, 2]
    tolerance_mode: ToleranceModeField = Field(
        description="the OP's tolerance mode, whose limits every repeat is judged with"
    )
    gated: bool = Field(description="a repeat that fails its checks (pairs) refuses the shape: true in every mode")
    blocks: Count = Field(description="blocks compared between the runs")
    blocks_differing: Count = Field(
        description="blocks whose outputs differ (any bit) between some repeat and the first run"
    )
    first_differing_block: str | None = Field(description="the first of them in corpus order (None: none)")
    unit: Literal["windows", "rows"]
    units: Count = Field(description="windows (OP 0) or voiceprint rows (OP 1/2) of the first run")
    units_differing: Count = Field(description="those that differ (any bit, or missing) in some repeat")
    noise: Floor = Field(
        description="the golden floor's figures, over every repeat against the first run "
        "(worst of the repeats; flips summed)"
    )
    release_floor: Floor | None = Field(description="the golden's own floor for this OP (the exact lane twice)")
    as_reproducible_as_release: bool = Field(
        description="noise within the release's floor: bitwise where the "
        "release is, else every figure within the floor's"
    )
    pairs: list[OpVerdictModel] = Field(
        description="each repeat judged against the first run (shape 'k4.r2'), in the OP's mode"
    )


class RepeatEvidence(Frozen):
    """Every OP of one shape over its N runs (``--repeats N``, N >= 2)."""

    repeats: Annotated[int, Field(ge=2)] = Field(description="runs of the shape's plain lane, the first included")
    lanes: list[str] = Field(description="the lanes compared: the plain lane first, then its repeats")
    ops: dict[OpKey, RepeatOp]
    reproducible: bool = Field(description="every OP bitwise across every repeat")
    warnings: list[str] = Field(
        description="OPs within their mode's limits but less reproducible than the release: flagged, not refused"
    )
