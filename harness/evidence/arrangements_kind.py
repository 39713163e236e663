"""The arrangements as a kind of evidence (:mod:`harness.evidence.kind`): the seam every generic path asks.

Which lanes a shape's arrangements add, where each block sat (its slots), the scorer fed beside the plain
lane, the judged pairs the report and JUnit show, promotion's re-derivation and the warnings' keys. What
the arrangements are and how they are judged: :mod:`harness.evidence.arrangement_evidence`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.files import RunLayout
from harness.data.schemas.results import OpVerdictModel, ShapeScore
from harness.data.shape import Shape
from harness.evidence.arrangement_evidence import (
    ArrangementScorer,
    arrangement_plans,
    arrangements_hold,
    slot_map,
    with_arrangements,
)
from harness.evidence.arrangement_slots import SlotMap
from harness.evidence.kind import Floors, JudgedPair, KindDefaults, Recheck, ShapeEvidence, ShapeFinish, ShapeSetting
from harness.evidence.rule import warns


class _ArrangementsOfShape:
    """The arrangements of one shape as a :class:`harness.evidence.kind.ShapeEvidence`."""

    def __init__(self, scorer: ArrangementScorer) -> None:
        self.scorer = scorer

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        self.scorer.add(gold, lanes[self.scorer.plan.plain], lanes)

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        slots = finish.counted["arrangements"]  # what each kind counted, by the kind's registered name
        evidence = self.scorer.evidence(finish.plain, slots)
        return with_arrangements(score, evidence, self.scorer.warnings(evidence, slots, score.neighbours))


class ArrangementsKind(KindDefaults):
    """``--arrangements N``: other slots, other neighbours, the same block twice
    (:mod:`harness.evidence.arrangement_evidence`)."""

    name = "arrangements"

    def lanes(self, layout: RunLayout, k: Shape) -> list[str]:
        plan = arrangement_plans(layout.evidence).get(k)
        return [] if plan is None else plan.lanes

    def counter(self, layout: RunLayout, blocks: Sequence[str]) -> SlotMap:
        return slot_map(arrangement_plans(layout.evidence), blocks)  # where each block sat in its requests

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        plan = arrangement_plans(setting.layout.evidence).get(setting.k)
        if plan is None:
            return None
        return _ArrangementsOfShape(
            ArrangementScorer(
                plan, setting.ops, setting.geometry, setting.limits, setting.voiceprint_inputs, setting.floors
            )
        )

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        ev = shape.arrangements
        if ev is None:
            return
        for name, lane in ev.lanes.items():
            for _, v in sorted(lane.ops.items()):
                yield JudgedPair("arranged", f"k={k} arrangement {lane.arrangement} ({name}) against the golden:", v)
        for name, lane in ev.lanes.items():
            for _, v in sorted(lane.same_as_plain.items()):
                yield JudgedPair(
                    "slots", f"k={k} arrangement {lane.arrangement} ({name}) against arrangement 0 ({ev.plain}):", v
                )
        if ev.duplicates:
            lanes = [n for n, lane in ev.lanes.items() if lane.kind == "duplicate"]
            pair = f" ({', '.join(lanes)})" if lanes else ""
            for _, v in sorted(ev.duplicates.items()):
                yield JudgedPair(
                    "duplicates", f"k={k} duplicates{pair}, the second copy against the first in one request:", v
                )

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        return arrangements_hold(shape, recheck.tolerances, recheck.floors, recheck.check, recheck.where)

    def warning_keys(self, shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
        ev = shape.arrangements
        if ev is None:
            return set()
        same: dict[str, list[OpVerdictModel]] = {}
        for lane in ev.lanes.values():
            for key, v in lane.same_as_plain.items():
                same.setdefault(key, []).append(v)
        keys = {("slots", int(key)) for key, vs in same.items() if warns(Op(int(key)), vs, floors)}
        return keys | {
            ("duplicates", int(key)) for key, v in (ev.duplicates or {}).items() if warns(Op(int(key)), [v], floors)
        }
