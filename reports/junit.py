"""JUnit XML for the nightly CI job: one test case per OP x shape, one for golden reproduction.

CI systems (GitLab, Jenkins, GitHub test reporters) show JUnit failures by name, so a red
nightly says *which* shape and OP failed and why without opening the report:

- classname ``shape_k<k>``, name ``op<op>``: fails with that OP's failing checks (the gate's
  lines: observed vs allowed, how many of how many, where), every check as a <property> and a
  line of <system-out>; time = that lane's wall time for the OP;
- classname ``shape_k<k>``, name ``evidence``: fails when the shape is refused by what no single OP
  case shows (its arrangements, duplicates, repeats, load, request sizes, packing laws), its message the
  refusal's cause first; every case of a refused shape carries its ``cause`` as a property;
- classname ``golden``, name ``reproduction``: fails when the exact lane did not reproduce the
  golden (``verification.passed`` false); skipped, saying so, when nothing verified it;
- a suite property per evidence warning (``evidence_warning_k<k>_op<op>_<kind>``, the line its value):
  reported, not failed;
- suite properties naming what ran the requests: ``backend`` (in-process or triton) and, for a Triton
  server, ``backend_url``, ``backend_transport`` (http or shm) and ``backend_concurrency``.

Written with the standard library only: junitparser is a test dependency, not a runtime one.
"""

from __future__ import annotations

import io
import socket
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.base.fsio import atomic_write
from harness.data.schemas.files import LawsVerdict
from harness.data.schemas.refusals import NUMERICS
from harness.data.schemas.results import (
    CheckModel,
    OpVerdictModel,
    Reproduction,
    Score,
    ShapeScore,
    reproduction_phrase,
)
from harness.data.shape import Shape
from harness.evidence.kind_registry import kinds
from reports.margin_section import junit_properties
from reports.row_view import row_view

if TYPE_CHECKING:
    from harness.ledger.margins import MarginsView

SUITE = "harness.nightly"
MAX_SHAPES_IN_SUMMARY = 3


