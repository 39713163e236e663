"""Schemas of what judging writes: the score file and the localisation file."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.data.modes import BY_ALIAS, VOICEPRINT_INPUTS_KEY, VoiceprintInputsField
from harness.data.schemas.arrangements import ScoreEvidence, ShapeArrangements
from harness.data.schemas.backend_facts import BackendFacts
from harness.data.schemas.base import (
    KIND_SPECS,
    Count,
    Frozen,
    GoldenId,
    KindSpec,
    NonNeg,
    OpKey,
    OptionalKeys,
    SafeName,
    Sha256,
    ShapeKey,
    Timestamp,
    Verdict,
)
from harness.data.schemas.files import CorpusSummary, LawsVerdict, ModelInfo, Reproducibility
from harness.data.schemas.host import HostShare
from harness.data.schemas.load import LoadEvidence
from harness.data.schemas.localisation import LocalisedOp
from harness.data.schemas.machine import EnvironmentModel, NumericsRecord
from harness.data.schemas.neighbours import ShapeNeighbours
from harness.data.schemas.refusals import Cause, EvidenceWarning, RefusalCause
from harness.data.schemas.repeats import RepeatEvidence
from harness.data.schemas.verdicts import CheckModel as CheckModel  # the score's, re-exported
from harness.data.schemas.verdicts import OpVerdictModel as OpVerdictModel
from harness.data.shape import ShapeInt
from harness.data.tolerances import Tolerances

STALL_FACTOR = 5.0  # throughput's "stalls": calls over this many times their lane's median time for the same OP


class RequestEvidence(Frozen):
    """How many requests of exactly k real blocks the shape's evidence has (per OP, the minimum over
    OPs): only those count toward promoting k (``harness.evidence.request_evidence``)."""

    full: Count = Field(description="requests of exactly k real blocks")
    full_blocks: Count = Field(description="blocks inside them")
    partial: Count = Field(description="smaller requests (a corpus's last pack; padded ones too): not evidence for k")
    partial_blocks: Count = Field(description="real blocks inside them")
    needed_blocks: Count | None = Field(
        description="blocks in full k-block requests a pass needs (the sample-size "
        "gate's, whole requests, at least one)"
    )


class OpSensitivity(Frozen):
    """What one OP of one shape's night could see: the smallest effects its evidence refuses
    (``harness.judging.sensitivity``)."""

    unit: Literal["audio frames", "rows"]
    units: Count = Field(description="audio frames (OP 0) or voiceprint rows (OP 1/2) judged")
    rate_allowed: NonNeg | None = Field(description="the allowed flip / failed-row rate (None: none in this mode)")
    rate_refused: NonNeg | None = Field(
        description="the smallest true flip / failed-row rate refused with 95 % power at this corpus size (None: "
        "none: not gated, or the corpus too small to bound any)"
    )
    element: str = Field(description="what one unit must differ by to be refused: 'any bit', or the tolerances")
    neighbour_floor: NonNeg | None = Field(
        description="the smallest move beside other neighbours refused as a leak: 0 on a backend that repeated "
        "itself (any bit), else a multiple of its run-to-run difference (None: no neighbour evidence, or unknown)"
    )
    line: str


class ShapeScore(OptionalKeys, Frozen):
    shape: ShapeInt
    verdict: Verdict
    reasons: list[str]
    ops: dict[OpKey, OpVerdictModel]
    requests: RequestEvidence = Field(description="the full k-block requests behind this verdict")
    # a JSON object the sign-off report's renderer copies and reads by key (reports.shape_facts)
    vs_exact: dict[str, Any] | None = Field(
        None, description="this shape against the run's own exact lane (absent from the file when not measured)"
    )
    repeats: RepeatEvidence | None = Field(
        None, description="the shape's own noise over --repeats N runs (harness.data.schemas.repeats; absent: run once)"
    )
    arrangements: ShapeArrangements | None = Field(
        None,
        description="the shape in other arrangements (--arrangements N; harness.data.schemas.arrangements; "
        "absent: its plain arrangement only)",
    )
    neighbours: ShapeNeighbours | None = Field(
        None,
        description="every block at its own slot beside neighbours of other audio (lane k<k>.n; "
        "harness.data.schemas.neighbours; absent: [evidence] neighbours = false)",
    )
    input_differs: dict[OpKey, str] | None = Field(
        None,
        description="per OP, localisation's finding that the failing block's network input already differs packed "
        "vs alone (the layer and block): no numerics (absent: not localised, or not at the input)",
    )
    sensitivity: dict[OpKey, OpSensitivity] | None = Field(
        None, description="per OP, the smallest effects this night's evidence refuses (harness.judging.sensitivity)"
    )
    cause: RefusalCause | None = Field(
        None,
        description="a refused shape's one cause and the evidence that decided "
        "it (harness.data.schemas.refusals; absent: it passed)",
    )
    warnings: list[EvidenceWarning] = Field(
        default_factory=list,
        description="evidence beyond the release's own floor but within the mode's limits: "
        "reported, not refused (absent: none)",
    )
    # each registered kind's own result: its body is the kind's (a team's own evidence), not the harness's
    more_evidence: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="the results of kinds of evidence registered beside the harness's own "
        "(harness.evidence.kind), by kind name (absent: none registered)",
    )

    optional_keys: ClassVar[frozenset[str]] = frozenset(
        {
            "vs_exact",
            "repeats",
            "arrangements",
            "neighbours",
            "input_differs",
            "sensitivity",
            "cause",
            "warnings",
            "more_evidence",
        }
    )

    @model_validator(mode="after")
    def _op0(self) -> ShapeScore:
        if "0" not in self.ops:
            raise ValueError("ops must hold OP '0'")
        return self


class Canary(Frozen):
    """One defect planted through the model and backend, and what the gate made of it: it must be refused with
    its expected cause, or the night fails (the gate did not see it)."""

    name: Literal["leak", "rebasing", "exchange", "shift"]
    planted: str = Field(description="what was planted, where, in words")
    ops: list[Literal[0, 1, 2]] = Field(description="the OPs it was sent and judged at")
    blocks: list[str] = Field(description="the blocks of its request, in slot order")
    expected: Cause = Field(description="the cause the gate must refuse it with")
    shape: ShapeScore = Field(description="its judged request as a shape's score: verdicts, evidence, its cause")
    seen: bool = Field(description="refused with the expected cause")

    @model_validator(mode="after")
    def _seen(self) -> Canary:
        cause = self.shape.cause
        if self.seen != (cause is not None and cause.kind == self.expected):
            raise ValueError("seen disagrees with its cause")
        return self


class CanaryRun(Frozen):
    """``score.canaries``: the defects planted tonight ([evidence] canaries) and whether each was refused."""

    planted: bool = Field(description="canaries were planted ([evidence] canaries, and a model and backend to send)")
    why: str | None = Field(description="why none were planted (None: they were)")
    k: ShapeInt | None = Field(description="the smallest packed shape, where they were planted")
    calls: Count = Field(description="network calls the canaries made")
    seconds: NonNeg = Field(description="those calls' time on the device")
    network_seconds: NonNeg | None = Field(description="the run's own network time, for the ratio")
    canaries: list[Canary]
    seen: bool = Field(description="every canary refused with its expected cause")

    @model_validator(mode="after")
    def _all_seen(self) -> CanaryRun:
        if self.seen != all(c.seen for c in self.canaries):
            raise ValueError("seen disagrees with its canaries")
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


def reproduction_phrase(verification: Reproduction | None) -> str:
    """How the golden's reproduction reads in a last line and a JUnit case."""
    if verification is None:
        return "golden reproduction not checked"
    if verification.status == "bitwise":
        return "golden reproduced bitwise"
    if verification.status == "within-noise-floor":
        return "golden reproduced within its noise floor"
    return verification.summary


