"""``harness audit CAPTURE``: judge what the engine really sent and really got back in production.

The command's pipeline face; the file it writes is declared in :mod:`harness.data.schemas.audit`.

Two passes over the capture (:mod:`harness.capture`), each row group by row group:

1. **The laws** on every captured request as it stands (:mod:`harness.capture.capture_laws`). A request
   that breaks one is the engine's packing being wrong: the audit stops there, *before any model
   is loaded or called*, and fails (exit 1) naming the request, the block and the law.
2. **The exact lane and the gate**: every captured block, split out by the request's layout, is
   re-run alone at the release shape (one block per call: :class:`lanes.running.lanes.ExactLane`) on the
   golden model, and the served outputs of that block (the capture's output, unpacked by the
   same layout) are scored against it per OP, batch by batch, by the same judges and tolerances
   as a packed shape (:mod:`harness.judging.judges`): the served side is the "lane", the re-run the
   "golden". A capture served by another model (its fingerprint) is named first, and still scored.

Writes ``audit.json`` (sealed; :class:`harness.capture.result.AuditFile`, the outcome's ``result``),
``junit.xml`` and the report's "production audit" section (``report.html``, ``report.md``), as one set
published in one step (:mod:`harness.base.outputset`): an audit over a previous one never leaves their files mixed. The
audit judges traffic, not a candidate shape: it never touches the ledger or the promoted-shapes
manifest.

Where the exact lane runs is a :class:`harness.pipeline.audit_rerun.Rerun`: this process
(:class:`harness.pipeline.audit_rerun.InProcessRerun`), or Ray workers (``--ray``:
:mod:`harness.pipeline.ray_audit`). The laws, the scoring and the files are this module's either way, so
both give the same audit.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from golden.manifest import BackgroundHash
from harness.base.destinations import check_output_dir
from harness.base.errors import ScoringError, committed, step
from harness.base.jsonio import plain_dict, seal, write_json_atomic
from harness.base.outputset import output_set
from harness.capture.capture_laws import CAPTURE_LAWS, Survey, blocks_of
from harness.capture.reader import CaptureReader
from harness.capture.result import headline
from harness.capture.schema import CaptureError
from harness.data.modes import VoiceprintInputs
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas.audit import FORMAT, AuditFile, CaptureRef, GoldenModel, OpAudit
from harness.data.schemas.config_file import ConfigFile
from harness.data.schemas.files import GeometryModel
from harness.judging.judges import judge_for
from harness.judging.lane_scoring import op_limits
from harness.packers.packing import unpack
from harness.pipeline.audit_batches import Batches
from harness.pipeline.audit_rerun import InProcessRerun, Rerun
from harness.progress import progress_bar

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend

AUDIT, JUNIT, HTML = "audit.json", "junit.xml", "report.html"
NOT_CAPTURED = "no request of this OP was captured"


class AuditParts(TypedDict):
    """What the audit file holds before the model that re-ran the blocks (:func:`_finish`), as its JSON holds
    them, in the file's order (each checked when the file is: :class:`AuditFile`)."""

    capture: dict[str, object]  # a CaptureRef, as its JSON
    served: object
    tolerances: object
    laws: object


@dataclass
class AuditOutcome:
    result: AuditFile  # the sealed audit file, as written
    lines: list[str]  # what the CLI prints
    paths: dict[str, Path]

    @property
    def passed(self) -> bool:
        return self.result.verdict == "pass"


def audit_capture(
    capture: Path,
    out: Path,
    cfg: ConfigFile,
    make_backend: Callable[[], Backend],
    progress: bool = False,
    pipeline: bool = True,
) -> AuditOutcome:
    """Judge ``capture`` (module doc) in this process; ``make_backend`` is called only once every law holds.
    ``pipeline=False``: every call waits for the host work around it (the files are the same either way)."""
    return judge_capture(capture, out, cfg, InProcessRerun(cfg, make_backend, pipeline), progress)


def judge_capture(capture: Path, out: Path, cfg: ConfigFile, rerun: Rerun, progress: bool = False) -> AuditOutcome:
    """The laws on every request (here, before ``rerun`` starts), then the served outputs scored against
    what ``rerun`` gives for each block alone, then the files."""
    _refuse_noise_floor(cfg)
    reader = CaptureReader(capture)
    check_output_dir(out, "audit folder", [("CAPTURE", capture)])
    digest = BackgroundHash(reader.path)  # the capture's sha256 (audit.json's capture ref) while it is read
    try:
        return _judge(reader, digest, out, cfg, rerun, progress)
    finally:
        digest.cancel()