def write_junit(
    path: Path, score: Score, verification: Reproduction | None, margins: MarginsView | None = None
) -> Path:
    """Write the nightly's JUnit XML. ``verification`` falls back to ``score.verification``; ``margins``: one
    suite property per margin warning (``margin_warning_k<k>_op<op>_<metric>``, the warning line its value)."""
    verification = verification if verification is not None else score.verification
    lanes = score.lane_timings()
    suite = new_suite(
        SUITE,
        {
            "release": score.release,
            "golden_id": score.golden.id,
            "run_id": score.run.id,
            "fingerprint": score.fingerprint,
            "device_kind": score.device_kind,
            "numerics_profile": score.numerics_profile,
            "mode": score.voiceprint_inputs,
            "verdict": score.verdict,
            "packing_laws": _laws_phrase(score.laws),
            **_backend_properties(score),
            "summary": summary_line(score, verification),
        },
        score.created,
    )
    suite_props = suite.find("properties")
    assert suite_props is not None  # new_suite always adds it
    for k, shape in sorted(score.shapes.items(), key=lambda kv: int(kv[0])):
        for w in shape.warnings:
            ET.SubElement(suite_props, "property", name=f"evidence_warning_k{k}_op{w.op}_{w.kind}", value=w.line)
    if margins is not None:
        junit_properties(suite_props, margins)

    tests = failures = skipped = 0
    total_time = 0.0
    for k, shape in sorted(score.shapes.items(), key=lambda kv: int(kv[0])):
        for op, verdict in sorted(shape.ops.items(), key=lambda kv: int(kv[0])):
            timing = lanes[k].ops.get(op) if k in lanes else None
            seconds = (timing.wall_s if timing is not None else None) or 0.0
            case = ET.SubElement(suite, "testcase", classname=f"shape_k{k}", name=f"op{op}", time=f"{seconds:.6f}")
            op_case(case, int(op), verdict, None if shape.cause is None else shape.cause.kind)
            props = case.find("properties")
            assert props is not None  # op_case always adds it
            for kind in kinds():  # every kind of evidence's properties (the full k-block requests behind it, ...)
                for name, value in kind.junit(Shape(k), shape):
                    ET.SubElement(props, "property", name=name, value=value)
            if shape.cause is not None:
                ET.SubElement(props, "property", name="cause", value=shape.cause.kind)
                ET.SubElement(props, "property", name="cause_evidence", value=shape.cause.evidence)
            tests += 1
            total_time += seconds
            failures += not verdict.passed
        gate = _gate_reasons(shape)
        if gate:  # refused by what no OP case shows: arrangements, repeats, load, request sizes, the packing laws
            case = ET.SubElement(suite, "testcase", classname=f"shape_k{k}", name="evidence", time="0")
            cause = shape.cause
            message = cause.line(k) if cause is not None else gate[0]
            failure = ET.SubElement(case, "failure", message=message, type=cause.kind if cause else "evidence")
            failure.text = "\n".join([message, *gate] if cause is not None else gate)
            props = ET.SubElement(case, "properties")
            if cause is not None:
                ET.SubElement(props, "property", name="cause", value=cause.kind)
            tests += 1
            failures += 1

    for c in score.canaries.canaries if score.canaries is not None else []:
        case = ET.SubElement(suite, "testcase", classname="canaries", name=c.name, time="0")
        props = ET.SubElement(case, "properties")
        said = "passed" if c.shape.cause is None else c.shape.cause.kind
        for name, value in (("planted", c.planted), ("expected_cause", c.expected), ("refused_as", said)):
            ET.SubElement(props, "property", name=name, value=value)
        if c.shape.cause is not None:
            ET.SubElement(props, "property", name="evidence", value=c.shape.cause.evidence)
        if not c.seen:
            message = f"the gate did not see a planted defect: {c.name} ({c.planted}): expected {c.expected!r}, {said}"
            ET.SubElement(case, "failure", message=message, type="canary not seen").text = message
            failures += 1
        tests += 1
    case = ET.SubElement(suite, "testcase", classname="golden", name="reproduction", time="0")
    tests += 1
    if verification is None:
        ET.SubElement(
            case,
            "skipped",
            message="no golden verification available: this run has no "
            "interleaved exact lane and no separate verification was given",
        )
        skipped += 1
    else:
        line = verification.summary
        if not verification.passed:
            status = verification.status
            failure = ET.SubElement(case, "failure", message=line, type=status)
            diffs = verification.environment_differences
            failure.text = line + ("\nwhat differs: " + "; ".join(diffs) if diffs else "")
            failures += 1
        ET.SubElement(case, "system-out").text = line

    return write_suite(path, suite, tests, failures, skipped, total_time)


def _backend_properties(score: Score) -> dict[str, str]:
    """What ran the requests: ``backend`` (none for a score before it was recorded); a Triton server's
    ``backend_url``, ``backend_transport`` (http / shm) and ``backend_concurrency`` too."""
    b = score.backend
    if b is None:
        return {}
    if not b.remote:
        return {"backend": b.name}
    return {
        "backend": b.name,
        "backend_url": str(b.url),
        "backend_transport": b.transport or "http",
        "backend_concurrency": str(b.concurrency),
    }


def _gate_reasons(shape: ShapeScore) -> list[str]:
    """The reasons of a refused shape that no OP case gives: its evidence (arrangements, duplicates, repeats,
    load, request sizes) and the packing-laws gate."""
    if shape.verdict != "fail":
        return []
    own = {r for v in shape.ops.values() for r in v.reasons}
    return [r for r in shape.reasons if r not in own]


