"""Judging a shape's arrangements: other neighbours, other slots, the same block twice.

A run made with ``--arrangements N`` holds, per shape k >= 2, arrangement lanes beside the plain lane
(``lanes.running.arrangers``: shuffled ``k4.a1`` .., the duplicates ``k4.d`` + ``k4.d2``; the run manifest's
``evidence.variants`` names them). Scoring judges each of them three ways, in the same pass over the
golden as the plain lane, every way with the limits of the mode the user chose
(:func:`harness.evidence.rule.evidence_limits`: the one rule for every kind of evidence):

1. against the golden, exactly like the plain lane: a shape passes only if every arrangement does;
2. a shuffled lane's OP 0 against the plain lane's (the same blocks, other slots and neighbours, in a
   request of the same size: the arrangers keep each block's request size): a block's answer must not
   depend on where it sits beyond the mode's limits. In ``bitwise`` and ``noise-floor`` mode (bitwise
   where the golden reproduced bitwise) this catches a model that is off by one ULP in one slot, far
   inside the tolerances; in ``tolerance`` mode those ULPs are what the user accepted: reported as a
   warning, not refused. A voiceprint request changes shape with its neighbours' rows (R), so OP 1/2 are
   judged against the golden only; how many blocks differ from the plain lane is reported;
3. the duplicates' two copies against each other, every OP: one request, the same block twice.

Any failed check refuses the shape, with a line naming the arrangement, the block and its slots; a pair
that differs more than the release's own floor but within the mode's limits gives one warning per (shape,
OP, kind) (:meth:`ArrangementScorer.warnings`). Promotion re-derives every check (:func:`arrangements_hold`).
``harness.evidence.arrangement_slots`` says where each block sat and which slot is worst;
``harness.evidence.arrangements_kind`` joins the arrangements to the paths every kind of evidence takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from harness.base.errors import LedgerError
from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.arrangements import ArrangementLane, ShapeArrangements, Spread, slot_label
from harness.data.schemas.files import RunEvidence
from harness.data.schemas.neighbours import ShapeNeighbours
from harness.data.schemas.refusals import EvidenceKind, EvidenceWarning
from harness.data.schemas.results import OpVerdictModel, ShapeScore
from harness.data.shape import lane_name
from harness.data.tolerances import Tolerances
from harness.evidence.arrangement_slots import BlockFigures, SlotMap, slot_figures, worst_slot
from harness.evidence.kind import CheckOp, Floors, with_evidence
from harness.evidence.rule import evidence_limits, evidence_warning, where_only
from harness.judging.lane_scoring import LaneScorer, op_key

SPREAD_METRICS = {
    Op.SEGMENTATION: ("max_abs", "max_ulp", "flips"),
    Op.VOICEPRINT: ("max_abs", "min_cosine"),
    Op.VOICEPRINT_CLEAN: ("max_abs", "min_cosine"),
}
RULE = "a block's answer must not depend on its slot or its neighbours beyond the limits of its mode"


@dataclass(frozen=True)
class ShapePlan:
    """One shape's arrangement lanes, as the run manifest's ``evidence`` names them."""

    k: int
    arrangements: int
    seed: int
    shuffled: tuple[tuple[int, str], ...]  # (arrangement number, lane)
    duplicates: tuple[str, str] | None  # the two copies' lanes

    @property
    def plain(self) -> str:
        return lane_name(self.k)

    @property
    def lanes(self) -> list[str]:
        return [lane for _, lane in self.shuffled] + list(self.duplicates or ())

    def number(self, lane: str) -> int:
        return dict((name, j) for j, name in self.shuffled).get(lane, self.arrangements - 1)


def arrangement_plans(evidence: RunEvidence | None) -> dict[int, ShapePlan]:
    """Per shape k, its arrangement lanes from the run manifest's ``evidence`` (``{}``: an old run, or
    ``evidence.arrangements = 1``)."""
    if evidence is None or evidence.arrangements < 2:
        return {}
    shuffled: dict[int, list[tuple[int, str]]] = {}
    copies: dict[int, dict[int, str]] = {}
    for lane, v in evidence.variants.items():
        if v.kind == "arrangement":
            shuffled.setdefault(v.k, []).append((v.index, lane))
        elif v.kind == "duplicate":
            copies.setdefault(v.k, {})[v.index] = lane
    plans = {}
    for k in sorted(set(shuffled) | set(copies)):
        pair = copies.get(k, {})
        dup = (pair[0], pair[1]) if 0 in pair and 1 in pair else None
        plans[k] = ShapePlan(k, evidence.arrangements, evidence.seed, tuple(sorted(shuffled.get(k, []))), dup)
    return plans


def slot_map(plans: Mapping[int, ShapePlan], known: Sequence[str]) -> SlotMap:
    """The slot reader for these shapes' arrangement lanes (``known``: the run's block ids)."""
    copies: dict[str, list[str]] = {}
    for p in plans.values():
        copies.update({lane: [lane] for _, lane in p.shuffled})
        if p.duplicates:
            copies[p.duplicates[0]] = list(p.duplicates)
    return SlotMap({k: p.plain for k, p in plans.items()}, copies, known)


class ArrangementScorer:
    """One shape's arrangement lanes, fed batch by batch beside its plain lane (see module doc)."""

    def __init__(
        self,
        plan: ShapePlan,
        ops: Sequence[Op],
        geometry: Geometry,
        limits: Mapping[Op, OpLimits],
        voiceprint_inputs: VoiceprintInputs,
        floors: Floors,
    ) -> None:
        """``limits``: every pair's (the mode's, :func:`harness.evidence.rule.evidence_limits`); ``floors``: the
        golden's own noise floors, the line between a silent pair and a warned one."""
        self.plan, self.ops, self.floors = plan, list(ops), floors
        self.vs_golden = {n: LaneScorer(n, ops, geometry, limits, voiceprint_inputs) for n in plan.lanes}
        # OP 0 only: the same request size in every arrangement (see module doc)
        self.vs_plain = {
            n: LaneScorer(n, [Op.SEGMENTATION], geometry, limits, voiceprint_inputs) for _, n in plan.shuffled
        }
        self.dup = LaneScorer(plan.duplicates[1], ops, geometry, limits, voiceprint_inputs) if plan.duplicates else None
        self.figures = BlockFigures(ops)  # against the golden: the slots' figures
        self.moves = BlockFigures(ops)  # against the plain lane (and copy 1 against copy 0): which block moved

    def add(self, gold: LaneOutputs, plain: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        self.figures.add(self.plan.plain, gold, plain)
        for name in self.plan.lanes:
            out = lanes[name]
            self.vs_golden[name].add(gold, out)
            if name in self.vs_plain:
                self.vs_plain[name].add(plain, out)
            self.figures.add(name, gold, out)
            self.moves.add(name, plain, out)
        if self.dup is not None and self.plan.duplicates is not None:
            first, second = self.plan.duplicates
            self.dup.add(lanes[first], lanes[second])
            self.moves.add("duplicates", lanes[first], lanes[second])

    def _counts(self, name: str, op: Op) -> tuple[tuple[int, int, int, int], str | None]:
        """Blocks, blocks differing, units, units differing between the two sides, and the block differing most."""
        blocks, units, differing, _, _ = self.moves.of(name, op)
        counts = (len(blocks), int((differing > 0).sum()), int(units.sum()), int(differing.sum()))
        return counts, self.moves.worst_block(name, op)

    def warnings(
        self, evidence: ShapeArrangements, slots: SlotMap, neighbours: ShapeNeighbours | None = None
    ) -> list[EvidenceWarning]:
        """One warning per (OP, kind) whose pairs all held the mode's limits but differ beyond the release's
        floor: the shuffled lanes against the plain lane (slots: the lane that differs most), the duplicates'
        copies against each other. Where the neighbour evidence answered the OP bitwise at fixed slots, the
        difference is the slot's (or the copy's position), and the line says so."""
        k, plan = self.plan.k, self.plan
        out: list[EvidenceWarning] = []
        for op in self.ops:
            key = op_key(op)
            clean = neighbours is not None and key in neighbours.ops and neighbours.ops[key].outcome == "bitwise"
            pairs = [
                (name, lane.same_as_plain[key]) for name, lane in evidence.lanes.items() if key in lane.same_as_plain
            ]
            if pairs:
                name, _ = max(pairs, key=lambda nv: nv[1].figures.max_abs_finite or 0.0)
                counts, block = self._counts(name, op)
                where = (
                    (
                        f"worst block {block!r} in {_slot(slots, name, block, k)} of {name}, "
                        f"{_slot(slots, plan.plain, block, k)} in {plan.plain}"
                    )
                    if block
                    else None
                )
                judged = [v for _, v in pairs]
                out += _some(
                    evidence_warning(k, op, "slots", judged, self.floors, counts, where, _said("slots", clean))
                )
            if evidence.duplicates and key in evidence.duplicates and plan.duplicates:
                first, second = plan.duplicates
                counts, block = self._counts("duplicates", op)
                where = (
                    (f"worst block {block!r} in {_slot(slots, first, block, k)} and {_slot(slots, second, block, k)}")
                    if block
                    else None
                )
                pair = [evidence.duplicates[key]]
                out += _some(
                    evidence_warning(k, op, "duplicates", pair, self.floors, counts, where, _said("duplicates", clean))
                )
        return out

    def _moved(self, name: str, op: Op) -> tuple[str | None, int, int]:
        """The first block (corpus order) whose answer differs, how many do, of how many."""
        blocks, _, differing, _, _ = self.moves.of(name, op)
        hits = np.flatnonzero(differing > 0)
        return (blocks[int(hits[0])] if hits.size else None), int(hits.size), len(blocks)

    def evidence(self, plain_verdicts: Sequence[OpVerdictModel], slots: SlotMap) -> ShapeArrangements:
        k, plan = self.plan.k, self.plan

        def at(lane: str, block: str | None) -> str:
            return _slot(slots, lane, block or "", k)

        lanes: dict[str, ArrangementLane] = {}
        reasons: list[str] = []
        for name in plan.lanes:
            number = plan.number(name)
            ops = {op_key(v.op): v for v in self.vs_golden[name].verdicts()}
            same = {op_key(v.op): v for v in self.vs_plain[name].verdicts()} if name in self.vs_plain else {}
            kind: Literal["shuffled", "duplicate"] = (
                "duplicate" if plan.duplicates and name in plan.duplicates else "shuffled"
            )
            moved = {op_key(op): self._moved(name, op)[1] for op in self.ops}
            lanes[name] = ArrangementLane(
                lane=name,
                arrangement=number,
                kind=kind,
                ops=ops,
                same_as_plain=same,
                blocks_differing_from_plain=moved,
                passed=all(v.passed for v in [*ops.values(), *same.values()]),
            )
            for v in ops.values():
                where = at(name, self.figures.worst_block(name, Op(v.op)))
                reasons += [f"k={k} arrangement {number} ({name}) {where}: {r}" for r in v.reasons]
            for v in same.values():
                if not v.passed:
                    block, n, of = self._moved(name, Op(v.op))
                    reasons.append(
                        f"k={k} arrangement {number} ({name}) {at(name, block)}: block {block!r} does not "
                        f"give its answer of {at(plan.plain, block)} in arrangement 0 ({plan.plain}) "
                        f"({n} of {of} blocks differ): {v.reasons[0] if v.reasons else 'differs'}; {RULE}"
                    )
        duplicates = None
        if self.dup is not None and plan.duplicates is not None:
            first, second = plan.duplicates
            duplicates = {op_key(v.op): v for v in self.dup.verdicts()}
            for v in duplicates.values():
                if not v.passed:
                    block, n, of = self._moved("duplicates", Op(v.op))
                    reasons.append(
                        f"k={k} duplicates ({first}, {second}): block {block!r}, twice in one request "
                        f"({at(first, block)} and {at(second, block)}), gave two answers ({n} of {of} "
                        f"blocks): {v.reasons[0] if v.reasons else 'differs'}; {RULE}"
                    )
        names = [plan.plain, *plan.lanes]
        metrics = {plan.plain: {op_key(v.op): v.metrics for v in plain_verdicts}}
        metrics.update({n: {key: v.metrics for key, v in lanes[n].ops.items()} for n in plan.lanes})
        spread = {
            op_key(op): [_spread(m, {n: metrics[n][op_key(op)].get(m) for n in names}) for m in SPREAD_METRICS[op]]
            for op in self.ops
        }
        per_slot = {op_key(op): slot_figures(self.figures, names, slots, op) for op in self.ops}
        passed = all(lane.passed for lane in lanes.values()) and all(v.passed for v in (duplicates or {}).values())
        return ShapeArrangements.model_validate(
            {
                "arrangements": plan.arrangements,
                "seed": plan.seed,
                "plain": plan.plain,
                "lanes": lanes,
                "duplicates": duplicates,
                "spread": spread,
                "slots": per_slot,
                "worst_slot": {key: worst_slot(s) for key, s in per_slot.items()},
                "passed": passed,
                "reasons": [] if passed else reasons or [f"k={k}: an arrangement failed ({RULE})"],
            }
        )


def _slot(slots: SlotMap, lane: str, block: str, k: int) -> str:
    slot = slots.of(lane).get(block)
    return f"slot {slot_label(slot, k)}" if slot is not None else "slot ?"


def _some(found: EvidenceWarning | None) -> list[EvidenceWarning]:
    return [] if found is None else [found]


def _spread(metric: str, values: Mapping[str, Any]) -> Spread:
    known = [float(v) for v in values.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return Spread(
        metric=metric,
        values={n: (float(v) if isinstance(v, (int, float)) else None) for n, v in values.items()},
        min=min(known) if known else None,
        max=max(known) if known else None,
    )


def with_arrangements(
    score: ShapeScore, evidence: ShapeArrangements | None, warnings: Sequence[EvidenceWarning] = ()
) -> ShapeScore:
    """The shape's score with its arrangements; refused when they fail (their reasons after the others'), warned
    where they hold the mode's limits but differ beyond the release's floor."""
    if evidence is None:
        return score
    return with_evidence(
        score,
        {"arrangements": evidence},
        reasons_after=evidence.reasons,
        refused=not evidence.passed,
        warnings=warnings,
    )


def arrangements_hold(shape: ShapeScore, tolerances: Tolerances, floors: Floors, check: CheckOp, where: str) -> bool:
    """Promotion's re-derivation: every arrangement verdict's limits follow from the score's tolerances (and the
    golden's floor), each check from its figures (``check``: score_check's own); True when none failed."""
    ev = shape.arrangements
    if ev is None:
        return True
    limits = evidence_limits(tolerances, [Op(int(o)) for o in shape.ops], floors)
    for name, lane in ev.lanes.items():
        for key, v in lane.ops.items():
            check(v, limits[Op(int(key))], f"{where}: arrangement lane {name} OP {key}")
        for key, v in lane.same_as_plain.items():
            check(v, limits[Op(int(key))], f"{where}: arrangement lane {name} against {ev.plain}, OP {key}")
    for key, v in (ev.duplicates or {}).items():
        check(v, limits[Op(int(key))], f"{where}: duplicates OP {key}")
    if not ev.passed and not ev.reasons:
        raise LedgerError(f"{where}: the arrangements refuse the shape without a reason")
    return ev.passed


def _said(kind: EvidenceKind, clean: bool) -> str | None:
    """What a difference of ``kind`` is, in words, where the neighbours are clean (else the kind's own)."""
    return where_only(kind) if clean else None
