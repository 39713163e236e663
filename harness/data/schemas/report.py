"""``report.json``'s schema: the facts the sign-off report's pages are rendered from.

A tool (a CI dashboard, a release checklist) reads report.json and trusts that a person saw the
same numbers in report.html, so its top level is declared here and published as a JSON Schema
with the other files. The nested tables (per shape, per lane, the ledger's rows) are the report's
own rendering data: their keys are listed in docs/report.md and kept open here, so that a new
column in a table is not a new file format.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from harness.data.schemas.base import Strict, Timestamp, Verdict
from harness.data.schemas.files import LawsVerdict


class Decision(Strict):
    """What the engine may use now: the release's shape and every promoted one, and the rest."""

    usable: list[int] = Field(description="shapes the engine may use (k=1, the release's own, always)")
    not_usable: list[int] = Field(description="shapes it may not use")
    release_shapes_note: str
    golden_ok: bool = Field(description="the golden was reproduced here")
    ledger_given: bool = Field(description="a ledger was read (states are the ledger's, not this run's alone)")


class SignoffReport(Strict):
    """``report.json``: the sign-off report's facts (the HTML and Markdown pages are rendered from them)."""

    kind: Literal["harness.signoff"]
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
    model: dict[str, Any]
    device_kind: str
    numerics_profile: str
    environment: dict[str, Any]
    backend: dict[str, str] | None = Field(
        None,
        description="what ran the requests, as the report's rows: "
        "in-process, or a Triton server's URL, transport, shared memory, requests "
        "in flight (score.backend; None for a score before it)",
    )
    numerics: dict[str, Any] = Field(description="the numeric settings in force")
    mode: Literal["isolated", "chained"] = Field(description="the lanes' voiceprint inputs")
    pad_to_fixed: bool
    packer: str = Field(description="the fast lane's packer by name")
    laws: LawsVerdict
    corpus: dict[str, Any]
    tolerances: dict[str, Any]
    reproducibility: dict[str, Any]
    golden_checks: list[dict[str, Any]] = Field(description="the golden's reproduction checks (passed, summary)")
    shapes: dict[str, dict[str, Any]] = Field(
        description="per shape: verdict, usable, why, cause, warnings, OPs' checks, timing"
    )
    warnings: list[dict[str, Any]] = Field(
        description="every shape's evidence warnings (score.shapes[k].warnings, "
        "each with its shape): beyond the release's own floor, within "
        "the mode's limits"
    )
    throughput: list[dict[str, Any]] = Field(description="per lane: timing and speed-up")
    exact_lane: dict[str, Any] | None
    exact_timing_source: str
    host: dict[str, Any] | None = Field(
        None,
        description="the lanes' wall: network calls vs the harness's own work "
        "(score.host; None when the run did not record it)",
    )
    timing_line: str = Field("", description="what a lane's timing measures, and the harness's share beside it")
    transitions: list[dict[str, Any]] | None = Field(description="what this night's promotion changed")
    ledger: list[dict[str, Any]] | None = Field(description="the ledger's rows for this model and device")
    overrides: list[dict[str, Any]] = Field(description="judging settings that differ from the release's")
    overrides_line: str | None
    no_promote_line: str | None
    engine: dict[str, Any] | None = Field(
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
    margins: dict[str, Any] | None = Field(None, description="the margins over nights (only with a ledger's history)")
    load: dict[str, Any] | None = Field(
        None, description="the concurrency sweep's points and budget (only when the score holds one: score.load)"
    )
    repeats: dict[str, Any] | None = Field(
        None, description="each shape's own noise over --repeats N runs (reports.repeat_section; only with repeats)"
    )
    arrangements: dict[str, Any] | None = Field(
        None,
        description="every shape in other arrangements: spread, "
        "slots, reasons (reports.arrangement_section; only with "
        "--arrangements N >= 2)",
    )
    module_errors: dict[str, Any] | None = Field(
        None,
        description="per failing (shape, OP): error / noise floor per "
        "module (reports.module_error_section; only when localised)",
    )
    evidence_sections: list[dict[str, Any]] | None = Field(
        None,
        description="sections rendered by the generic template, each {kind, title, columns, rows, lines}: every "
        "kind of evidence without a section of its own (the neighbours, a registered kind), the canaries and "
        "what this night could see (reports.evidence_sections)",
    )