def new_suite(name: str, facts: Mapping[str, Any], created: str) -> ET.Element:
    """A test suite on this host, with ``facts`` as its properties, stamped with ``created``: the time of the
    document it reports (score or audit), not of this write, so a file rewritten from the same document (a
    resumed or sharded job) is the same file."""
    suite = ET.Element("testsuite", name=name, timestamp=created, hostname=socket.gethostname())
    props = ET.SubElement(suite, "properties")
    for key, value in facts.items():
        ET.SubElement(props, "property", name=key, value=str(value))
    return suite


def write_suite(path: Path, suite: ET.Element, tests: int, failures: int, skipped: int, seconds: float) -> Path:
    """``suite`` with its counts, alone in a ``testsuites`` root, written atomically to ``path``."""
    return atomic_write(Path(path), suite_bytes(suite, tests, failures, skipped, seconds))


def suite_bytes(suite: ET.Element, tests: int, failures: int, skipped: int, seconds: float) -> bytes:
    """``suite`` with its counts, alone in a ``testsuites`` root: the file's bytes (UTF-8, declared)."""
    counts = {
        "tests": str(tests),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
        "time": f"{seconds:.6f}",
    }
    for key, value in counts.items():
        suite.set(key, value)
    root = ET.Element("testsuites", {"name": "harness", **counts})
    root.append(suite)
    ET.indent(root)
    buffer = io.BytesIO()
    ET.ElementTree(root).write(buffer, encoding="utf-8", xml_declaration=True)
    return buffer.getvalue()


def op_case(case: ET.Element, op: int, verdict: OpVerdictModel, cause: str | None = None) -> None:
    """One OP's verdict as a test case: every check a property and a line, the failing ones its failure (its
    message led by the shape's refusal ``cause``, when given), with the least limit that would have passed each."""
    props = ET.SubElement(case, "properties")
    lines = []
    for c in verdict.checks:
        ET.SubElement(props, "property", name=c.metric, value=str(c.observed))
        if c.allowed is not None:
            ET.SubElement(props, "property", name=f"{c.metric}_allowed", value=str(c.allowed))
        if c.would_pass_at is not None:
            ET.SubElement(props, "property", name=f"{c.metric}_would_pass_at", value=c.would_pass_at)
        ok = "not gated" if c.ok is None else ("ok" if c.ok else "FAIL")
        lines.append(f"[{ok}] {_line(c)}")
    mode = verdict.limits.get("mode")  # limits: the score's open dict of named figures
    ET.SubElement(props, "property", name="mode", value=str(mode))
    reasons = list(verdict.reasons)
    if not verdict.passed:
        message = "; ".join(reasons) or "failed"
        failure = ET.SubElement(case, "failure", message=f"{cause}: {message}" if cause else message, type="tolerance")
        failure.text = "\n".join(reasons + next_steps(verdict.checks))
    ET.SubElement(case, "system-out").text = "\n".join(lines)


def next_steps(checks: Sequence[CheckModel], localised: bool = False) -> list[str]:
    """What to do next about a failing OP, as 'next: ...' lines: its failing checks' hints, once each.

    The one wording of the next step: JUnit's failure text and the sign-off pages both use it.
    ``localised``: localisation already ran for this OP, so its finding is the next step (the
    caller says what it found) and every clause asking to localise is dropped from the hints."""
    hints = sorted({c.hint for c in checks if c.ok is False and c.hint})
    if localised:
        hints = [h for h in (_without_localise(h) for h in hints) if h]
    return [f"next: {h}" for h in dict.fromkeys(hints)]


def _without_localise(hint: str) -> str:
    """``hint`` less its 'localise the first diverging layer ...' clause (split on '; ' and ', or ')."""
    kept = []
    for clause in hint.split("; "):
        clause = clause.split(", or localise", 1)[0]
        if not clause.startswith("localise"):
            kept.append(clause)
    return "; ".join(kept)


def _line(check: CheckModel) -> str:
    return (
        check.line()
    )  # the judges' one wording of a check (the model is theirs: harness.judging.judges.judge_base.Check)


