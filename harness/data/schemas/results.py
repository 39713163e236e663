"""Schemas of what judging writes: the score file and the localisation file."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from harness.data.figures import NEGATION, NOT_GATED, fmt, holds, non_finite_text, percent, plain_number
from harness.data.jsonio import plain
from harness.data.schemas.base import (
    Count,
    Frozen,
    GoldenId,
    Number,
    OpKey,
    OptionalKeys,
    Positive,
    SafeName,
    Sha256,
    ShapeKey,
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
from harness.data.schemas.host import HostShare
from harness.data.schemas.load import LoadEvidence
from harness.data.schemas.localisation import LocalisedOp
from harness.tolerances import Tolerances


class CheckModel(Frozen):
    """One metric of one OP against its limit, as the score file holds it and as the judges build it
    (``harness.judges.base.Check`` is this class). The gate produces them; the CLI lines, the sign-off
    report's tables and the JUnit file all render the same rows (:meth:`line`), and promotion
    re-derives every ``ok`` from ``observed``, ``relation`` and ``allowed`` before it trusts a verdict.
    A check whose ``allowed`` is ``None`` is reported, not gated."""

    op: Literal[0, 1, 2]
    metric: Annotated[str, Field(min_length=1)]
    observed: bool | int | Number | None = Field(description="None: non-finite")
    relation: Literal["<=", ">=", "==", "report"]
    allowed: bool | int | Number | None = Field(description="None: reported, not gated")
    ok: bool | None
    unit: str
    offending: Count | None
    total: Count | None
    where: str | None = Field(description="where to look: \"worst block 'b7' window 3\", \"first block ...\"")
    note: str
    hint: str
    limit: str = Field(description="the limits key `allowed` came from; empty: a fixed 0")

    @model_validator(mode="after")
    def _gated(self) -> CheckModel:
        if (self.relation == "report") != (self.allowed is None) or (self.relation == "report") != (self.ok is None):
            raise ValueError("a reported check has neither allowed nor ok; a gated one has both")
        return self

    @classmethod
    def gate(cls, op: int, metric: str, observed: Any, relation: str, allowed: Any, *, unit: str = "",
             offending: int | None = None, total: int | None = None, where: str | None = None, note: str = "",
             hint: str = "", limit: str = "") -> CheckModel:
        """A gated check (``allowed`` given) or a reported one (``allowed`` None); numpy scalars become
        Python numbers and non-finite observations None (files hold no such numbers)."""
        seen = plain_number(observed)
        counts = {"offending": plain_number(offending), "total": plain_number(total)}
        common: dict[str, Any] = {"op": op, "metric": metric, "observed": seen, "unit": unit, "where": where,
                                  "note": note, "hint": hint, "limit": limit, **counts}
        if allowed is None:
            return cls(**common, relation=NOT_GATED, allowed=None, ok=None)
        return cls(**common, **{"relation": relation, "allowed": plain_number(allowed),
                                "ok": holds(seen, relation, allowed)})

    @property
    def failed(self) -> bool:
        return self.ok is False

    def line(self) -> str:
        """One line: 'OP 0 max_abs: 0.505 > 0.0001 allowed, 3 of 4 096 windows (0.07 %), worst block 'b7'...'"""
        if self.observed is None and self.offending and self.total:
            # a figure over non-finite values (figure_check): says so, never a number that looks in range
            head = f"OP {self.op} {self.metric}: {non_finite_text(self.offending, self.total, self.unit)}"
            text = (f"{head} (reported, not gated)" if self.relation == NOT_GATED
                    else f"{head}, {self.relation} {fmt(self.allowed)} allowed")
        else:
            head = f"OP {self.op} {self.metric}: {fmt(self.observed)}"
            if self.relation == NOT_GATED:
                text = f"{head} (reported, not gated)"
            else:
                rel = self.relation if self.ok else NEGATION[self.relation]
                text = f"{head} {rel} {fmt(self.allowed)} allowed"
            if self.offending and self.total:
                text += f", {self.offending:,} of {self.total:,} {self.unit} ({percent(self.offending, self.total)})"
            elif self.offending:
                text += f", {self.offending:,} {self.unit}"
        if self.where:
            text += f", {self.where}"
        if self.note:
            text += f"; {self.note}"
        return text


class OpVerdictModel(Frozen):
    """Every check of one OP at one shape (or of the exact lane's reproduction); the judges build it
    with :meth:`of` (``harness.judges.base.OpVerdict`` is this class). ``passed`` and ``reasons``
    follow from the checks when it is built; a file's are kept as written (promotion re-derives them,
    ``harness.score_check``)."""

    op: Literal[0, 1, 2]
    shape: int | str
    passed: bool
    reasons: list[str]
    checks: list[CheckModel]
    metrics: dict[str, Any]
    limits: dict[str, Any]
    failing: list[dict[str, Any]] = Field(description="worst offenders, for the report")
    distribution: list[Number | None] = Field(description="a sample of per-unit max |diff| for the plot")

    @classmethod
    def of(cls, op: int, shape: int | str, checks: list[CheckModel], metrics: dict[str, Any],
           limits: dict[str, Any], failing: list[dict[str, Any]] | None = None,
           distribution: list[float | None] | None = None) -> OpVerdictModel:
        """A verdict from a judge's checks: passed and reasons derived; the free-form parts (metrics,
        limits, failing, distribution) made JSON-plain (numpy scalars as Python numbers, as the file
        holds them)."""
        return cls.model_validate({"op": op, "shape": shape, "passed": not any(c.failed for c in checks),
                                   "reasons": [c.line() for c in checks if c.failed], "checks": list(checks),
                                   "metrics": plain(metrics), "limits": plain(limits), "failing": plain(failing or []),
                                   "distribution": plain(distribution or [])})


class RequestEvidence(Frozen):
    """How many requests of exactly k real blocks the shape's evidence has (per OP, the minimum over
    OPs): only those count toward promoting k (``harness.request_evidence``)."""

    full: Count = Field(description="requests of exactly k real blocks")
    full_blocks: Count = Field(description="blocks inside them")
    partial: Count = Field(description="smaller requests (a corpus's last pack; padded ones too): not evidence for k")
    partial_blocks: Count = Field(description="real blocks inside them")
    needed_blocks: Count | None = Field(description="blocks in full k-block requests a pass needs (the sample-size "
                                                    "gate's, whole requests, at least one)")


class ShapeScore(OptionalKeys, Frozen):
    shape: Positive
    verdict: Verdict
    reasons: list[str]
    ops: dict[OpKey, OpVerdictModel]
    requests: RequestEvidence = Field(description="the full k-block requests behind this verdict")
    vs_exact: dict[str, Any] | None = Field(None, description="this shape against the run's own exact lane "
                                                              "(absent from the file when not measured)")
    repeats: RepeatEvidence | None = Field(None, description="the shape's own noise over --repeats N runs "
                                                             "(harness.data.schemas.repeats; absent: run once)")
    arrangements: ShapeArrangements | None = Field(
        None, description="the shape in other arrangements (--arrangements N; harness.data.schemas.arrangements; "
        "absent: its plain arrangement only)")

    optional_keys: ClassVar[frozenset[str]] = frozenset({"vs_exact", "repeats", "arrangements"})

    @model_validator(mode="after")
    def _op0(self) -> ShapeScore:
        if "0" not in self.ops:
            raise ValueError("ops must hold OP '0'")
        return self


class Reproduction(Frozen):
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


class RunRef(Frozen):
    id: SafeName
    path: str
    manifest_sha256: Sha256
    created: Timestamp


class GoldenRef(Frozen):
    id: GoldenId
    path: str
    manifest_sha256: Sha256


class Score(OptionalKeys, Frozen):
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
    mode: Literal["isolated", "chained"]  # the run's voiceprint inputs (voiceprint_inputs in code); file key "mode"
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
    load: LoadEvidence | None = Field(None, description="the nightly's concurrency sweep on a Triton backend "
                                                        "([load]; absent when not swept)")
    evidence: ScoreEvidence | None = Field(None, description="arrangements, repeats and seed of the run "
                                                             "(absent: 1 and 1, today's evidence)")
    host: HostShare | None = Field(None, description="the lanes' wall: network calls vs the harness's own work "
                                                     "(absent: a run before it was recorded, or merged shards)")
    digest: Sha256 = Field(description="sha256 of this file's canonical JSON without this key")

    optional_keys: ClassVar[frozenset[str]] = frozenset({"load", "evidence", "host"})


class LocalisationFile(Frozen):
    """``localisation.json``: first diverging layers of failing shapes, and where their error grows past each
    module's noise floor (best effort, after the verdict)."""

    kind: Literal["harness.localisation"]
    format: Literal[1]
    score_digest: Sha256
    shapes: dict[ShapeKey, dict[OpKey, LocalisedOp]]


# a shape's repeats and arrangements hold OpVerdictModel (declared above): imported last, then the models that
# hold them completed
from harness.data.schemas.arrangements import ScoreEvidence, ShapeArrangements  # noqa: E402
from harness.data.schemas.repeats import RepeatEvidence  # noqa: E402

ShapeScore.model_rebuild()
Score.model_rebuild()
