"""``report.json``'s schema: the facts the sign-off report's pages are rendered from.

A tool (a CI dashboard, a release checklist) reads report.json and trusts that a person saw the
same numbers in report.html, so its top level is declared here and published as a JSON Schema
with the other files. The nested tables (per shape, per lane, the ledger's rows) are the report's
own rendering data: their keys are listed in docs/report.md and typed here, and each table stays
open (:class:`Open`: other keys kept), so that a new column in a table is not a new file format. A
table copied from the score is declared by the score's own model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.data.schemas.base import Count, Number, Open, OpKey, Strict, Timestamp, Verdict
from harness.data.schemas.files import CorpusSummary, Floor, LawsVerdict, ModelInfo
from harness.data.schemas.host import HostShare
from harness.data.schemas.machine import EnvironmentModel, InForce
from harness.data.schemas.records import Override
from harness.data.schemas.refusals import EvidenceWarning, RefusalCause
from harness.data.schemas.report_sections import ArrangementFacts, LoadFacts, MarginFacts, ModuleErrorFacts, RepeatFacts
from harness.data.schemas.results import RequestEvidence
from harness.data.schemas.verdicts import CheckModel
from harness.data.tolerances import Tolerances


class Decision(Strict):
    """What the engine may use now: the release's shape and every promoted one, and the rest."""

    usable: list[int] = Field(description="shapes the engine may use (k=1, the release's own, always)")
    not_usable: list[int] = Field(description="shapes it may not use")
    release_shapes_note: str
    golden_ok: bool = Field(description="the golden was reproduced here")
    ledger_given: bool = Field(description="a ledger was read (states are the ledger's, not this run's alone)")


class GoldenCheckOp(Open):
    """One OP of a golden check: its figures as the pages show them and its failed checks."""

    bitwise: bool | None = Field(description="every output identical (None: not recorded)")
    max_abs: Number | str | None = Field(
        description="the largest |difference|, or 'non-finite (N of M ...)' (never a finite-only figure)"
    )
    max_ulp: Number | str | None
    min_cosine: Number | str | None
    failed: list[CheckModel] = Field(description="the failed checks, as the score holds them")


class GoldenCheck(Open):
    """A reproduction of the golden: the run's interleaved exact lane, or a separate verification."""

    source: str = Field(description="which reproduction: the run's own exact lane, or a separate re-run")
    status: str = Field(description="bitwise, within-noise-floor, failed or drift")
    passed: bool
    summary: str
    golden_id: str
    environment_differences: list[str]
    fingerprint_matches: bool
    ops: dict[OpKey, GoldenCheckOp]


class ReportReproducibility(Open):
    """The golden's own reproducibility: bitwise over its repeats, and each OP's noise floor."""

    bitwise: bool
    repeats: Count
    ops: dict[OpKey, Floor]


class ShapeWarning(EvidenceWarning):
    """An evidence warning with the shape it is about."""

    shape: int


class OpFacts(Open):
    """One OP of one shape as the pages show it: its verdict, checks and what to do next."""

    op: int
    passed: bool
    verdict: str
    reasons: list[str]


class ShapeFacts(Open):
    """One shape's row: its verdict, whether the engine may use it and why, its timing and its OPs."""

    shape: int
    scored: bool = Field(description="judged in this run (false: only in the ledger)")
    verdict: str = Field(description="pass, fail or not scored")
    reasons: list[str]
    cause: RefusalCause | None = Field(description="a refused shape's one cause (None: it passed or was not scored)")
    warnings: list[ShapeWarning]
    usable: bool = Field(description="the engine may use it")
    why: str = Field(description="why it may or may not be used")
    ledger_state: str | None = Field(description="its state in the ledger (None: no ledger entry)")
    requests: RequestEvidence | None = Field(description="the full k-block requests behind it (None: not scored)")
    ops: dict[OpKey, OpFacts]


class LaneOpTiming(Open):
    """One OP of one lane's timing."""

    calls: Count | None
    p50_ms: Number | None
    p99_ms: Number | None
    mean_request_mb: Number | None
    peak_device_mb: Number | None
    blocks_per_s: Number | None
    stalls: Count | None


class LaneRow(Open):
    """One lane's timing and speed-up against the exact lane (the exact lane's own: 1)."""

    lane: str = Field(description="the shape's key, or 'exact'")
    k: int = Field(description="its shape (the exact lane: 1)")
    verdict: str = Field(description="the shape's verdict, 'exact' or 'not scored'")
    blocks: Count | None
    blocks_per_s: Number | None
    speedup: Number | None
    speedup_interval: list[Number] | None
    within_noise: bool | None
    repetitions: Count | None
    stalls: Count | None
    peak_device_mb: Number | None
    ops: dict[OpKey, LaneOpTiming]


