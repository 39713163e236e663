"""``audit.json``: what ``harness audit`` judged and found, declared once and checked whole on write and read.

It holds the same check rows as a score (:class:`harness.data.schemas.OpVerdictModel` per OP), so the
sign-off report's and JUnit's renderers read it the same way; it is sealed with its digest and
names the capture it judged by sha256. It is not a score: the audit judges traffic, not a
candidate shape, and never changes the ledger or the promoted-shapes manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.capture.laws import MAX_VIOLATIONS
from harness.data.errors import SchemaError
from harness.data.jsonio import read_json, seal_ok
from harness.data.schemas import GeometryModel, OpVerdictModel, validate
from harness.data.schemas.base import Count, OpKey, Sha256, Strict, Timestamp, Verdict

FORMAT = 1
Text = Annotated[str, Field(min_length=1)]


class CaptureRef(Strict):
    """The capture judged."""

    path: str = Field(description="where it was read")
    sha256: Sha256 = Field(description="sha256 of the capture file's bytes")
    requests: Count = Field(description="rows (requests) in the capture")
    engine: Text = Field(description="its metadata's engine name")
    geometry: GeometryModel = Field(description="its metadata's geometry")


class Served(Strict):
    """What the capture says about who served it (counts of requests)."""

    fingerprints: dict[str, Count] = Field(description="model fingerprint -> requests it served")
    devices: dict[str, Count] = Field(description="device kind -> requests")
    engine_versions: dict[str, Count] = Field(description="engine version -> requests")
    first: Timestamp | None = Field(description="earliest captured_at")
    last: Timestamp | None = Field(description="latest captured_at")


class GoldenModel(Strict):
    """The model the captured blocks were re-run on (absent when a law stopped the audit first)."""

    spec: Text = Field(description="its model spec (--golden-model, or the config's [model])")
    fingerprint: Text = Field(description="its fingerprint, compared with every request's")
    name: str = Field(description="its human name")
    device_kind: Text = Field(description="where it re-ran the blocks")
    numerics_in_force: dict[str, Any] = Field(description="the numeric settings torch had")


class ViolationModel(Strict):
    """One law broken by one captured request."""

    law: Text = Field(description="well-formed or rebased-inside")
    request_id: str = Field(description="the request's id")
    row: Count = Field(description="its row in the capture file")
    block_id: str | None = Field(description="the block it names (None: the request as a whole)")
    what: Text = Field(description="what is wrong, where (window / row of the block and of the request)")


class Laws(Strict):
    """The packing laws on every captured request."""

    passed: bool = Field(description="no request breaks a law")
    judged: list[Text] = Field(description="the laws checked on every request")
    requests: Count = Field(description="requests judged")
    blocks: Count = Field(description="real blocks in them")
    padding_blocks: Count = Field(description="padding blocks in them")
    broken: dict[str, Count] = Field(description="law -> requests breaking it")
    violations: list[ViolationModel] = Field(description=f"the first {MAX_VIOLATIONS} violations")

    @model_validator(mode="after")
    def _consistent(self) -> Laws:
        if self.passed != (not self.broken) or (self.broken and not self.violations):
            raise ValueError("passed must mean no law broken, and a broken law must show a violation")
        return self


class OpAudit(Strict):
    """One OP's served outputs against the golden model's re-run."""

    requests: Count = Field(description="captured requests of this OP")
    blocks: Count = Field(description="real blocks in them")
    rows_matched_by: Literal["block, window, speaker", "block, row", "block, window"] = Field(
        description="how served and re-run outputs are paired (block: request id/block id)")
    unlabelled_rows: Count = Field(description="OP 1/2 rows of blocks without speaker labels, or with a (window, "
                                    "speaker) twice: matched by their index in the block")
    verdict: OpVerdictModel | None = Field(description="None: not scored (see not_scored)")
    not_scored: str | None = Field(description="why the OP was not scored (None: scored)")

    @model_validator(mode="after")
    def _either(self) -> OpAudit:
        if (self.verdict is None) == (self.not_scored is None):
            raise ValueError("an OP is either scored (verdict) or not (not_scored, saying why)")
        return self


class AuditFile(Strict):
    """``audit.json``: a production capture judged: the laws, then every OP against the golden model."""

    kind: Literal["harness.audit"]
    format: Literal[1] = Field(description="layout version; others are refused")
    created: Timestamp
    capture: CaptureRef
    served: Served
    golden_model: GoldenModel | None = Field(description="None: a law stopped the audit before any model ran")
    fingerprint_matches: bool | None = Field(description="every request served by the golden model (None: not "
                                             "compared, a law stopped the audit)")
    tolerances: dict[str, Any] = Field(description="the tolerances judged with ([tolerances], --tolerance)")
    laws: Laws
    ops: dict[OpKey, OpAudit] = Field(description="every OP, scored or saying why not")
    verdict: Verdict = Field(description="pass: every law holds and every scored OP passed")
    headline: Text = Field(description="one line: the verdict and its first reason")
    digest: Sha256 = Field(description="sha256 of this file's canonical JSON without this key")

    @model_validator(mode="after")
    def _verdict(self) -> AuditFile:
        scored = [o.verdict for o in self.ops.values() if o.verdict is not None]
        passed = self.laws.passed and all(v.passed for v in scored)
        if (self.verdict == "pass") != passed:
            raise ValueError(f"verdict {self.verdict!r} disagrees with the laws and the OP verdicts")
        if not self.laws.passed and (scored or self.golden_model is not None):
            raise ValueError("a broken law stops the audit before any model runs: nothing may be scored")
        return self


def check_audit(data: object, where: str) -> dict[str, Any]:
    """``data`` if it is a valid, sealed audit file; else one SchemaError line."""
    validate(AuditFile, data, where)
    if not isinstance(data, dict):  # (validate refuses anything but a JSON object: for the type checker)
        raise SchemaError(f"{where}: an audit file is a JSON object, got a {type(data).__name__}")
    if not seal_ok(data, "digest"):
        raise SchemaError(f"{where}: digest does not match the content (edited after it was written?)")
    return data


def read_audit(path: Path) -> dict[str, Any]:
    return check_audit(read_json(path, "audit file"), str(path))


def headline(result: dict[str, Any]) -> str:
    """One line for CI logs and the report: PASS/FAIL and why; another model is named first."""
    n = result["capture"]["requests"]
    laws = result["laws"]
    if not laws["passed"]:
        broken = ", ".join(f"{law} by {k} of {n} requests" for law, k in laws["broken"].items())
        v = laws["violations"][0]
        block = f" block {v['block_id']!r}" if v["block_id"] is not None else ""
        return (f"FAIL: packing law broken ({broken}); first: request {v['request_id']!r}{block}: {v['what']}; "
                "nothing was re-run")
    gm = result["golden_model"]
    parts = []
    if not result["fingerprint_matches"]:
        others = sorted(((c, fp) for fp, c in result["served"]["fingerprints"].items() if fp != gm["fingerprint"]),
                        reverse=True)
        served = ", ".join(f"{fp[:16]}... in {c} of {n} requests" for c, fp in others)
        parts.append(f"served by another model ({served}), not the golden model {gm['spec']!r} "
                     f"({gm['fingerprint'][:16]}...)")
    scored = {op: o["verdict"] for op, o in sorted(result["ops"].items()) if o["verdict"] is not None}
    failed = {op: v for op, v in scored.items() if not v["passed"]}
    if not failed:
        how = ", ".join(f"OP {op} {'bitwise' if v['metrics']['bitwise'] else 'within tolerance'}"
                        for op, v in scored.items())
        blocks = laws["blocks"]
        text = (f"{n} captured requests ({blocks} blocks) obey the packing laws and match the golden model "
                f"{gm['spec']!r} re-run alone: {how}")
        return "PASS: " + "; ".join([*parts, text])
    for v in failed.values():
        more = f" (+{len(v['reasons']) - 1} more)" if len(v["reasons"]) > 1 else ""
        parts.append(v["reasons"][0] + more)
    parts.append(f"{len(failed)} of {len(scored)} OPs failed")
    return "FAIL: " + "; ".join(parts)


def schema_markdown() -> str:
    """The tables of docs/audit.md for the capture's metadata and the audit file (a test keeps them in step)."""
    from harness.capture.schema import CaptureMeta
    from harness.data.schemas.docs import markdown

    text = markdown({"capture metadata `harness.capture`": CaptureMeta, "audit file `audit.json`": AuditFile})
    return text[text.index("## "):].replace("## ", "### ")
