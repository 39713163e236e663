"""``audit.json``'s schema: what ``harness audit`` judged and found (the functions that build, check and
read it are in :mod:`harness.capture.result`).

It lives in the data layer, with every other file's schema, so that the sign-off report can type
the audit it renders and the JSON Schema of ``audit.json`` is published with the others. It holds
the same check rows as a score (:class:`OpVerdictModel` per OP).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from harness.data.schemas.base import Count, OpKey, Sha256, Strict, Timestamp, Verdict
from harness.data.schemas.files import GeometryModel
from harness.data.schemas.machine import InForce
from harness.data.schemas.results import OpVerdictModel
from harness.data.tolerances import Tolerances

# the violations an audit file keeps (the first ones found): a capture may break a law in every request
MAX_VIOLATIONS = 20
FORMAT = 1
Text = Annotated[str, Field(min_length=1)]


class _Frozen(Strict):
    """A part of a judged audit: every key known, every type exact, never changed once built."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CaptureRef(_Frozen):
    """The capture judged."""

    path: str = Field(description="where it was read")
    sha256: Sha256 = Field(description="sha256 of the capture file's bytes")
    requests: Count = Field(description="rows (requests) in the capture")
    engine: Text = Field(description="its metadata's engine name")
    geometry: GeometryModel = Field(description="its metadata's geometry")


class Served(_Frozen):
    """What the capture says about who served it (counts of requests)."""

    fingerprints: dict[str, Count] = Field(description="model fingerprint -> requests it served")
    devices: dict[str, Count] = Field(description="device kind -> requests")
    engine_versions: dict[str, Count] = Field(description="engine version -> requests")
    first: Timestamp | None = Field(description="earliest captured_at")
    last: Timestamp | None = Field(description="latest captured_at")


class GoldenModel(_Frozen):
    """The model the captured blocks were re-run on (absent when a law stopped the audit first)."""

    spec: Text = Field(description="its model spec (--golden-model, or the config's [model])")
    fingerprint: Text = Field(description="its fingerprint, compared with every request's")
    name: str = Field(description="its human name")
    device_kind: Text = Field(description="where it re-ran the blocks")
    numerics_in_force: InForce = Field(description="the numeric settings torch had")


class ViolationModel(_Frozen):
    """One law broken by one captured request."""

    law: Text = Field(description="well-formed or rebased-inside")
    request_id: str = Field(description="the request's id")
    row: Count = Field(description="its row in the capture file")
    block_id: str | None = Field(description="the block it names (None: the request as a whole)")
    what: Text = Field(description="what is wrong, where (window / row of the block and of the request)")


class Laws(_Frozen):
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


class OpAudit(_Frozen):
    """One OP's served outputs against the golden model's re-run."""

    requests: Count = Field(description="captured requests of this OP")
    blocks: Count = Field(description="real blocks in them")
    rows_matched_by: Literal["block, window, speaker", "block, row", "block, window"] = Field(
        description="how served and re-run outputs are paired (block: request id/block id)"
    )
    unlabelled_rows: Count = Field(
        description="OP 1/2 rows of blocks without speaker labels, or with a (window, "
        "speaker) twice: matched by their index in the block"
    )
    verdict: OpVerdictModel | None = Field(description="None: not scored (see not_scored)")
    not_scored: str | None = Field(description="why the OP was not scored (None: scored)")

    @model_validator(mode="after")
    def _either(self) -> OpAudit:
        if (self.verdict is None) == (self.not_scored is None):
            raise ValueError("an OP is either scored (verdict) or not (not_scored, saying why)")
        return self


class AuditFile(_Frozen):
    """``audit.json``: a production capture judged: the laws, then every OP against the golden model."""

    kind: Literal["harness.audit"]  # a Literal type: the one value the file holds here, not a key read
    format: Literal[1] = Field(description="layout version; others are refused")
    created: Timestamp
    capture: CaptureRef
    served: Served
    golden_model: GoldenModel | None = Field(description="None: a law stopped the audit before any model ran")
    fingerprint_matches: bool | None = Field(
        description="every request served by the golden model (None: not compared, a law stopped the audit)"
    )
    tolerances: Tolerances = Field(description="the tolerances judged with ([tolerances], --tolerance)")
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
