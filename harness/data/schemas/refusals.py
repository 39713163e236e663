"""Schema of why a shape was refused, and of what its evidence reported without refusing it.

A refused shape carries one **cause** from a closed list (:data:`CAUSES`), first wherever its refusal is
shown (the summary line, the report, JUnit, ``score.json``'s ``shapes[k].cause``), with the evidence line
that decided it. The cause is re-derived from the score's own figures by promotion
(``harness.evidence.refusal``), so an edited cause is refused like an edited verdict.

A comparison that differs more than the release's own noise floor but holds the limits of the mode the
user chose (a few ULPs between two slots in ``tolerance`` mode) is not a refusal: it is an
:class:`EvidenceWarning`, one per (shape, OP, kind of evidence), in ``shapes[k].warnings``.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field

from harness.data.modes import ToleranceModeField
from harness.data.schemas.base import Count, Frozen, NonNeg

LAWS: Final = "packer broke the laws"
GOLDEN: Final = "golden not reproduced"
LEAK: Final = "reads another block's audio"
NON_FINITE: Final = "non-finite"
NOT_REPRODUCIBLE: Final = "not reproducible"
DEPENDS: Final = "depends on slot / neighbours / duplicates"
NUMERICS: Final = "numerics at this batch shape beyond the tolerances"
SIZE: Final = "not judged at its size"
# most fundamental first: when several checks fail, the first of these that applies is the cause
CAUSES: Final = (LAWS, GOLDEN, LEAK, NON_FINITE, NOT_REPRODUCIBLE, DEPENDS, NUMERICS, SIZE)
Cause = Literal[
    "packer broke the laws",
    "golden not reproduced",
    "reads another block's audio",
    "non-finite",
    "not reproducible",
    "depends on slot / neighbours / duplicates",
    "numerics at this batch shape beyond the tolerances",
    "not judged at its size",
]
# the harness's own words; a kind registered beside them (harness.evidence.kind_registry) warns under its own name,
# so the key is open here and closed where warnings are re-derived: promotion refuses a warning no kind gives
BUILT_IN_WARNINGS: Final = ("slots", "duplicates", "repeats", "neighbours", "golden")
EvidenceKind = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")]


class RefusalCause(Frozen):
    """``shapes[k].cause``: the one cause of a refused shape, and the evidence line that decided it."""

    kind: Cause = Field(description="one of the closed list, most fundamental first: " + "; ".join(CAUSES))
    evidence: str = Field(description="the line that decided it (observed vs allowed, how many, where)")

    def text(self, k: int | str) -> str:
        """'refused (depends on slot / neighbours / duplicates): <evidence>', the evidence without its shape and
        without the cause said twice (a request-size line starts with it)."""
        evidence = self.evidence.removeprefix(f"{self.kind}: ")
        if not evidence.startswith(f"k={k} is "):  # 'k=4 is not accurate under load' keeps its subject
            evidence = evidence.removeprefix(f"k={k} ")
        return f"refused ({self.kind}): {evidence}"

    def line(self, k: int | str) -> str:
        """'k=4 refused (depends on slot / neighbours / duplicates): <evidence>'."""
        return f"k={k} {self.text(k)}"


class EvidenceWarning(Frozen):
    """One kind of evidence of one OP of one shape: beyond the release's floor, within the mode's limits.

    Reported (the summary's ``warning:`` lines, JUnit, the report), not refused; ``[history]
    fail_on_warning`` turns it into a failed nightly."""

    kind: EvidenceKind = Field(
        description="slots (a shuffled arrangement against the plain lane), duplicates (a "
        "block's two copies in one request), repeats (a run against the first), neighbours (a block at its slot "
        "beside other audio: the leak test inconclusive within the backend's run-to-run difference), golden (the "
        "plain lane against the golden), or a registered kind's own name (harness.evidence.kind_registry)"
    )
    op: Literal[0, 1, 2]
    tolerance_mode: ToleranceModeField
    unit: Literal["windows", "rows"]
    blocks: Count = Field(description="blocks compared")
    blocks_differing: Count = Field(description="blocks whose answers differ in any bit")
    units: Count = Field(description="windows (OP 0) or voiceprint rows (OP 1/2) compared")
    units_differing: Count = Field(description="those that differ in any bit (or are on one side only)")
    max_abs: NonNeg = Field(description="largest |difference| between the two sides")
    max_ulp: Count = Field(description="largest ULP distance between the two sides")
    where: str | None = Field(description="the worst block and the slot(s) it sat in (None: not placed)")
    release_floor: str = Field(description="the release's own floor for this OP, in words ('bitwise', or figures)")
    line: str = Field(description="the warning as the summary prints it (after 'warning: ')")
