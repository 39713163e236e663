"""Schemas of what judging writes: the score file and the localisation file."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.data.schemas.base import (
    Count,
    GoldenId,
    Number,
    OpKey,
    Positive,
    SafeName,
    Sha256,
    ShapeKey,
    Strict,
    Timestamp,
    Verdict,
)
from harness.data.schemas.files import (
    CorpusSummary,
    EnvironmentModel,
    LawsVerdict,
    ModelInfo,
    NumericsRecord,
    Reproducibility,
)
from harness.tolerances import Tolerances


class CheckModel(Strict):
    op: Literal[0, 1, 2]
    metric: Annotated[str, Field(min_length=1)]
    observed: bool | int | Number | None = Field(description="None: non-finite")
    relation: Literal["<=", ">=", "==", "report"]
    allowed: bool | int | Number | None = Field(description="None: reported, not gated")
    ok: bool | None
    unit: str
    offending: Count | None
    total: Count | None
    where: str | None
    note: str
    hint: str
    limit: str = Field(description="the limits key `allowed` came from; empty: a fixed 0")

    @model_validator(mode="after")
    def _gated(self) -> CheckModel:
        if (self.relation == "report") != (self.allowed is None) or (self.relation == "report") != (self.ok is None):
            raise ValueError("a reported check has neither allowed nor ok; a gated one has both")
        return self


class OpVerdictModel(Strict):
    op: Literal[0, 1, 2]
    shape: int | str
    passed: bool
    reasons: list[str]
    checks: list[CheckModel]
    metrics: dict[str, Any]
    limits: dict[str, Any]
    failing: list[dict[str, Any]]
    distribution: list[Number | None]


class RequestEvidence(Strict):
    """How many requests of exactly k real blocks the shape's evidence has (per OP, the minimum over
    OPs): only those count toward promoting k (``harness.request_evidence``)."""

    full: Count = Field(description="requests of exactly k real blocks")
    full_blocks: Count = Field(description="blocks inside them")
    partial: Count = Field(description="smaller requests (a corpus's last pack; padded ones too): not evidence for k")
    partial_blocks: Count = Field(description="real blocks inside them")
    needed_blocks: Count | None = Field(description="blocks in full k-block requests a pass needs (the sample-size "
                                                    "gate's, whole requests, at least one)")


class ShapeScore(Strict):
    shape: Positive
    verdict: Verdict
    reasons: list[str]
    ops: dict[OpKey, OpVerdictModel]
    requests: RequestEvidence = Field(description="the full k-block requests behind this verdict")
    vs_exact: dict[str, Any] | None = Field(None, description="this shape against the run's own exact lane")

    @model_validator(mode="after")
    def _op0(self) -> ShapeScore:
        if "0" not in self.ops:
            raise ValueError("ops must hold OP '0'")
        return self


class Reproduction(Strict):
    """The run's interleaved exact lane against the golden (or a separate verification)."""

    golden_id: GoldenId
    status: Literal["bitwise", "within-noise-floor", "failed", "drift"]
    passed: bool
    bitwise: bool
    same_setup: bool
    fingerprint_matches: bool
    golden_reproducible: bool
    environment_differences: list[str]
    ops: dict[OpKey, OpVerdictModel]
    summary: str


class RunRef(Strict):
    id: SafeName
    path: str
    manifest_sha256: Sha256
    created: Timestamp


class GoldenRef(Strict):
    id: GoldenId
    path: str
    manifest_sha256: Sha256


class Score(Strict):
    """``score.json``: every OP of every shape judged, bound to the run and golden it judged."""

    kind: Literal["harness.score"]
    format: Literal[2]
    created: Timestamp
    release: SafeName
    golden: GoldenRef
    run: RunRef
    fingerprint: Annotated[str, Field(min_length=1)]
    model: ModelInfo
    device_kind: str
    numerics_profile: str
    numerics: NumericsRecord
    environment: EnvironmentModel
    mode: Literal["isolated", "chained"]
    pad_to_fixed: bool
    packer: dict[str, Any]
    laws: LawsVerdict = Field(description="the run's packing-laws verdict of its packer (copied from the run)")
    corpus: CorpusSummary
    reproducibility: Reproducibility
    tolerances: Tolerances = Field(description="the tolerances every verdict was judged with (harness.toml's)")
    shapes: dict[ShapeKey, ShapeScore]
    verification: Reproduction
    throughput: dict[str, Any]
    exact_timing_source: str
    verdict: Verdict
    digest: Sha256 = Field(description="sha256 of this file's canonical JSON without this key")


class LocalisationFile(Strict):
    """``localisation.json``: first diverging layers of failing shapes (best effort, after the verdict)."""

    kind: Literal["harness.localisation"]
    format: Literal[1]
    score_digest: Sha256
    shapes: dict[ShapeKey, dict[OpKey, dict[str, Any]]]

