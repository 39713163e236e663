"""The registered kinds of evidence, in the order every generic path asks them.

The harness's own kinds first, in the order a shape's score is built (request sizes, the plain lane's drift
from the golden, repeats, neighbours, arrangements, the load sweep); a kind defined elsewhere joins with
:func:`register` (after them) and is scored, re-derived at promotion, reported and in JUnit through the same
paths (:mod:`harness.evidence.kind`).

A team's kind is named in the release configuration (``[evidence] kinds = ["package.module:Attr"]``) and joins
for one command only (:func:`loaded`): the registry is the process's, and a kind left behind by one command (or
one test) would score, refuse or render in the next. What scored a file is recorded with it by spec
(:func:`loaded_specs`), so promotion loads the same kinds from the score alone.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Iterator, Sequence

from harness.base.errors import HarnessError
from harness.data.schemas.results import ShapeScore
from harness.evidence.arrangements_kind import ArrangementsKind
from harness.evidence.golden_drift import GoldenDriftKind
from harness.evidence.kind import EvidenceKind, Floors
from harness.evidence.load_evidence import LoadKind
from harness.evidence.neighbours_kind import NeighboursKind
from harness.evidence.repeat_evidence import RepeatsKind
from harness.evidence.request_evidence import RequestsKind
from harness.packers.callable import load_object

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
# what a kind must answer (harness.evidence.kind.EvidenceKind): an object lacking one would fail mid-score
METHODS = ("lanes", "counter", "scorer", "pairs", "refusals", "holds", "warning_keys", "report", "junit")
_registered: list[EvidenceKind] = []
_specs: dict[str, EvidenceKind] = {}  # the kinds loaded from a spec (loaded), by spec, in the order they joined


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


def loaded_specs() -> tuple[str, ...]:
    """The specs of the kinds :func:`loaded` holds now, in order: what a run or score made now records."""
    return tuple(_specs)


def load_kind(spec: str, where: str = "[evidence] kinds", error: type[HarnessError] = HarnessError) -> EvidenceKind:
    """The kind ``package.module:Attr`` names (a class is instantiated with no arguments), imported as a model or
    packer spec is (the working directory importable, like ``python -m``); anything else is one ``error`` line
    naming ``where`` and the spec."""
    head = f"{where}: {spec!r}"
    if os.getcwd() not in sys.path:  # like `python -m`: a kind in the working directory is importable
        sys.path.append(os.getcwd())
    target = load_object(spec, f"{where}:", error, "'package.module:Attr' (an evidence kind, or its class)")
    attr = spec.partition(":")[2]
    if inspect.isclass(target):
        try:
            target = target()
        except Exception as exc:
            raise error(f"{head}: cannot instantiate {attr}: {type(exc).__name__}: {exc}") from None
    missing = [m for m in METHODS if not callable(getattr(target, m, None))]
    name = getattr(target, "name", None)
    if missing or not isinstance(name, str) or not name:
        lacks = f"lacks {', '.join(missing)}" if missing else "has no non-empty str name"
        raise error(
            f"{head}: a {type(target).__name__} is not an evidence kind ({lacks}; subclass "
            "harness.evidence.kind.KindDefaults)"
        )
    return target  # type: ignore[return-value]  # checked above: the protocol's methods and a name


@contextlib.contextmanager
def loaded(
    specs: Sequence[str], where: str = "[evidence] kinds", error: type[HarnessError] = HarnessError
) -> Iterator[tuple[EvidenceKind, ...]]:
    """The kinds ``specs`` name registered while the block runs, and the registry as it was afterwards. A spec
    already loaded (the nightly's own promotion of the score it just made) is not loaded twice; a name taken by a
    built-in kind or by another kind is one ``error`` line."""
    before, before_specs = list(_registered), dict(_specs)
    try:
        for spec in specs:
            if spec in _specs:
                continue
            kind = load_kind(spec, where, error)
            owner = next((k for k in kinds() if k.name == kind.name), None)
            if owner is not None:
                by = next((s for s, k in _specs.items() if k is owner), None)
                what = "a built-in kind" if owner in BUILT_IN else f"{by!r}" if by else "a registered kind"
                raise error(f"{where}: {spec!r}: its name {kind.name!r} is taken by {what}")
            _registered.append(kind)
            _specs[spec] = kind
        yield tuple(_specs[s] for s in specs)
    finally:
        _registered[:] = before
        _specs.clear()
        _specs.update(before_specs)


def warning_keys(shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
    """(kind, OP) of every warning a shape's evidence must carry, from its stored verdicts alone: what promotion
    re-derives."""
    keys: set[tuple[str, int]] = set()
    for kind in kinds():
        keys |= kind.warning_keys(shape, floors)
    return keys
