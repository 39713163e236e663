"""What judging a packer found, as data (for tests and JSON) and as text (for people and CI logs).

The text is one line per law, then one section per *finding*. A law's line says its status and, when it
is broken, on how many of how many examples, and its minimal counterexample in one line. A finding is a
difference that reads the same, numbers aside, in every law it broke: a packer with one bug breaks
several laws with it (an answer off the contract is a counterexample of every law that asked for it, so
a packer that drops every block after the 16th breaks all 8), and the same counterexample printed under
each law buried the one difference worth reading. Each finding is shown once, on its smallest
counterexample, the way a packer's author needs to fix it: the *minimal* block set (ids, span lengths and
audio, OFFSETS, VALID, rows), the request the packer produced for it (tensors and layout), and what
differed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from harness.data.blocks import Block
from harness.data.schemas.laws_file import DescribedPacker
from harness.laws.boundary import LawParams
from harness.laws.law_display import (
    BlockJson,
    RequestJson,
    block_dict,
    describe_block,
    describe_params,
    describe_request,
    request_dict,
)
from harness.packers.packing import PackedRequest

HELD, BROKEN, NOT_JUDGED = "held", "broken", "not judged"
LINE_DIFFERENCE = 240  # characters of a counterexample's difference on its law's line (its section has it whole)
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass(frozen=True)
class Counterexample:
    """The minimal example breaking a law, and what the packer made of it."""

    blocks: tuple[Block, ...]
    params: dict[str, Any]  # the law's keyword arguments by name (pad_to, cut, extra)
    what: str
    packed: PackedRequest | None
    found_after: int  # examples tried before the first failure (shrinking not counted)
    reproducible: bool = True
    source: str = "search"  # "search": hypothesis's, shrunk; "boundary": a fixed example, blocks deleted
    answer_error: str | None = None  # the answer was malformed or a refusal: what was wrong with it (LawBroken)

    @property
    def law_params(self) -> LawParams:
        """The kit's own parameters of the example (pad_to, cut, extra), typed."""
        return LawParams.of(self.params)

    @property
    def difference(self) -> str:
        """What differed, the packer's name and the request left out where the answer itself was malformed."""
        return f"malformed answer: {self.answer_error}" if self.answer_error is not None else self.what

    @property
    def finding(self) -> str:
        """The difference, numbers aside: counterexamples of one finding read the same (``OFFSETS[8]=132: offset
        is past the end of SPAN (length 131)`` on one law, ``... =194 ... 193`` on another)."""
        return _NUMBER.sub("#", self.difference)

    def line(self) -> str:
        """The counterexample in one line: its size, OP, padding or cut, where it came from, what differed."""
        kind = ", a boundary example cut down" if self.source == "boundary" else ""
        text = self.difference if self.reproducible else f"not reproducible: {self.difference}"
        if len(text) > LINE_DIFFERENCE:
            text = text[: LINE_DIFFERENCE - 3] + "..."
        return (
            f"minimal counterexample of {len(self.blocks)} block(s), OP {int(self.blocks[0].op)}"
            f"{describe_params(self.law_params, self.blocks)}{kind}: {text}"
        )


class CounterexampleJson(TypedDict):
    """A counterexample as :meth:`LawOutcome.to_dict` gives it."""

    blocks: list[BlockJson]
    params: dict[str, int | None]  # the law's keyword arguments, as LawCounterexample.params declares them
    what: str
    answer_error: str | None
    found_after: int
    reproducible: bool
    source: str
    packed: RequestJson | None


class OutcomeJson(TypedDict):
    """A law's outcome as :meth:`LawOutcome.to_dict` gives it (``counterexample`` only when broken)."""

    law: str
    statement: str
    status: str
    judged: int
    skipped: int
    boundary: int
    broken_on: int
    tried: int
    notes: list[str]
    counterexample: NotRequired[CounterexampleJson]


class LawsReportJson(TypedDict):
    """The report as :meth:`LawsReport.to_dict` gives it."""

    packer: dict[str, object]  # the packer's describe(): the Packer protocol's free-form JSON object
    identity: str | None
    examples: int
    seed: int
    max_blocks: int
    ok: bool
    seconds: float
    laws: list[OutcomeJson]
    findings: list[list[str]]


