"""What a kind of evidence is: the one seam every kind is scored, re-derived and rendered through.

A packed shape's verdict rests on its plain lane against the golden, and on more evidence beside it: its
request sizes, its repeats, its arrangements (other slots, other neighbours, a block twice), its answers
under load. Each kind is an :class:`EvidenceKind`, registered once (:mod:`harness.evidence.kind_registry`), and
the generic paths ask every registered kind, in order, the same questions:

- **lanes**: which of the run's lanes it reads at shape k (beyond the plain and exact lanes), from the run
  manifest's fields (``evidence.variants`` names the variant lanes a run holds);
- **scorer**: a :class:`ShapeEvidence` per shape, fed batch by batch beside the plain lane, in the same pass
  over the golden (``add``), then asked for the shape's score with its evidence (``apply``): its typed
  result stored, its reasons added, the verdict refused when it fails, its warnings added;
- **calls**: what it counts in the run's call log (one pass shared by every kind);
- **pairs** and **refusals**: its judged pairs and score-level refusal lines, each in a category of the
  closed list of causes (:mod:`harness.evidence.refusal` picks the most fundamental);
- **holds**: promotion's re-derivation from the score alone (:mod:`harness.ledger.score_check`): every limit
  from the score's tolerances, every ``ok`` from its figures; a score that disagrees with itself is a
  LedgerError;
- **warning_keys**: the (kind, OP) warnings its stored verdicts must carry;
- **report** and **junit**: a section of the sign-off report and JUnit properties, through the generic
  renderers (:mod:`reports.evidence_sections`, :mod:`reports.junit`).

A kind defined outside the harness stores its result under ``shapes[k].more_evidence[<name>]`` (absent when
no such kind is registered, so a score of today's kinds is the same file): built-in kinds keep their own
typed keys (``requests``, ``repeats``, ``arrangements``, the score's ``load``). A team names its kinds in the
release configuration (``[evidence] kinds``, :func:`harness.evidence.kind_registry.loaded`); the score records
them, and promotion refuses a ``more_evidence`` entry that no kind it could load re-derives
(``examples/evidence_kind_example.py`` is one such kind, whole).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness.data.geometry import Geometry
from harness.data.judge_limits import LimitSet, OpLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.files import RunLayout, RunManifest
from harness.data.schemas.refusals import Cause
from harness.data.schemas.results import OpVerdictModel, Score, ShapeScore
from harness.data.shape import Shape
from harness.data.tolerances import Tolerances

Floors = Mapping[int, Mapping[str, Any]]
# the score check's check of one verdict against its limits (None: its own): check(verdict, limits, where)
CheckOp = Callable[[OpVerdictModel, LimitSet | None, str], None]  # a verdict, the limits it must hold, where
Limits = Mapping[Op, OpLimits]
# What a judged pair shows when it fails (refusal.py's categories, most fundamental first): the plain lane's
# numerics, an answer that moves with the neighbours' audio ("leak"), a lane that differs from itself ("repeats"),
# a block whose answer depends on where it sits ("slots", "duplicates", "arranged": an arrangement against the
# golden where the plain lane holds).
PairGroup = Literal["plain", "leak", "repeats", "slots", "duplicates", "arranged"]


@dataclass(frozen=True)
class ShapeSetting:
    """What one shape's evidence is scored with: the same for every kind."""

    k: int
    ops: tuple[Op, ...]
    geometry: Geometry
    tolerances: Tolerances
    floors: Floors  # the golden's own noise floors, per OP
    limits: Limits  # every pair's limits: the mode's (harness.evidence.rule.evidence_limits)
    voiceprint_inputs: VoiceprintInputs  # isolated | chained
    layout: RunLayout  # the run manifest's scoring fields (shapes, ops, mode, evidence)


@dataclass(frozen=True)
class ShapeFinish:
    """What is known when a shape's score is built: its plain lane's verdicts, and what the kinds counted in
    the call log (by kind name)."""

    plain: Sequence[OpVerdictModel]
    counted: Mapping[str, Any] = field(default_factory=dict)
    run: RunManifest | None = None  # the run's manifest (its neighbour_controls, ...); None: a score without a run


@dataclass(frozen=True)
class JudgedPair:
    """One judged pair of a shape's evidence: its category, the line's head ('k=4 duplicates (...):'), and
    its verdict of one OP."""

    group: PairGroup
    head: str
    verdict: OpVerdictModel


