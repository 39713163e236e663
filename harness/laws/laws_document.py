"""A :class:`~harness.laws.laws_report.LawsReport` as the typed document ``harness laws --json`` writes
(:class:`harness.data.schemas.laws_file.LawsReportFile`), the same facts and lines as the text: what the
JUnit file and a CI read."""

from __future__ import annotations

from typing import Any

from harness import __version__
from harness.data.schemas.laws_file import (
    LawBlock,
    LawCounterexample,
    LawFinding,
    LawRequest,
    LawResult,
    LawsPacker,
    LawsReportFile,
)
from harness.laws.law_display import block_dict, request_dict
from harness.laws.laws_report import Counterexample, LawOutcome, LawsReport, findings


def report_document(report: LawsReport, created: str) -> LawsReportFile:
    """The report as its document, stamped ``created`` (an ISO 8601 time)."""
    found = findings(report.outcomes)
    finding_of = {law: i for i, f in enumerate(found) for law in f.laws}
    return LawsReportFile(
        kind="harness.laws-report",
        format=1,
        created=created,
        harness_version=__version__,
        packer=LawsPacker(name=str(report.described.shown_name), identity=report.identity, describe=report.packer),
        examples=report.examples,
        seed=report.seed,
        max_blocks=report.max_blocks,
        verdict=report.verdict,  # type: ignore[arg-type]  # (one of the three: LawsReport.verdict)
        seconds=round(report.seconds, 3),
        laws=[_result(o, finding_of.get(o.law)) for o in report.outcomes],
        findings=[
            LawFinding(
                laws=list(f.laws),
                shown=f.shown.law,
                malformed_answer=f.counterexample.answer_error is not None,
                difference=f.counterexample.difference,
                text=f.render(),
            )
            for f in found
        ],
        summary=report.summary(),
    )


def _result(o: LawOutcome, finding: int | None) -> LawResult:
    return LawResult(
        law=o.law,
        statement=o.statement,
        status=o.status,  # type: ignore[arg-type]  # (HELD, BROKEN or NOT_JUDGED: the literal's values)
        tried=o.tried,
        broken_on=o.broken_on,
        judged=o.judged,
        skipped=o.skipped,
        boundary=o.boundary,
        seconds=round(o.seconds, 3),
        notes=list(o.notes),
        counterexample=None if o.counterexample is None else _counterexample(o.counterexample),
        finding=finding,
        line=o.brief(),
    )


def _counterexample(c: Counterexample) -> LawCounterexample:
    # the report's JSON form of the request and the blocks, read back into their models
    packed = None if c.packed is None else LawRequest.model_validate(request_dict(c.packed))
    return LawCounterexample(
        blocks=[LawBlock.model_validate({"idx": None, **block_dict(b)}) for b in c.blocks],
        params={k: _int(v) for k, v in c.params.items()},
        what=c.what,
        answer_error=c.answer_error,
        found_after=max(1, c.found_after),
        reproducible=c.reproducible,
        source=c.source,  # type: ignore[arg-type]  # ("boundary" or "search": the runner's two sources)
        packed=packed,
        line=c.line(),
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