def _judge(
    reader: CaptureReader, digest: BackgroundHash, out: Path, cfg: ConfigFile, rerun: Rerun, progress: bool
) -> AuditOutcome:
    survey = Survey(reader.geometry)
    with (
        step("packing laws"),
        progress_bar("audit: packing laws", len(reader), progress) as tick,
        contextlib.closing(reader.requests(ahead=True)) as requests,
    ):
        for request in requests:
            survey.add(request)
            tick(1)
    fields: AuditParts = {
        "capture": _capture_ref(reader, digest).model_dump(mode="json"),
        "served": survey.served().model_dump(mode="json"),
        "tolerances": cfg.tolerances.model_dump(),
        "laws": survey.laws().model_dump(mode="json"),
    }
    lines = [_capture_line(reader, survey)]
    if not survey.passed:
        ops = {
            str(int(op)): _not_scored(
                survey,
                op,
                "not run: a packing law is broken, the audit stopped before any model ran"
                if op in survey.op_requests
                else NOT_CAPTURED,
            )
            for op in ALL_OPS
        }
        result = _finish(fields, None, None, ops, survey.passed)
        lines += [f"law {law} BROKEN by {k} of {survey.requests} requests" for law, k in survey.broken.items()]
        lines += [v.line() for v in survey.violations[:5]]
        return _write(out, result, lines)
    lines.append(f"laws: {', '.join(CAPTURE_LAWS)} hold on all {survey.requests} requests")
    try:
        golden = rerun.start(reader, survey)
        matches = set(survey.fingerprints) == {golden.fingerprint}
        if not matches:
            lines.insert(0, _model_line(survey, golden))
        if set(survey.devices) != {golden.device_kind}:
            lines.append(
                f"served on {', '.join(sorted(survey.devices))}; re-run on {golden.device_kind}: what "
                "differs between the devices is judged by the tolerances"
            )
        with (
            step("exact lane + score"),
            progress_bar(
                f"audit: {survey.blocks} blocks {rerun.label}", survey.blocks, progress, unit="blocks"
            ) as tick,
        ):
            ops = _score(reader, rerun, cfg, survey, tick)
    finally:
        rerun.close()
    result = _finish(fields, golden, matches, ops, survey.passed)
    for op, o in sorted(result.ops.items()):
        v = o.verdict
        if v is None:
            lines.append(f"OP {op}: {o.not_scored}")
        else:
            first = f" ({v.reasons[0]})" if v.reasons else (" (bitwise)" if v.figures.bitwise else "")
            lines.append(f"OP {op}: {'PASS' if v.passed else 'FAIL'} over {o.blocks} blocks{first}")
    return _write(out, result, lines)


# ------------------------------------------------------------------------------------------ pass 2


def _score(
    reader: CaptureReader, rerun: Rerun, cfg: ConfigFile, survey: Survey, tick: Callable[[int], None]
) -> dict[str, OpAudit]:
    g = reader.geometry
    ops = [Op(op) for op in sorted(survey.op_requests)]
    limits = op_limits(cfg.tolerances, ops, None)
    batches = {op: Batches(op, judge_for(op).evidence(op, g, limits[op], VoiceprintInputs.ISOLATED)) for op in ops}
    requests = reader.requests(ahead=True)
    items = ((request, blocks_of(request, g)) for request in requests)
    stream = getattr(rerun, "stream", None)  # pipelined (InProcessRerun); else one request at a time
    answers = stream(items) if callable(stream) else ((item, rerun.exact(*item)) for item in items)
    with contextlib.closing(requests), contextlib.closing(answers):
        for (request, blocks), rerun_out in answers:
            served = unpack(request.packed, {request.op.output_name: request.output})
            for block, part in zip(blocks, served, strict=True):
                batches[request.op].add(f"{request.request_id}/{block.id}", block, rerun_out[block.id], part)
            tick(len(blocks))
    out: dict[str, OpAudit] = {}
    for op, b in batches.items():
        b.flush()
        out[str(int(op))] = OpAudit(
            requests=survey.op_requests[int(op)],
            blocks=survey.op_blocks[int(op)],
            rows_matched_by="block, window"
            if op is Op.SEGMENTATION
            else ("block, row" if b.unlabelled else "block, window, speaker"),
            unlabelled_rows=b.unlabelled,
            verdict=b.evidence.verdict("audit"),
            not_scored=None,
        )
    for op in ALL_OPS:
        out.setdefault(str(int(op)), _not_scored(survey, op, NOT_CAPTURED))
    return out


# ------------------------------------------------------------------------------------------ pieces