@dataclass(frozen=True)
class LawOutcome:
    """One law judged on one packer."""

    law: str
    statement: str
    status: str  # HELD, BROKEN or NOT_JUDGED (never ok: a custom law skipped examples, or none was judged)
    judged: int  # examples on which the law held (before its first counterexample)
    skipped: int  # examples a custom law could not judge (NotJudged); the kit's laws never skip one
    notes: tuple[str, ...] = ()
    counterexample: Counterexample | None = None
    boundary: int = 0  # of all examples, the fixed boundary ones (harness.laws.boundary) run first
    broken_on: int = 0  # examples that broke the law: every boundary one that did, or the search's first
    tried: int = 0  # examples the law was judged on: every boundary one, then the search's up to its first break
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Held, on at least one example, none of them skipped."""
        return self.status == HELD and self.judged > 0 and not self.skipped

    def line(self, width: int = 0) -> str:
        """The law's line of the report (names padded to ``width``): its status, and the count and
        counterexample that decided it."""
        status = self.status if self.status == HELD else self.status.upper()
        return f"  {self.law:<{width}}  {status:<10} {self.detail()}"

    def brief(self) -> str:
        """The same line without the table's padding: ``round-trip BROKEN on 9 of 12 examples; ...``."""
        return f"{self.law} {self.status if self.status == HELD else self.status.upper()} {self.detail()}"

    def detail(self) -> str:
        note = "".join(f"; {n}" for n in self.notes)
        if self.status == HELD:
            return f"({self.judged} examples, {self.boundary} of them boundary{note})"
        if self.status == BROKEN:
            c = self.counterexample
            assert c is not None, "the runner records a counterexample with every broken law"
            search = "" if c.source == "boundary" else " (the search stops at its first)"
            return f"on {self.broken_on} of {self.tried} examples{search}; {c.line()}" + (
                f" [{note[2:]}]" if note else ""
            )
        return (
            f"(judged on {self.judged} example(s), {self.skipped} could not be judged: counted as a failure, "
            f"never as held{note})"
        )

    def to_dict(self) -> OutcomeJson:
        """The outcome as the laws report's JSON holds it (its counterexample only when broken)."""
        out: OutcomeJson = {
            "law": self.law,
            "statement": self.statement,
            "status": self.status,
            "judged": self.judged,
            "skipped": self.skipped,
            "boundary": self.boundary,
            "broken_on": self.broken_on,
            "tried": self.tried,
            "notes": list(self.notes),
        }
        c = self.counterexample
        if c is None:
            return out
        return {
            **out,
            "counterexample": CounterexampleJson(
                blocks=[block_dict(b) for b in c.blocks],
                params=c.params,
                what=c.what,
                answer_error=c.answer_error,
                found_after=c.found_after,
                reproducible=c.reproducible,
                source=c.source,
                packed=None if c.packed is None else request_dict(c.packed),
            ),
        }


@dataclass(frozen=True)
class Finding:
    """Broken laws whose counterexamples show one difference (numbers aside), and the one shown: the smallest."""

    laws: tuple[str, ...]
    shown: LawOutcome

    @property
    def counterexample(self) -> Counterexample:
        assert self.shown.counterexample is not None
        return self.shown.counterexample

    def render(self) -> list[str]:
        if len(self.laws) == 1:
            head = f"law {self.shown.law} BROKEN: {self.shown.statement}"
        else:
            head = (
                f"laws {', '.join(self.laws)} BROKEN by one finding ({len(self.laws)} laws; shown once, on the "
                f"smallest counterexample, {self.shown.law}'s)"
            )
        return [head, *counterexample_lines(self.counterexample)]


def findings(outcomes: tuple[LawOutcome, ...] | list[LawOutcome]) -> list[Finding]:
    """The broken laws grouped by finding, in the laws' order; each shown on its fewest blocks (the first law's
    of those)."""
    groups: dict[str, list[LawOutcome]] = {}
    for o in outcomes:
        if o.status == BROKEN and o.counterexample is not None:
            groups.setdefault(o.counterexample.finding, []).append(o)
    return [
        Finding(tuple(o.law for o in group), min(group, key=lambda o: len(o.counterexample.blocks)))  # type: ignore[union-attr]
        for group in groups.values()
    ]


