"""The "production audit" section of the sign-off report, and its JUnit file, from an ``audit.json``.

Nothing is judged here: the laws' violations and every OP's check rows are the audit's
(:mod:`harness.pipeline.audit`), rendered as they are, with the same filters and the same check
tables as the sign-off report. The section lives in its own templates
(``templates/audit_section.*.j2``) so that a sign-off page can include it; ``write_audit_report``
renders it as a page of its own (``report.html``, ``report.md`` in the audit folder).

JUnit (suite ``harness.audit``): classname ``production_audit``, one case ``laws`` (fails with the
violations) and one per OP ``op0``/``op1``/``op2`` (fails with that OP's failing checks, the gate's
lines; skipped, saying why, when the OP was not scored).

The audit document comes as its JSON (what ``audit.json`` holds): its model,
``harness.capture.result.AuditFile``, lives in the core, which reports may not import
(docs/design.md, layering), so the audit's own keys are read from the JSON; each scored OP's
verdict is validated into the data layer's ``OpVerdictModel``, the same model a score's OPs
are, and rendered by the same code (``reports.shape_facts.op_facts``, ``reports.junit.op_case``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.base.fsio import atomic_write_many, make_dirs
from harness.base.jsonio import plain_dict
from harness.data.schemas.results import OpVerdictModel
from reports.junit import new_suite, op_case, write_suite
from reports.shape_facts import op_facts
from reports.signoff import template_environments

SUITE = "harness.audit"
CLASSNAME = "production_audit"
TITLE = "Production audit: {capture}"


def _verdict(o: Mapping[str, Any]) -> OpVerdictModel | None:
    """One audited OP's verdict as the score's OP model (None: not scored)."""
    return None if o["verdict"] is None else OpVerdictModel.model_validate(o["verdict"])


def build_audit_facts(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the section shows: the audit file, with each scored OP in the sign-off report's shape."""
    result = plain_dict(result)
    ops = {}
    for op, o in sorted(result["ops"].items()):
        verdict = _verdict(o)
        ops[op] = {
            **{k: v for k, v in o.items() if k != "verdict"},
            "scored": verdict is not None,
            **(op_facts(verdict) if verdict is not None else {"verdict": "not scored"}),
        }
    golden = result["golden_model"]
    others = (
        {}
        if golden is None
        else {fp: n for fp, n in result["served"]["fingerprints"].items() if fp != golden["fingerprint"]}
    )
    return {
        **result,
        "ops": ops,
        "other_fingerprints": others,
        "title": TITLE.format(capture=Path(result["capture"]["path"]).name),
    }


def write_audit_report(out_dir: Path, result: Mapping[str, Any]) -> dict[str, Path]:
    """Write report.html and report.md (the production audit section as a page) under ``out_dir``."""
    out_dir = Path(out_dir)
    make_dirs(out_dir)
    facts = build_audit_facts(result)
    html_env, md_env = template_environments()
    paths = {"html": out_dir / "report.html", "md": out_dir / "report.md"}
    atomic_write_many(
        {
            paths["md"]: md_env.get_template("audit.md.j2").render(a=facts),  # both pages or neither
            paths["html"]: html_env.get_template("audit.html.j2").render(a=facts),
        }
    )
    return paths


def write_audit_junit(path: Path, result: Mapping[str, Any]) -> Path:
    """The audit's JUnit file: one case for the laws, one per OP (see module doc)."""
    golden = result["golden_model"] or {}
    suite = new_suite(
        SUITE,
        {
            "capture": result["capture"]["path"],
            "capture_sha256": result["capture"]["sha256"],
            "requests": result["capture"]["requests"],
            "engine": result["capture"]["engine"],
            "golden_model": golden.get("spec", "not loaded"),
            "golden_fingerprint": golden.get("fingerprint", ""),
            "fingerprint_matches": result["fingerprint_matches"],
            "verdict": result["verdict"],
            "summary": result["headline"],
        },
        result["created"],
    )

    laws = result["laws"]
    case = ET.SubElement(suite, "testcase", classname=CLASSNAME, name="laws", time="0")
    lines = [f"{law}: broken by {laws['broken'].get(law, 0)} of {laws['requests']} requests" for law in laws["judged"]]
    if not laws["passed"]:
        found = [_violation(v) for v in laws["violations"]]
        failure = ET.SubElement(case, "failure", message=found[0], type="packing-law")
        failure.text = "\n".join(found)
    ET.SubElement(case, "system-out").text = "\n".join(lines)
    tests, failures, skipped = 1, int(not laws["passed"]), 0
    for op, o in sorted(result["ops"].items()):
        case = ET.SubElement(suite, "testcase", classname=CLASSNAME, name=f"op{op}", time="0")
        tests += 1
        verdict = _verdict(o)
        if verdict is None:
            ET.SubElement(case, "skipped", message=o["not_scored"])
            skipped += 1
            continue
        op_case(case, int(op), verdict)
        failures += not verdict.passed
    return write_suite(path, suite, tests, failures, skipped, 0.0)


def _violation(v: Mapping[str, Any]) -> str:
    block = f" block {v['block_id']!r}" if v["block_id"] is not None else ""
    return f"law {v['law']} broken by request {v['request_id']!r} (row {v['row']}){block}: {v['what']}"
