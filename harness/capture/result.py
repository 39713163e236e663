"""``audit.json``: what ``harness audit`` judged and found, declared once and checked whole on write and read.

It holds the same check rows as a score (:class:`harness.data.schemas.OpVerdictModel` per OP), so the
sign-off report's and JUnit's renderers read it the same way; it is sealed with its digest and
names the capture it judged by sha256. It is not a score: the audit judges traffic, not a
candidate shape, and never changes the ledger or the promoted-shapes manifest.

In memory the audit is the frozen :class:`AuditFile` (read by attribute); it is written as
``model_dump(mode="json")``, which is the sealed JSON it was validated from.
"""

from __future__ import annotations

from pathlib import Path

from harness.base.errors import SchemaError
from harness.base.jsonio import read_json, seal_ok
from harness.data.schemas import validate
from harness.data.schemas.audit import AuditFile
from harness.data.schemas.docs import (
    markdown,
)


def check_audit(data: object, where: str) -> AuditFile:
    """The audit file ``data`` holds, if it is valid and sealed; else one SchemaError line."""
    audit: AuditFile = validate(AuditFile, data, where)
    assert isinstance(data, dict)  # validate refused anything but a JSON object
    if not seal_ok(data, "digest"):
        raise SchemaError(f"{where}: digest does not match the content (edited after it was written?)")
    return audit


def read_audit(path: Path) -> AuditFile:
    return check_audit(read_json(path, "audit file"), str(path))


def headline(result: AuditFile) -> str:
    """One line for CI logs and the report: PASS/FAIL and why; another model is named first. (Computed
    on a draft of the file, before its headline and digest are known: neither is read here.)"""
    n = result.capture.requests
    laws = result.laws
    if not laws.passed:
        broken = ", ".join(f"{law} by {k} of {n} requests" for law, k in laws.broken.items())
        first = laws.violations[0]
        block = f" block {first.block_id!r}" if first.block_id is not None else ""
        return (
            f"FAIL: packing law broken ({broken}); first: request {first.request_id!r}{block}: {first.what}; "
            "nothing was re-run"
        )
    gm = result.golden_model
    assert gm is not None, "every law held, so the golden model ran (AuditFile refuses otherwise)"
    parts = []
    if not result.fingerprint_matches:
        others = sorted(((c, fp) for fp, c in result.served.fingerprints.items() if fp != gm.fingerprint), reverse=True)
        served = ", ".join(f"{fp[:16]}... in {c} of {n} requests" for c, fp in others)
        parts.append(f"served by another model ({served}), not the golden model {gm.spec!r} ({gm.fingerprint[:16]}...)")
    scored = {op: o.verdict for op, o in sorted(result.ops.items()) if o.verdict is not None}
    failed = {op: v for op, v in scored.items() if not v.passed}
    if not failed:
        how = ", ".join(f"OP {op} {'bitwise' if v.figures.bitwise else 'within tolerance'}" for op, v in scored.items())
        text = (
            f"{n} captured requests ({laws.blocks} blocks) obey the packing laws and match the golden model "
            f"{gm.spec!r} re-run alone: {how}"
        )
        return "PASS: " + "; ".join([*parts, text])
    for v in failed.values():
        more = f" (+{len(v.reasons) - 1} more)" if len(v.reasons) > 1 else ""
        parts.append(v.reasons[0] + more)
    parts.append(f"{len(failed)} of {len(scored)} OPs failed")
    return "FAIL: " + "; ".join(parts)


def schema_markdown() -> str:
    """The tables of docs/audit.md for the capture's metadata and the audit file (a test keeps them in step)."""
    from harness.capture.schema import CaptureMeta  # deferred: imports pyarrow (start-up)

    text = markdown({"capture metadata `harness.capture`": CaptureMeta, "audit file `audit.json`": AuditFile})
    return text[text.index("## ") :].replace("## ", "### ")