class TransitionRow(Open):
    """A state change this night's promotion made (harness.ledger.promotion.Transition)."""

    shape: int
    packer: str
    from_: str = Field(alias="from", description="the state before")
    to: str = Field(description="the state after")
    run_id: str
    passed: bool
    reasons: list[str]


class LedgerRow(Open):
    """One shape's ledger entry as the pages show it."""

    shape: int
    state: str
    revoked_by: str | None
    promoted_by: str | None = Field(description="the run of its last pass (None: never passed)")
    promoted_at: str | None
    last_run: str
    last_at: str
    last_verdict: str
    runs: Count
    last_reasons: list[str]


class EngineFacts(Open):
    """The manifest the engine reads and what it allows here."""

    manifest: str = Field(description="its path")
    exists: bool
    allows: dict[OpKey, list[int]] | None = Field(
        description="k per OP for this model, device, numerics profile and packer (None: nothing for them)"
    )


class EvidenceSection(Strict):
    """A section rendered by the generic template: a title, a table and lines."""

    kind: str = Field(description="the kind of evidence it shows")
    title: str
    columns: list[str]
    rows: list[list[str]]
    lines: list[str]


class SignoffReport(Strict):
    """``report.json``: the sign-off report's facts (the HTML and Markdown pages are rendered from them)."""

    kind: Literal["harness.signoff"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[2]
    generated: Timestamp
    title: str
    release: str
    verdict: Verdict
    headline: str | None = Field(description="None, or why no shape may be used (the golden not reproduced)")
    decision: Decision
    run_id: str
    score_created: Timestamp
    golden_id: str
    fingerprint: str
    model: ModelInfo
    device_kind: str
    numerics_profile: str
    environment: EnvironmentModel
    backend: dict[str, str] | None = Field(
        None,
        description="what ran the requests, as the report's rows: "
        "in-process, or a Triton server's URL, transport, shared memory, requests "
        "in flight (score.backend; None for a score before it)",
    )
    numerics: InForce = Field(description="the numeric settings in force")
    mode: Literal["isolated", "chained"] = Field(description="the lanes' voiceprint inputs")
    pad_to_fixed: bool
    packer: str = Field(description="the fast lane's packer by name")
    laws: LawsVerdict
    corpus: CorpusSummary
    tolerances: Tolerances
    reproducibility: ReportReproducibility
    golden_checks: list[GoldenCheck] = Field(description="the golden's reproduction checks (passed, summary)")
    shapes: dict[str, ShapeFacts] = Field(
        description="per shape: verdict, usable, why, cause, warnings, OPs' checks, timing"
    )
    warnings: list[ShapeWarning] = Field(
        description="every shape's evidence warnings (score.shapes[k].warnings, "
        "each with its shape): beyond the release's own floor, within "
        "the mode's limits"
    )
    throughput: list[LaneRow] = Field(description="per lane: timing and speed-up")
    exact_lane: LaneRow | None
    exact_timing_source: str
    host: HostShare | None = Field(
        None,
        description="the lanes' wall: network calls vs the harness's own work "
        "(score.host; None when the run did not record it)",
    )
    timing_line: str = Field("", description="what a lane's timing measures, and the harness's share beside it")
    transitions: list[TransitionRow] | None = Field(description="what this night's promotion changed")
    ledger: list[LedgerRow] | None = Field(description="the ledger's rows for this model and device")
    overrides: list[Override] = Field(description="judging settings that differ from the release's")
    overrides_line: str | None
    no_promote_line: str | None
    engine: EngineFacts | None = Field(
        None,
        description="the manifest the engine reads (promoted-shapes.json): "
        "manifest (its path), exists, allows (k per OP for this model, device, "
        "numerics profile and packer; None: nothing for them); None: not known "
        "to the report",
    )
    engine_line: str = Field(
        "",
        description="the sentence naming that file and what it allows here (for a night "
        "that did not promote: that it was not changed)",
    )
    margins: MarginFacts | None = Field(None, description="the margins over nights (only with a ledger's history)")
    load: LoadFacts | None = Field(
        None, description="the concurrency sweep's points and budget (only when the score holds one: score.load)"
    )
    repeats: RepeatFacts | None = Field(
        None, description="each shape's own noise over --repeats N runs (reports.repeat_section; only with repeats)"
    )
    arrangements: ArrangementFacts | None = Field(
        None,
        description="every shape in other arrangements: spread, "
        "slots, reasons (reports.arrangement_section; only with "
        "--arrangements N >= 2)",
    )
    module_errors: ModuleErrorFacts | None = Field(
        None,
        description="per failing (shape, OP): error / noise floor per "
        "module (reports.module_error_section; only when localised)",
    )
    evidence_sections: list[EvidenceSection] | None = Field(
        None,
        description="sections rendered by the generic template, each {kind, title, columns, rows, lines}: every "
        "kind of evidence without a section of its own (the neighbours, a registered kind), the canaries and "
        "what this night could see (reports.evidence_sections)",
    )
