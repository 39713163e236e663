"""The registered kinds of evidence, in the order every generic path asks them.

The harness's own kinds first, in the order a shape's score is built (request sizes, the plain lane's drift
from the golden, repeats, neighbours, arrangements, the load sweep); a kind defined elsewhere joins with
:func:`register` (after them) and is scored, re-derived at promotion, reported and in JUnit through the same
paths (:mod:`harness.evidence.kind`).
"""

from __future__ import annotations

from harness.data.errors import HarnessError
from harness.data.schemas.results import ShapeScore
from harness.evidence.arrangements_kind import ArrangementsKind
from harness.evidence.golden_drift import GoldenDriftKind
from harness.evidence.kind import EvidenceKind, Floors
from harness.evidence.load_evidence import LoadKind
from harness.evidence.neighbours_kind import NeighboursKind
from harness.evidence.repeat_evidence import RepeatsKind
from harness.evidence.request_evidence import RequestsKind

REQUESTS = RequestsKind()
# the neighbours after the repeats (a moved answer is judged against the shape's own run-to-run difference) and
# before the arrangements (whose slot warnings say what the neighbours found)
BUILT_IN: tuple[EvidenceKind, ...] = (
    REQUESTS,
    GoldenDriftKind(),
    RepeatsKind(),
    NeighboursKind(),
    ArrangementsKind(),
    LoadKind(),
)
_registered: list[EvidenceKind] = []


def kinds() -> tuple[EvidenceKind, ...]:
    """Every kind, built-in first, then the registered ones in the order they joined."""
    return (*BUILT_IN, *_registered)


def register(kind: EvidenceKind) -> EvidenceKind:
    """Add ``kind`` (after the built-in ones); a name already taken is refused."""
    taken = {k.name for k in kinds()}
    if not kind.name or kind.name in taken:
        raise HarnessError(f"evidence kind {kind.name!r}: the name is empty or taken (taken: {sorted(taken)})")
    _registered.append(kind)
    return kind


def unregister(name: str) -> None:
    """Remove a registered kind (built-in kinds stay)."""
    _registered[:] = [k for k in _registered if k.name != name]


def warning_keys(shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
    """(kind, OP) of every warning a shape's evidence must carry, from its stored verdicts alone: what promotion
    re-derives."""
    keys: set[tuple[str, int]] = set()
    for kind in kinds():
        keys |= kind.warning_keys(shape, floors)
    return keys