def summary_line(
    score: Score, verification: Reproduction | None, localisation: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """One line for the CI log: PASS/FAIL, each failed shape's cause and the evidence that decided it, the golden.

    e.g. "FAIL: shape k=2 refused (numerics at this batch shape beyond the tolerances): OP 0 max_abs: 10.1 >
    0.0001 allowed (would pass at 10.1) ... (+8 more reasons in the report); 2 of 3 shapes failed; golden
    reproduced bitwise" or "PASS: 3 shapes promoted (k=2,4,8), golden reproduced bitwise". ``localisation``
    (the nightly's, by shape and OP): a numerics refusal names the first module beyond its noise floor.
    """
    verification = verification if verification is not None else score.verification
    shapes = sorted(score.shapes.items(), key=lambda kv: int(kv[0]))
    failed = [(k, s) for k, s in shapes if s.verdict != "pass"]
    golden_ok = verification is None or verification.passed
    golden = reproduction_phrase(verification)
    if not failed and golden_ok:
        if not shapes:
            return f"PASS: no packed shape scored, {golden}"
        ks = ",".join(k for k, _ in shapes)
        return f"PASS: {len(shapes)} shape{'s' if len(shapes) != 1 else ''} promoted (k={ks}), {golden}"
    parts = []
    for k, s in failed[:MAX_SHAPES_IN_SUMMARY]:
        reasons = s.reasons or ["failed"]  # a list of one reason, not a lookup
        if s.cause is not None:  # the deciding evidence first, never behind "+N more"
            first = s.cause.text(k) + _first_module(s.cause.kind, (localisation or {}).get(k))
            others = len([r for r in reasons if r != s.cause.evidence])
        else:
            first = reasons[0].removeprefix(f"k={k} ")  # an evidence reason names its shape itself
            others = len(reasons) - 1
        more = f" (+{others} more reason{'s' if others != 1 else ''} in the report)" if others else ""
        parts.append(f"shape k={k} {first}{more}")
    if len(failed) > MAX_SHAPES_IN_SUMMARY:
        parts.append(f"... {len(failed) - MAX_SHAPES_IN_SUMMARY} more failed shape(s)")
    parts.append(f"{len(failed)} of {len(shapes)} shapes failed")
    if not golden_ok:
        parts.insert(0, golden)
        parts.append("nothing may be promoted while the golden is not reproduced")
    else:
        parts.append(golden)
    return "FAIL: " + "; ".join(parts)


@dataclass(frozen=True)
class _Localised:
    """What the summary line reads of one localised OP (absent: None; nothing is validated, see below)."""

    first_exceeding: str | None = None
    first_diverging_layer: str | None = None


def _first_module(cause: str, localised: Mapping[str, Any] | None) -> str:
    """'; first module beyond its noise floor: OP 1 voiceprint.trunk...' for a numerics refusal that was localised.

    Read loosely, not validated: the summary line must be printed whatever a localisation holds (it runs best
    effort), so an OP's entry that is no mapping is passed over."""
    if cause != NUMERICS or not localised:
        return ""
    found = [(op, row_view(_Localised, item)) for op, item in sorted(localised.items()) if isinstance(item, Mapping)]
    for op, item in found:
        if item.first_exceeding:
            return f"; first module beyond its noise floor: OP {op} {item.first_exceeding}"
    first = next((item.first_diverging_layer for _, item in found if item.first_diverging_layer), None)
    return f"; first diverging module: {first} (none beyond its noise floor)" if first else ""


def evidence_warnings(score: Score) -> list[str]:
    """Every shape's evidence warnings, one line per (shape, OP, kind): what the summary prints as 'warning:'."""
    return [w.line for _, s in sorted(score.shapes.items(), key=lambda kv: int(kv[0])) for w in s.warnings]


def _laws_phrase(laws: LawsVerdict | None) -> str:
    if laws is None:
        return "not recorded"
    broken = f" ({', '.join(laws.broken)})" if laws.broken else ""
    return f"{laws.verdict}{broken}: packer {laws.packer_identity}, {laws.examples} examples, seed {laws.seed}"
