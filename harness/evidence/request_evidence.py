"""Was shape k ever run at its size? Requests of exactly k real blocks, counted per shape and OP.

A packed shape k is promoted for requests of k blocks; the corpus may not give any. A 16-block
corpus run at k = 32 sends one 16-block pack and nothing of 32 blocks: its verdict says nothing
about the 32-block requests the engine would send once k = 32 is promoted. So a shape's evidence
counts only its **full** requests (exactly k real blocks; padding blocks never count, so with
``--pad-to-fixed`` a padded last pack is still partial), counted from the call log, per OP, the
minimum over OPs taken.

How many are enough (the rule, ``MIN_FULL_REQUESTS``, :func:`needed_blocks`, :func:`enough`): at
least one full request per OP, **and** the blocks inside full requests alone must satisfy the
sample-size gate the judges apply (the 95 % bound 3/n of every rate check): the gate's units per
block (audio frames, voiceprint rows) are the score's own totals over its blocks, so the blocks the
gate needs are ``ceil(units needed / units per block)``, rounded up to whole k-block requests. When
every request was full, the corpus is the evidence and the rate checks alone say whether it is
large enough (one failure, said once). The gate is the
real requirement (a minimum of two requests would refuse k = 4 on a 4-block corpus whose one full
request already carries the whole corpus); one request is the floor so that k is run at all.

Both the score (:mod:`harness.pipeline.score`) and promotion's re-derivation
(:mod:`harness.ledger.score_check`) use these functions, so a hand-edited verdict is refused.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.base.errors import LedgerError
from harness.data.call_record import CallRecord
from harness.data.schemas.files import RunLayout
from harness.data.schemas.results import OpVerdictModel, RequestEvidence, ShapeScore
from harness.data.shape import Shape
from harness.evidence.kind import KindDefaults, Recheck
from harness.judging.binomial import needed_at_zero

Call = TypeVar("Call", bound=Mapping[str, Any])  # one call-log record, passed through as it came

MIN_FULL_REQUESTS = 1  # full k-block requests per OP, at least (the gate's block count comes on top)
RATE_SUFFIX = (
    "_upper95"  # the judges' sample-size (rate) checks end so (harness.judging.judges.shared_checks.rate_check)
)


@dataclass(frozen=True)
class RequestCounts:
    """A shape's requests in the call log: full ones (exactly k real blocks) and the blocks in them, partial
    ones and theirs."""

    full: int = 0
    full_blocks: int = 0
    partial: int = 0
    partial_blocks: int = 0


class RequestCounter:
    """Counts the fast lanes' calls by (shape, OP): full (exactly k real blocks) or partial.

    :meth:`observe` passes a stream of calls through while counting, so the call log is read once
    (by :func:`harness.throughput.timing.summarize_calls` beside it)."""

    def __init__(self) -> None:
        # (shape, op) -> [full requests, blocks in them, partial requests, blocks in them]
        self._counts: dict[tuple[int, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    def add(self, given: Mapping[str, Any]) -> None:
        """One record of the call log (a mapping of its columns, read as a :class:`CallRecord`)."""
        call = CallRecord.of(given)
        if call.lane == "exact" or call.replica != 0 or call.variant:  # plain lanes only
            return
        k, op = int(call.shape), int(call.op)
        real = len(call.block_ids) or int(call.blocks)  # padding is never among the block ids
        entry = self._counts[(k, op)]
        if real == k:
            entry[0] += 1
            entry[1] += real
        else:
            entry[2] += 1
            entry[3] += real

    def observe(self, calls: Iterable[Call]) -> Iterator[Call]:
        for call in calls:
            self.add(call)
            yield call

    def counts(self, k: int, ops: Sequence[int]) -> RequestCounts:
        """``full``, ``full_blocks``, ``partial``, ``partial_blocks`` of shape k: full requests the minimum
        over ``ops`` (an OP whose calls carried fewer full requests limits the evidence), partial ones
        the maximum (a voiceprint OP sends no pack without rows, so its count can only be lower)."""
        per_op = [self._counts.get((int(k), int(op)), [0, 0, 0, 0]) for op in ops]
        if not per_op:
            return RequestCounts()
        full = min(per_op, key=lambda e: (e[0], e[1]))
        partial = max(per_op, key=lambda e: (e[2], e[3]))
        return RequestCounts(full=full[0], full_blocks=full[1], partial=partial[2], partial_blocks=partial[3])


def gate_blocks(op_verdicts: Mapping[Any, OpVerdictModel], blocks: int) -> int | None:
    """Blocks the sample-size gate needs, from a shape's OP verdicts judged over ``blocks``: for every
    rate check, the units 3/n needs at no failure over the units per block it saw; the largest.
    None when no rate check can say (none gated, or one saw no unit at all: it fails on its own)."""
    worst: int | None = None
    for verdict in op_verdicts.values():
        for c in verdict.checks:
            if not c.metric.endswith(RATE_SUFFIX) or c.relation != "<=" or c.allowed is None:
                continue
            units = needed_at_zero(float(c.allowed))
            total = c.total or 0
            if units is None or total <= 0 or blocks <= 0:
                return None
            need = -(-units * blocks // total)  # ceil(units / (total / blocks)) in integers
            worst = need if worst is None else max(worst, need)
    return worst


def needed_blocks(k: int, op_verdicts: Mapping[Any, OpVerdictModel], blocks: int) -> int | None:
    """Blocks in full k-block requests a shape needs: the gate's blocks (or nothing), at least
    ``MIN_FULL_REQUESTS`` requests, rounded up to whole requests."""
    gate = gate_blocks(op_verdicts, blocks)
    requests = max(MIN_FULL_REQUESTS, -(-(gate or 0) // k))
    return requests * k


def requests_entry(
    counts: RequestCounts, k: int, op_verdicts: Mapping[Any, OpVerdictModel], blocks: int
) -> RequestEvidence:
    """The score's ``shapes[k].requests``."""
    return RequestEvidence(
        full=counts.full,
        full_blocks=counts.full_blocks,
        partial=counts.partial,
        partial_blocks=counts.partial_blocks,
        needed_blocks=needed_blocks(k, op_verdicts, blocks),
    )