@dataclass(frozen=True)
class Recheck:
    """What promotion re-derives a shape's evidence with: the score's tolerances and the golden's floors,
    and the score check's own check of one verdict against its limits (``check(verdict, limits, where)``)."""

    tolerances: Tolerances
    floors: Floors
    check: CheckOp
    where: str
    blocks: int  # the blocks the score judged
    shapes: Mapping[str, ShapeScore] = field(default_factory=dict)  # every shape of the score (run-wide evidence)


@dataclass(frozen=True)
class ReportSection:
    """A kind's section of the sign-off report, rendered by the generic template: a title, a table, lines."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[str, ...] = ()


class ShapeEvidence(Protocol):
    """One shape's scorer of one kind: fed every batch beside the plain lane, then applied to the shape."""

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        """One batch: the golden's outputs and every lane's of the same blocks (golden order)."""

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        """The shape's score with this evidence: stored, its reasons added, refused when it fails."""


class CallCounter(Protocol):
    """What a kind counts in the run's call log: every call passes through ``observe`` once, as a read-only
    mapping of the call log's columns (``call["wall_s"]``; the log's own rows are
    :class:`harness.data.call_record.CallRecord`, readable by attribute too)."""

    def observe(self, calls: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]: ...


class EvidenceKind(Protocol):
    """A kind of evidence (module doc). ``name``: its key (``requests``, ``repeats``, ``arrangements``,
    ``load``, or a registered kind's own)."""

    name: str

    def lanes(self, layout: RunLayout, k: Shape) -> list[str]:
        """The run's lanes it reads at shape k, beyond the plain and exact lanes."""
        ...

    def counter(self, layout: RunLayout, blocks: Sequence[str]) -> CallCounter | None:
        """What it counts in the call log (None: nothing); its result reaches ``apply`` as
        ``finish.counted[name]``."""
        ...

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        """Its scorer of one shape (None: this run holds no such evidence for the shape)."""
        ...

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        """Its judged pairs of a scored shape, in the order a cause looks at them."""
        ...

    def refusals(self, score: Score, k: Shape) -> list[tuple[Cause, str]]:
        """Refusal lines it gives a shape from the score as a whole (the load sweep's), with their cause."""
        ...

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        """Promotion's re-derivation: True when its evidence does not refuse the shape."""
        ...

    def warning_keys(self, shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
        """(kind, OP) of every warning its stored verdicts must carry."""
        ...

    def report(self, score: Score) -> ReportSection | None:
        """Its section of the sign-off report through the generic renderer (None: none, or a built-in
        section renders it)."""
        ...

    def junit(self, k: Shape, shape: ShapeScore) -> list[tuple[str, str]]:
        """JUnit properties of each of the shape's OP cases (name, value)."""
        ...


class KindDefaults:
    """The questions a kind may leave unanswered: no lanes, nothing counted, no pairs, no warnings, no
    section, no properties. A kind subclasses it and answers what it measures."""

    name = ""

    def lanes(self, layout: RunLayout, k: Shape) -> list[str]:
        return []

    def counter(self, layout: RunLayout, blocks: Sequence[str]) -> CallCounter | None:
        return None

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        return None

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        return iter(())

    def refusals(self, score: Score, k: Shape) -> list[tuple[Cause, str]]:
        return []

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        return True

    def warning_keys(self, shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
        return set()

    def report(self, score: Score) -> ReportSection | None:
        return None

    def junit(self, k: Shape, shape: ShapeScore) -> list[tuple[str, str]]:
        return []


def with_evidence(
    score: ShapeScore,
    update: Mapping[str, Any],
    reasons_first: Sequence[str] = (),
    reasons_after: Sequence[str] = (),
    refused: bool = False,
    warnings: Sequence[Any] = (),
) -> ShapeScore:
    """``score`` with a kind's evidence: ``update`` (its keys), its reasons before and after the others', the
    verdict refused when ``refused``, its warnings after the others' (the key left out while there is none)."""
    given = {name: getattr(score, name) for name in score.model_fields_set}
    extra = {"warnings": [*score.warnings, *warnings]} if warnings else {}
    return ShapeScore(
        **{
            **given,
            **update,
            "reasons": [*reasons_first, *score.reasons, *reasons_after],
            "verdict": "fail" if refused else score.verdict,
            **extra,
        }
    )


# a model_copy update, ShapeScore's fields by name; a team's kind's result is its own free-form JSON object
def more_evidence(score: ShapeScore, name: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The ``update`` that stores a registered kind's result under ``shapes[k].more_evidence[name]`` (a
    ``model_copy`` update: the model's fields by name; a registered kind's result is its own JSON object)."""
    return {"more_evidence": {**score.more_evidence, name: dict(result)}}