class RunRef(Frozen):
    id: SafeName
    path: str
    manifest_sha256: Sha256
    created: Timestamp


class GoldenRef(Frozen):
    id: GoldenId
    path: str
    manifest_sha256: Sha256


Figure = int | float | None  # a timing figure as the lane's summary wrote it (int stays int: the pages print it)


class _TimingView(BaseModel):
    """A read view of a lane's timing summary (``harness.throughput.timing``): the figures the pages and the
    ledger show, typed; a figure the summary does not hold reads None, and keys no reader shows are ignored
    (the score keeps the summary as it was written)."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class OpTiming(_TimingView):
    """One OP's calls in one lane."""

    calls: Figure = None
    p50_ms: Figure = None
    p99_ms: Figure = None
    mean_request_mb: Figure = None
    peak_device_mb: Figure = None
    blocks_per_s: Figure = None
    stalls: Figure = None
    wall_s: Figure = None


class LaneTiming(_TimingView):
    """One lane's timing ("exact", or a shape's k) and its speed-up over the exact lane."""

    blocks: Figure = None
    blocks_per_s: Figure = None
    speedup: Figure = None
    speedup_interval: list[int | float] | None = None
    speedup_basis: str | None = None
    within_noise: bool | None = None
    repetitions: Figure = None
    stalls: Figure = None
    peak_device_mb: Figure = None
    ops: dict[str, OpTiming] = {}


