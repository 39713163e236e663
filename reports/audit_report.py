"""The "production audit" section of the sign-off report, and its JUnit file, from an ``audit.json``.

Nothing is judged here: the laws' violations and every OP's check rows are the audit's
(:mod:`harness.pipeline.audit`), rendered as they are, with the same filters and the same check
tables as the sign-off report. The section lives in its own templates
(``templates/audit_section.*.j2``) so that a sign-off page can include it; ``write_audit_report``
renders it as a page of its own (``report.html``, ``report.md`` in the audit folder).

JUnit (suite ``harness.audit``): classname ``production_audit``, one case ``laws`` (fails with the
violations) and one per OP ``op0``/``op1``/``op2`` (fails with that OP's failing checks, the gate's
lines; skipped, saying why, when the OP was not scored).

The audit document comes as its model, the data layer's ``AuditFile`` (what ``audit.json`` holds),
read by attribute; each scored OP's verdict is the same ``OpVerdictModel`` a score's OPs are, and is
rendered by the same code (``reports.shape_facts.op_facts``, ``reports.junit.op_case``). The pages'
facts are the audit's JSON with those rows in the sign-off report's shape: the templates' context.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.base.fsio import atomic_write_many, make_dirs
from harness.data.schemas.audit import AuditFile, ViolationModel
from reports.junit import new_suite, op_case, write_suite
from reports.row_view import json_of
from reports.shape_facts import op_facts
from reports.signoff import template_environments

SUITE = "harness.audit"
CLASSNAME = "production_audit"
TITLE = "Production audit: {capture}"


# the templates' Jinja context: the audit file's own JSON (AuditFile's dump), each scored OP's row spliced in
def build_audit_facts(result: AuditFile) -> dict[str, Any]:
    """What the section shows (the templates' context): the audit file's JSON, with each scored OP in the
    sign-off report's shape."""
    ops = {}
    for op, o in sorted(result.ops.items()):
        v = o.verdict
        ops[op] = {
            **o.model_dump(mode="json", exclude={"verdict"}),
            "scored": v is not None,
            **(json_of(op_facts(v)) if v is not None else {"verdict": "not scored"}),
        }
    golden = result.golden_model
    others = (
        {} if golden is None else {fp: n for fp, n in result.served.fingerprints.items() if fp != golden.fingerprint}
    )
    return {
        **result.model_dump(mode="json"),
        "ops": ops,
        "other_fingerprints": others,
        "title": TITLE.format(capture=Path(result.capture.path).name),
    }


def write_audit_report(out_dir: Path, result: AuditFile) -> dict[str, Path]:
    """Write report.html and report.md (the production audit section as a page) under ``out_dir``."""
    out_dir = Path(out_dir)
    make_dirs(out_dir)
    facts = build_audit_facts(result)
    html_env, md_env = template_environments()
    html, md = out_dir / "report.html", out_dir / "report.md"
    atomic_write_many(
        {
            md: md_env.get_template("audit.md.j2").render(a=facts),  # both pages or neither
            html: html_env.get_template("audit.html.j2").render(a=facts),
        }
    )
    return {"html": html, "md": md}


def write_audit_junit(path: Path, result: AuditFile) -> Path:
    """The audit's JUnit file: one case for the laws, one per OP (see module doc)."""
    golden = result.golden_model
    capture = result.capture
    suite = new_suite(
        SUITE,
        {
            "capture": capture.path,
            "capture_sha256": capture.sha256,
            "requests": capture.requests,
            "engine": capture.engine,
            "golden_model": golden.spec if golden is not None else "not loaded",
            "golden_fingerprint": golden.fingerprint if golden is not None else "",
            "fingerprint_matches": result.fingerprint_matches,
            "verdict": result.verdict,
            "summary": result.headline,
        },
        result.created,
    )

    laws = result.laws
    case = ET.SubElement(suite, "testcase", classname=CLASSNAME, name="laws", time="0")
    lines = [f"{law}: broken by {laws.broken.get(law, 0)} of {laws.requests} requests" for law in laws.judged]
    if not laws.passed:
        found = [_violation(v) for v in laws.violations]
        failure = ET.SubElement(case, "failure", message=found[0], type="packing-law")
        failure.text = "\n".join(found)
    ET.SubElement(case, "system-out").text = "\n".join(lines)
    tests, failures, skipped = 1, int(not laws.passed), 0
    for op, o in sorted(result.ops.items()):
        case = ET.SubElement(suite, "testcase", classname=CLASSNAME, name=f"op{op}", time="0")
        tests += 1
        verdict = o.verdict
        if verdict is None:
            ET.SubElement(case, "skipped", message=o.not_scored or "")
            skipped += 1
            continue
        op_case(case, int(op), verdict)
        failures += not verdict.passed
    return write_suite(path, suite, tests, failures, skipped, 0.0)


def _violation(v: ViolationModel) -> str:
    block = f" block {v.block_id!r}" if v.block_id is not None else ""
    return f"law {v.law} broken by request {v.request_id!r} (row {v.row}){block}: {v.what}"
