"""Why a shape was refused: one cause from a closed list, the most fundamental that applies, with its evidence.

A refused shape can fail many checks at once: a lane whose answers move at random fails against the
golden, its slots disagree with each other and its repeats with the first run. Reading "a block's answer
must not depend on its slot" there sends an engineer after the wrong bug. So every refused shape gets
one cause (:data:`harness.data.schemas.refusals.CAUSES`, in this order of precedence):

1. the packer broke the packing laws (or they were not judged): nothing it packs may be promoted;
2. the golden was not reproduced: every comparison against it is suspect;
   (then, for a shape of which the corpus sent not one request of k blocks: not judged at its size, 8 below,
   with the full-request counts: whatever its partial packs showed was not this batch shape);
3. reads another block's audio: a block's answer at its own slot moved when its neighbours' audio changed, on a
   backend that repeats itself (or beyond its run-to-run difference): a leak, refused in every mode at any size;
4. a non-finite value, anywhere (plain lane, arrangements, duplicates, repeats);
5. not reproducible: a repeat differs from the first run beyond the mode's limits, or the shape is not
   accurate under load (the same request answered otherwise beside other traffic); the slot and
   numerics differences are then the lane's own noise;
6. depends on slot / neighbours / duplicates: a shuffled arrangement differs from the plain lane, the two
   copies of a block in one request differ, or an arrangement fails against the golden where the plain
   lane holds, beyond the mode's limits (without ``--repeats`` the line says this could be noise, unless the
   neighbour evidence showed the backend answering alike twice);
7. numerics at this batch shape beyond the tolerances: the plain lane against the golden;
8. not judged at its size: an OP with no windows or rows to judge, too few full k-block requests, or too
   few frames or rows for the sample-size bound.

A failed check is *non-finite* when its figure is (or it counts non-finite values), *of size* when it is a
sample-size bound with no failure behind it (3/n over too few units), and *real* otherwise. The evidence
line is built from the score's own figures, so promotion re-derives the cause exactly (:func:`check_cause`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.base.errors import LedgerError
from harness.data.schemas.files import LawsVerdict
from harness.data.schemas.refusals import (
    DEPENDS,
    GOLDEN,
    LAWS,
    LEAK,
    NON_FINITE,
    NOT_REPRODUCIBLE,
    NUMERICS,
    SIZE,
    Cause,
    RefusalCause,
)
from harness.data.schemas.results import CheckModel, OpVerdictModel, Reproduction, Score, ShapeScore
from harness.data.shape import Shape
from harness.evidence.kind_registry import kinds
from harness.evidence.request_evidence import RATE_SUFFIX, refusal
from harness.evidence.shape_gates import laws_refusal

NON_FINITE_METRICS = frozenset({"non_finite", "non_finite_rows"})
RULE = "a block's answer must not depend on its slot, its neighbours or its copies"
NOISE_HINT = (
    "without --repeats this could be the lane's own run-to-run noise: run with --repeats 2 (or more) to "
    "tell the two apart"
)


@dataclass(frozen=True)
class ScoreFacts:
    """What a shape's cause needs from the rest of its score."""

    laws: LawsVerdict | Mapping[str, Any]
    verification: Reproduction
    # shape key -> the refusal lines the kinds give from the score as a whole (the load sweep's), with their cause
    refusals: Mapping[str, Sequence[tuple[Cause, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, score: Score) -> ScoreFacts:
        """A finished score's facts: every kind's score-level refusals of every shape."""
        return cls(score.laws, score.verification, score_refusals(score))


def score_refusals(score: Score) -> dict[str, list[tuple[Cause, str]]]:
    """Per shape, the refusal lines every kind gives from the score as a whole."""
    return {k: [found for kind in kinds() for found in kind.refusals(score, Shape(k))] for k in score.shapes}


def kind_of(check: CheckModel) -> str:
    """A failed check's kind: 'non-finite', 'size' (a sample-size bound with no failure behind it) or 'real'."""
    if check.observed is None or check.metric in NON_FINITE_METRICS:
        return "non-finite"
    if check.metric.endswith(RATE_SUFFIX) and not check.offending:
        return "size"
    return "real"


def _first(verdict: OpVerdictModel, kind: str) -> CheckModel | None:
    return next((c for c in verdict.checks if c.ok is False and kind_of(c) == kind), None)


def _groups(k: int, shape: ShapeScore) -> Iterator[tuple[str, str, OpVerdictModel]]:
    """Every judged pair of the shape as (group, the line's head, verdict): the plain lane's, then every kind's
    (:meth:`harness.evidence.kind.EvidenceKind.pairs`)."""
    for _, v in sorted(shape.ops.items()):
        yield "plain", f"k={k}", v
    for kind in kinds():
        for pair in kind.pairs(Shape(k), shape):
            yield pair.group, pair.head, pair.verdict


def _found(kind: Cause, head: str, check: CheckModel, tail: str = "") -> RefusalCause:
    """The evidence line: the pair's head ('k=4' for the plain lane, 'k=4 duplicates (...):' for another pair),
    then the check's own line."""
    return RefusalCause(kind=kind, evidence=f"{head} {check.line()}{tail}")


def refusal_cause(k: int, shape: ShapeScore, facts: ScoreFacts) -> RefusalCause | None:
    """The refused shape's cause (module doc); None for a shape that passed. A refused shape with none of them
    is a bug (AssertionError: its verdict disagrees with its own evidence)."""
    if shape.verdict == "pass":
        return None
    laws = laws_refusal(facts.laws)
    if laws:
        return RefusalCause(kind=LAWS, evidence=laws)
    if not facts.verification.passed:
        return RefusalCause(kind=GOLDEN, evidence=facts.verification.summary)
    if shape.requests is not None and shape.requests.full == 0 and (unsized := refusal(k, shape.requests)):
        # not one request of k blocks was sent: whatever its partial packs showed, it was not judged at its size
        return RefusalCause(kind=SIZE, evidence=unsized)
    groups = list(_groups(k, shape))
    for group, head, v in groups:  # an answer that moves with its neighbours' audio, whatever the mode
        if group == "leak" and (c := _first(v, "real")) is not None:
            return _found(LEAK, head, c)
    for _, head, v in groups:
        if (c := _first(v, "non-finite")) is not None:
            return _found(NON_FINITE, head, c)
    for group, head, v in groups:
        if group == "repeats" and (c := _first(v, "real")) is not None:
            return _found(
                NOT_REPRODUCIBLE,
                head,
                c,
                " (the lane differs from itself: a nondeterministic kernel, a race, autotuning)",
            )
    if (line := _line(facts, k, NOT_REPRODUCIBLE)) is not None:  # the load sweep's
        return line
    plain_holds = all(_first(v, "real") is None for g, _, v in groups if g == "plain")
    tail = f"; {RULE}" + ("" if shape.repeats is not None or repeats_itself(shape) else f"; {NOISE_HINT}")
    for wanted in ("slots", "duplicates", "arranged"):  # the pair that shows it most directly first
        for group, head, v in groups:
            if group != wanted or (group == "arranged" and not plain_holds):
                continue
            if (c := _first(v, "real")) is not None:
                lead = head if group != "arranged" else f"{head[:-1]}, where the plain lane holds:"
                return _found(DEPENDS, lead, c, tail)
    if (line := _line(facts, k, DEPENDS)) is not None:
        return line
    if shape.input_differs:  # localisation: the windows differ before any layer runs, so no kernel numerics
        op, where = sorted(shape.input_differs.items())[0]
        return RefusalCause(
            kind=DEPENDS,
            evidence=f"k={k} OP {op}: the network's input already differs packed vs alone ({where}): the "
            "block's windows depend on where it sits in the request, before any layer runs (a packing or "
            "window-cutting bug, not numerics)",
        )
    for group, head, v in groups:
        if group in ("plain", "arranged") and (c := _first(v, "real")) is not None:
            return _found(NUMERICS, head, c)
    if (line := _line(facts, k, NUMERICS)) is not None:
        return line
    return _size(k, shape, groups, _line(facts, k, SIZE))


def repeats_itself(shape: ShapeScore) -> bool:
    """The shape's own evidence shows its backend answering alike twice: its neighbour lane answered every block
    bitwise as the plain lane did (two different requests, the same answers), or its control repeats did. A
    difference between slots is then no run-to-run noise, and the line does not suggest it."""
    ev = shape.neighbours
    if ev is None:
        return False
    return all(
        v.outcome == "bitwise" or (v.controls is not None and v.controls.sent > 0 and v.controls.reproduced)
        for v in ev.ops.values()
    )


def _line(facts: ScoreFacts, k: int, cause: Cause) -> RefusalCause | None:
    """The first score-level refusal line of ``cause`` a kind gives shape k (None: none)."""
    found = next((line for kind, line in facts.refusals.get(str(k), ()) if kind == cause), None)
    return None if found is None else RefusalCause(kind=cause, evidence=found)


def _size(
    k: int, shape: ShapeScore, groups: list[tuple[str, str, OpVerdictModel]], other: RefusalCause | None
) -> RefusalCause:
    """Not judged at its size: an OP with nothing to judge first (it explains too few full requests), then too
    few full k-block requests, then too few units for the sample-size bound."""
    sized = [(head, v, c) for _, head, v in groups if (c := _first(v, "size")) is not None]
    for head, v, c in sized:
        if not c.total:
            return _found(
                SIZE,
                f"{head.rstrip(':')} OP {v.op} has no {c.unit or 'units'} to judge (the golden "
                "holds none for these blocks, or the lane answered none):",
                c,
            )
    line = refusal(k, shape.requests)
    if line:
        return RefusalCause(kind=SIZE, evidence=line)
    if sized:
        head, _, c = sized[0]
        return _found(SIZE, head, c)
    if other is not None:
        return other
    raise AssertionError(f"k={k} is refused but none of its checks failed: {shape.reasons[:1]}")


def with_cause(k: int, shape: ShapeScore, facts: ScoreFacts) -> ShapeScore:
    """The shape's score with its cause (set for a refused shape, left out for one that passed)."""
    cause = refusal_cause(k, shape, facts)
    # the fields given, by name: an optional key left unset stays out of the file (OptionalKeys)
    given: dict[str, Any] = {name: getattr(shape, name) for name in shape.model_fields_set if name != "cause"}
    return ShapeScore(**given) if cause is None else ShapeScore(**given, cause=cause)


def check_cause(k: int, shape: ShapeScore, facts: ScoreFacts, where: str) -> None:
    """Promotion's re-derivation: a score's cause is the one its own figures give (a score written before causes
    were recorded has none, and is not asked for one)."""
    if "cause" not in shape.model_fields_set:
        return
    want = refusal_cause(k, shape, facts)
    if want != shape.cause:
        got = "none" if shape.cause is None else repr(shape.cause.kind)
        expected = "none" if want is None else repr(want.kind)
        raise LedgerError(
            f"{where}: shape k={k}: cause {got} is not the one its own figures give ({expected}): the "
            "score disagrees with itself"
        )
