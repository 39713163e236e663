"""What ``harness laws --json PATH`` writes: a packer judged on the packing laws, for the engine's CI to read.

The same facts as the text: the packer and the identity the ledger keys its promotions by, every law's status
with the count that decided it (on how many of how many examples it broke) and its minimal counterexample,
and the findings (broken laws whose counterexamples show one difference, numbers aside). The lines the text
prints are kept beside the facts (``line``, ``summary``), so a CI can quote them without rebuilding them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.data.schemas.base import Count, NonNeg, PackerIdentity, Positive, Strict, Timestamp

LawStatus = Literal["held", "broken", "not judged"]
LawName = Annotated[str, Field(min_length=1)]


@dataclass(frozen=True)
class DescribedPacker:
    """The two keys of a packer's ``describe()`` the harness reads itself: its ``name`` and its ``identity``
    (the key the ledger files its promotions under). ``describe()`` is the Packer protocol's free-form object
    (a team's packer adds its own keys, an external one its digest and parts), so it stays a mapping where it is
    carried; it is read by key here only, and by attribute everywhere else."""

    identity: object  # as described (any JSON value); None where absent or null
    name: object  # as described; None where absent or null
    has_identity: bool  # describe() has the key (an absent identity and a null one read differently)
    has_name: bool

    @classmethod
    def of(cls, describe: Mapping[str, Any]) -> DescribedPacker:
        # the Packer protocol's free-form describe(): its two keys the harness knows, read by name here only
        identity, name = describe.get("identity"), describe.get("name")
        return cls(identity, name, "identity" in describe, "name" in describe)

    @property
    def shown_name(self) -> object:
        """The name as a report shows it: ``'?'`` where describe() names none."""
        return self.name if self.has_name else "?"


class LawsPacker(Strict):
    name: str = Field(description="the packer as the command line named it (describe()['name'])")
    identity: PackerIdentity | None = Field(
        description="the key the ledger and promoted-shapes.json file the packer's promotions under "
        "(null: a packer object whose describe() names none)"
    )
    # the Packer protocol's describe(): its keys are the packer's own (an external packer's digest, parts, version)
    describe: dict[str, Any] = Field(description="the packer's describe(): digest, its parts, name and version, ...")


class LawBlock(Strict):
    id: str
    op: Literal[0, 1, 2]
    span_length: Count
    offsets: list[int]
    valid: list[int]
    rows: Count
    idx: list[int] | None = Field(description="OP 1/2: the block's window of each row; null for OP 0")


class LawSegment(Strict):
    block_id: str
    padding: bool
    span_start: int
    span_length: int
    window_start: int
    windows: int
    row_start: int
    rows: int


class LawRequest(Strict):
    """The request the packer produced for a counterexample (its audio and weights left out)."""

    op: Literal[0, 1, 2]
    k: int = Field(description="segments in the packer's layout, padding included")
    span_length: Count
    offsets: list[int]
    valid: list[int]
    idx: list[int] | None
    segments: list[LawSegment]


class LawCounterexample(Strict):
    blocks: list[LawBlock] = Field(min_length=1, description="the minimal block set, in pack order")
    params: dict[str, int | None] = Field(
        description="pad_to (padded to k), extra (padding blocks added), cut (split after that many blocks)"
    )
    what: str = Field(description="what differed, as the text's 'what differed:' line")
    answer_error: str | None = Field(
        description="the packer's answer was malformed or a refusal: what was wrong with it (null: it answered, "
        "and the law's own comparison failed)"
    )
    found_after: Positive = Field(description="examples tried up to the first that broke the law")
    reproducible: bool = Field(description="false: the packer answered the same blocks differently on a second call")
    source: Literal["boundary", "search"] = Field(
        description="boundary: a fixed boundary example, cut down by deleting blocks; search: hypothesis's, shrunk"
    )
    packed: LawRequest | None = Field(description="the request the packer produced (null: it answered none)")
    line: str = Field(description="the counterexample in one line, as on the law's line of the text")


class LawResult(Strict):
    law: LawName
    statement: str
    status: LawStatus = Field(description="held; broken; not judged (a custom law skipped examples: never held)")
    tried: Count = Field(description="examples the law was judged on (every boundary one, then the search's)")
    broken_on: Count = Field(description="examples that broke it (the search stops at its first)")
    judged: Count = Field(description="examples on which it held before its first counterexample")
    skipped: Count = Field(description="examples a custom law could not judge")
    boundary: Count = Field(description="fixed boundary examples among those tried")
    seconds: NonNeg
    notes: list[str]
    counterexample: LawCounterexample | None = Field(description="the minimal one (broken laws only)")
    finding: Count | None = Field(description="index into findings (broken laws only)")
    line: str = Field(description="the law's line of the text")

    @model_validator(mode="after")
    def _consistent(self) -> LawResult:
        broken = self.status == "broken"
        if broken != (self.counterexample is not None) or broken != (self.finding is not None):
            raise ValueError("a broken law, and only a broken law, has a counterexample and a finding")
        if broken != (self.broken_on > 0) or self.broken_on > self.tried:
            raise ValueError("broken_on is between 1 and tried exactly when the law is broken")
        if self.status == "held" and (self.judged == 0 or self.skipped):
            raise ValueError("a held law was judged on at least one example and skipped none")
        return self


class LawFinding(Strict):
    laws: list[LawName] = Field(min_length=1, description="the laws its counterexamples broke, in the laws' order")
    shown: LawName = Field(description="the law whose counterexample the text shows (the fewest blocks)")
    malformed_answer: bool = Field(description="the packer's answer was off the contract or a refusal")
    difference: str = Field(description="what differed in the counterexample shown")
    text: list[str] = Field(
        description="the finding's section of the text, line by line: its laws, the minimal block set, the "
        "request the packer produced and what differed"
    )


class LawsReportFile(Strict):
    """``harness laws --json PATH``: every packing law judged on one packer, with its counts and counterexamples."""

    kind: Literal["harness.laws-report"]  # a Literal type: the file's kind, declared once
    format: Literal[1]
    created: Timestamp
    harness_version: str
    packer: LawsPacker
    examples: Positive = Field(description="examples per law the search drew at most (--examples)")
    seed: int
    max_blocks: Positive = Field(description="the largest list of blocks (and pad_to) every law was judged at")
    verdict: Literal["hold", "broken", "not-judged"] = Field(
        description="hold: every law held, each judged on every example (the exit status 0); otherwise 1"
    )
    seconds: NonNeg
    laws: list[LawResult] = Field(min_length=1)
    findings: list[LawFinding]
    summary: str = Field(description="the text's last line")

    @model_validator(mode="after")
    def _consistent(self) -> LawsReportFile:
        names = [r.law for r in self.laws]
        if len(set(names)) != len(names):
            raise ValueError("each law is listed once")
        held = all(r.status == "held" for r in self.laws)
        broken = any(r.status == "broken" for r in self.laws)
        expected = "hold" if held else "broken" if broken else "not-judged"
        if self.verdict != expected:
            raise ValueError(f"verdict is {expected!r} by the laws' statuses, not {self.verdict!r}")
        grouped = [law for f in self.findings for law in f.laws]
        if sorted(grouped) != sorted(r.law for r in self.laws if r.status == "broken"):
            raise ValueError("every broken law is in exactly one finding, and no other law")
        for r in self.laws:
            if r.finding is not None and (
                r.finding >= len(self.findings) or r.law not in self.findings[r.finding].laws
            ):
                raise ValueError(f"law {r.law!r}: its finding {r.finding} does not list it")
        if any(f.shown not in f.laws for f in self.findings):
            raise ValueError("a finding shows the counterexample of one of its laws")
        return self