def enough(requests: RequestEvidence) -> bool:
    """At least one full request, and the gate's blocks inside full requests, unless there is no
    partial pack at all: then the full requests are the whole corpus, and the rate checks judge
    whether it is large enough themselves (one failure, said once, not twice)."""
    need = requests.needed_blocks
    return requests.full >= MIN_FULL_REQUESTS and (
        need is None or requests.full_blocks >= need or requests.partial == 0
    )


def refusal(k: int, requests: RequestEvidence) -> str | None:
    """The one reason line of a shape without enough full k-block requests (None: enough)."""
    if enough(requests):
        return None
    full, need = requests.full, requests.needed_blocks
    partial = (
        f", and {requests.partial} partial pack(s) of {requests.partial_blocks} block(s) that do not count"
        if requests.partial
        else ""
    )
    need_text = (
        f"{need} blocks in full {k}-block requests ({need // k} request(s), at least {MIN_FULL_REQUESTS}, "
        "and as many blocks as the sample-size gate needs)"
        if need
        else f"at least {MIN_FULL_REQUESTS} full {k}-block request(s)"
    )
    return (
        f"not judged at its size: the corpus gave {full} full {k}-block request(s) "
        f"({requests.full_blocks} blocks){partial}; promoting k={k} needs {need_text}: use a corpus of at "
        f"least {need or k} blocks (a multiple of {k}), or a smaller k"
    )


class RequestsKind(KindDefaults):
    """Every shape's request sizes: full k-block requests counted in the call log (module doc). Not optional:
    every shape's score holds them (``shapes[k].requests``), and its gate is one of the shape's own."""

    name = "requests"

    def counter(self, layout: RunLayout, blocks: Sequence[str]) -> RequestCounter:
        return RequestCounter()

    def entry(
        self, counted: Mapping[str, Any], k: int, verdicts: Sequence[OpVerdictModel], blocks: int
    ) -> RequestEvidence:
        """The shape's ``requests``, from what :meth:`counter` counted."""
        counter: RequestCounter = counted[self.name]
        return requests_entry(
            counter.counts(k, [int(v.op) for v in verdicts]), k, {str(v.op): v for v in verdicts}, blocks
        )

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        """The blocks a pass needs re-derived from the shape's own rate checks; the counts are the run's call
        log's (bound by the run's manifest digest). The gate itself is the shape's (its ``verdict``)."""
        req, k, blocks, where = shape.requests, shape.shape, recheck.blocks, recheck.where
        if req.full_blocks != req.full * k or req.full_blocks > blocks:
            raise LedgerError(
                f"{where}: {req.full} full {k}-block request(s) cannot hold "
                f"{req.full_blocks} blocks: the score disagrees with itself"
            )
        need = needed_blocks(k, shape.ops, blocks)
        if req.needed_blocks != need:
            raise LedgerError(
                f"{where}: needed_blocks is {req.needed_blocks!r}, but its own rate checks "
                f"over {blocks} blocks give {need!r}"
            )
        return True

    def junit(self, k: Shape, shape: ShapeScore) -> list[tuple[str, str]]:
        return [(f"requests_{key}", str(value)) for key, value in shape.requests.model_dump(mode="json").items()]
