"""Schema of ``harness golden diff A B``: two goldens of one corpus, B's exact lane judged against A's.

Another device, driver, torch, numerics profile or model version records another golden of the
same corpus; whether the two agree is the question a release engineer asks before trusting a
promotion made on one of them on the other. The answer carries what differs in the environment
first (the likely cause), then each OP's verdict exactly as a score holds it (the same judges and
checks: ``OpVerdictModel``), so a script reads it with the same code that reads a score.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.data.schemas.base import Count, Frozen, GoldenId, OpKey, Positive, Sha256, Timestamp
from harness.data.schemas.results import OpVerdictModel
from harness.data.tolerances import Tolerances

DiffStatus = Literal["bitwise", "within-tolerance", "differs"]


class GoldenSide(Frozen):
    """One of the two goldens compared, as it was loaded (its manifest checked, its files hashed)."""

    id: GoldenId
    path: str
    manifest_sha256: Sha256
    created: Timestamp
    fingerprint: Annotated[str, Field(min_length=1)] = Field(description="the model's fingerprint")
    model_name: str
    device_kind: str = Field(description="'cpu' or the GPU's name (the key promotions are per)")
    numerics_profile: str = Field(description="the numerics profile the golden was recorded under")


class CorpusRef(Frozen):
    """The corpus both goldens were recorded on (refused unless it is the same file and block list)."""

    sha256: Sha256 = Field(description="sha256 of corpus.parquet, the same in both goldens")
    blocks: Positive


class OpDiff(Frozen):
    """One OP of B against A: ``bitwise`` (every bit equal), ``within-tolerance`` (every check holds),
    ``differs`` (a check failed: the verdict's ``reasons`` are its lines, ``failing`` its worst blocks)."""

    status: DiffStatus
    verdict: OpVerdictModel = Field(description="B's OP judged against A's, as a score's verdict is")


class GoldenDiff(Frozen):
    """``harness golden diff A B --json`` (stdout) / ``--out FILE``: B's exact lane judged against A's."""

    kind: Literal["harness.golden-diff"]  # a type: the file's constant kind (not a key read)
    format: Literal[1]
    a: GoldenSide = Field(description="the reference (its noise floor is the one noise-floor mode reads)")
    b: GoldenSide
    corpus: CorpusRef
    voiceprint_inputs: Literal["chained"] = Field(  # a type: the one value it holds (not a key read)
        description="each golden called its voiceprints with WEIGHTS from its own segmentation: rows re-weighted "
        "by OP 0 flips are judged as in chained mode"
    )
    tolerances: Tolerances = Field(description="the tolerances every OP was judged with (harness.toml's)")
    environment_differences: list[str] = Field(
        description="what differs between A and B (model, device, driver, torch, numeric settings), A -> B"
    )
    ops: dict[OpKey, OpDiff]
    status: DiffStatus = Field(description="the worst of the OPs' statuses")
    differing_ops: Count = Field(description="OPs whose status is 'differs' (exit 1 when any)")

    @model_validator(mode="after")
    def _consistent(self) -> GoldenDiff:
        order = ("bitwise", "within-tolerance", "differs")
        worst = max((order.index(o.status) for o in self.ops.values()), default=0)
        if not self.ops or "0" not in self.ops:
            raise ValueError("ops must hold OP '0'")
        if self.status != order[worst] or self.differing_ops != sum(o.status == "differs" for o in self.ops.values()):
            raise ValueError("status and differing_ops must follow from the OPs' statuses")
        return self