@dataclass(frozen=True)
class LawsReport:
    """Every law judged on one packer: ``ok`` only when each one held, judged on every example (never
    when one is broken or not judged; nor when there is no law at all)."""

    packer: dict[str, Any]  # the packer's describe(): the Packer protocol's free-form object
    examples: int
    seed: int
    outcomes: tuple[LawOutcome, ...]
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    max_blocks: int = 64  # the largest list of blocks (and pad_to) every law was judged at

    @property
    def ok(self) -> bool:
        return bool(self.outcomes) and all(o.ok for o in self.outcomes)

    @property
    def broken(self) -> list[LawOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def described(self) -> DescribedPacker:
        """The packer's name and identity, as its describe() gives them."""
        return DescribedPacker.of(self.packer)

    @property
    def identity(self) -> str | None:
        """The packer's identity, the key of its promotions in the ledger (None: its describe() names none)."""
        value = self.described.identity
        return str(value) if value else None

    @property
    def verdict(self) -> str:
        """``hold``, ``broken`` (a law broken) or ``not-judged`` (none broken, one not judged on every example)."""
        if self.ok:
            return "hold"
        return "broken" if any(o.status == BROKEN for o in self.outcomes) else "not-judged"

    def to_dict(self) -> LawsReportJson:
        """The report as ``harness laws --json`` writes it."""
        return {
            "packer": self.packer,
            "identity": self.identity,
            "examples": self.examples,
            "seed": self.seed,
            "max_blocks": self.max_blocks,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "laws": [o.to_dict() for o in self.outcomes],
            "findings": [list(f.laws) for f in findings(self.outcomes)],
        }

    def head(self) -> list[str]:
        """What was judged, and the identity the ledger keys the packer's promotions by."""
        identity = self.identity or "none (its describe() names no identity)"
        return [
            f"packing laws for packer {self.described.shown_name!r}: boundary examples up to "
            f"{self.max_blocks} blocks, then up to {self.examples} examples per law, seed {self.seed}",
            f"packer identity: {identity} (the ledger and promoted-shapes.json key its promotions by it)",
        ]

    def summary(self) -> str:
        """The last line: every law held, or which did not."""
        failed = self.broken
        if self.ok:
            return f"all {len(self.outcomes)} laws hold ({self.seconds:.1f} s)"
        return (
            f"{len(failed)} of {len(self.outcomes)} laws broken or not judged: "
            f"{', '.join(o.law for o in failed)} ({self.seconds:.1f} s)"
        )

    def render(self) -> str:
        width = max((len(o.law) for o in self.outcomes), default=0)
        lines = [*self.head(), *(o.line(width) for o in self.outcomes)]
        for finding in findings(self.outcomes):
            lines += ["", *finding.render()]
        lines += ["", self.summary()]
        return "\n".join(lines)


def render_broken(outcome: LawOutcome) -> list[str]:
    """One broken law's section: its statement, then its counterexample (:func:`counterexample_lines`)."""
    c = outcome.counterexample
    assert c is not None
    return [f"law {outcome.law} BROKEN: {outcome.statement}", *counterexample_lines(c)]


def counterexample_lines(c: Counterexample) -> list[str]:
    """The minimal block set, the request the packer produced for it, and what differed."""
    lines = []
    if not c.reproducible:
        lines.append("  (not reproducible: the packer answered the same blocks differently on a second call)")
    params = describe_params(c.law_params, c.blocks)
    lines.append(f"  minimal block set: {len(c.blocks)} block(s), OP {int(c.blocks[0].op)}{params}")
    lines.extend(f"    {describe_block(b)}" for b in c.blocks)
    if c.packed is None:
        lines.append("  request the packer produced: none (it failed before answering with one)")
    else:
        lines.append("  request the packer produced:")
        lines.extend(f"    {line}" for line in describe_request(c.packed))
    lines.append(f"  what differed: {c.what}")
    return lines