def _not_scored(survey: Survey, op: int, why: str) -> OpAudit:
    return OpAudit(
        requests=survey.op_requests[op],
        blocks=survey.op_blocks[op],
        rows_matched_by="block, window" if op == 0 else "block, window, speaker",
        unlabelled_rows=0,
        verdict=None,
        not_scored=why,
    )


def _refuse_noise_floor(cfg: ConfigFile) -> None:
    for op in ALL_OPS:
        if cfg.tolerances.for_op(op).mode == "noise-floor":
            raise ScoringError(
                f"tolerance mode 'noise-floor' (OP {int(op)}): an audit re-runs the golden model once "
                "and has no recorded noise floor to scale; judge it with --tolerance tolerance or "
                "bitwise"
            )


def _capture_ref(reader: CaptureReader, digest: BackgroundHash) -> CaptureRef:
    try:
        sha = digest.result()
    except OSError as exc:
        raise CaptureError(f"{reader.path}: cannot read the capture file ({exc.strerror})") from None
    return CaptureRef(
        path=str(reader.path),
        sha256=sha,
        requests=len(reader),
        engine=reader.meta.engine,
        geometry=GeometryModel(**reader.geometry.to_dict()),
    )


def _capture_line(reader: CaptureReader, survey: Survey) -> str:
    ops = ", ".join(f"OP {op}: {survey.op_requests[op]}" for op in sorted(survey.op_requests))
    return (
        f"capture {reader.path}: {survey.requests} requests ({ops}), {survey.blocks} blocks, engine "
        f"{reader.meta.engine!r} {', '.join(sorted(survey.versions))}, {survey.first} .. {survey.last}"
    )


def _model_line(survey: Survey, golden: GoldenModel) -> str:
    others = {fp: n for fp, n in survey.fingerprints.items() if fp != golden.fingerprint}
    served = ", ".join(f"{fp[:16]}... ({n} of {survey.requests} requests)" for fp, n in sorted(others.items()))
    return (
        f"MODEL DIFFERS: the capture was served by model {served}, not the golden model {golden.spec!r} "
        f"({golden.fingerprint[:16]}...): the scores below compare two different models"
    )


def _finish(
    fields: AuditParts, golden: GoldenModel | None, matches: bool | None, ops: dict[str, OpAudit], laws_passed: bool
) -> AuditFile:
    """The sealed audit file: ``fields`` (its parts as JSON), the model that re-ran the blocks and whether the
    capture's was it (None, None: a law stopped the audit first), and every OP; it passes when the laws hold and
    every scored OP passed. Its headline is read off a draft (the same fields, no headline or digest yet): the
    headline is part of what the digest seals."""
    passed = laws_passed and all(o.verdict.passed for o in ops.values() if o.verdict is not None)
    body = plain_dict(
        {
            "kind": "harness.audit",
            "format": FORMAT,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            **fields,
            "golden_model": golden.model_dump(mode="json") if golden is not None else None,
            "fingerprint_matches": matches,
            "ops": {op: o.model_dump(mode="json") for op, o in ops.items()},
            "verdict": "pass" if passed else "fail",
        }
    )
    draft = AuditFile.model_validate({**body, "headline": "-", "digest": "0" * 64})
    sealed = seal({**body, "headline": headline(draft)}, "digest")
    result = AuditFile.model_validate(sealed)  # what is written is what the schema declares (else: a bug, exit 3)
    assert result.model_dump(mode="json") == sealed, "the audit file would not be written as it was sealed"
    return result


def _write(out: Path, result: AuditFile, lines: list[str]) -> AuditOutcome:
    from reports.audit_report import (  # deferred: imports jinja2, markupsafe (start-up)
        write_audit_junit,
        write_audit_report,
    )

    document = result.model_dump(mode="json")  # the file's JSON, as it was sealed (_finish)
    with step("write"), output_set(out, "audit", (AUDIT, JUNIT, HTML, "report.md")) as stage:
        # one set: a reader sees this audit's four files or the previous audit's, never a mix (harness.base.outputset)
        write_json_atomic(stage / AUDIT, document)
        write_audit_junit(stage / JUNIT, result)
        pages = write_audit_report(stage, result)
    paths = {"audit": out / AUDIT, "junit": out / JUNIT, **{k: out / p.name for k, p in pages.items()}}
    committed(out, "the audit's audit.json, junit.xml and report pages")
    lines = [*lines, f"audit: {result.headline}", f"wrote {out / AUDIT}, {out / JUNIT}, {out / HTML}"]
    return AuditOutcome(result, lines, paths)