class Score(OptionalKeys, Frozen):
    """``score.json``: every OP of every shape judged, bound to the run and golden it judged."""

    kind: Literal["harness.score"]  # a type: the file's constant kind (not a key read)
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
    voiceprint_inputs: VoiceprintInputsField = Field(alias="mode", description=VOICEPRINT_INPUTS_KEY)
    pad_to_fixed: bool
    # the Packer protocol's describe(): a free-form mapping, each packer's own keys
    packer: dict[str, Any] = Field(description="the packer's describe(), copied from the run (the packer's own keys)")
    laws: LawsVerdict = Field(description="the run's packing-laws verdict of its packer (copied from the run)")
    corpus: CorpusSummary
    reproducibility: Reproducibility
    tolerances: Tolerances = Field(description="the tolerances every verdict was judged with (harness.toml's)")
    shapes: dict[ShapeKey, ShapeScore]
    verification: Reproduction
    # per lane key: made by harness.throughput (LaneTiming, OpTiming, Speedup), read by key by the report's renderer
    throughput: dict[str, Any] = Field(description="per lane ('exact', a shape's key): its timing and speed-up")
    exact_timing_source: str
    verdict: Verdict
    load: LoadEvidence | None = Field(
        None, description="the nightly's concurrency sweep on a Triton backend ([load]; absent when not swept)"
    )
    evidence: ScoreEvidence | None = Field(
        None, description="arrangements, repeats and seed of the run (absent: 1 and 1, today's evidence)"
    )
    host: HostShare | None = Field(
        None,
        description="the lanes' wall: network calls vs the harness's own work "
        "(absent: a run before it was recorded, or merged shards)",
    )
    backend: BackendFacts | None = Field(
        None,
        description="what ran the requests: in-process, or a Triton server "
        "with its URL and transport (absent: a score before it)",
    )
    canaries: CanaryRun | None = Field(
        None,
        description="defects planted through the model and backend, each to be refused (absent: a score before it)",
    )
    evidence_kinds: list[KindSpec] | None = Field(
        None, description=KIND_SPECS + "; promotion loads them to re-derive their evidence"
    )
    digest: Sha256 = Field(description="sha256 of this file's canonical JSON without this key")

    model_config = BY_ALIAS
    optional_keys: ClassVar[frozenset[str]] = frozenset(
        {"load", "evidence", "host", "backend", "canaries", "evidence_kinds"}
    )

    def lane_timings(self) -> dict[str, LaneTiming]:
        """``throughput`` read as typed lanes (the file keeps each lane's summary as written)."""
        return {lane: LaneTiming.model_validate(t) for lane, t in self.throughput.items()}


class LocalisationFile(Frozen):
    """``localisation.json``: first diverging layers of failing shapes, and where their error grows past each
    module's noise floor (best effort, after the verdict)."""

    kind: Literal["harness.localisation"]  # a type: the file's constant kind (not a key read)
    format: Literal[1]
    score_digest: Sha256
    shapes: dict[ShapeKey, dict[OpKey, LocalisedOp]]
