"""Judging the canaries: each planted defect must be refused, with the cause that names it.

A canary's answers (``lanes.running.canaries``) are judged exactly as a shape's: its plain request against the golden
with the limits of the OP's mode (:class:`harness.judging.lane_scoring.LaneScorer`), and its first block's answer
beside its neighbour's other audio against its plain answer (:mod:`harness.evidence.neighbour_evidence`: the
same rule, the run-to-run difference taken from the shape's own neighbour evidence, or from the plain request
sent once more). The judged request is a shape's score, and its cause is the one the gate gives a real shape
(:func:`harness.evidence.refusal.with_cause`). The night fails unless every canary is refused with its expected
cause; promotion re-derives each cause from the stored figures (:func:`canaries_hold`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from harness.base.errors import LedgerError
from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits
from harness.data.masks import VoiceprintRows
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, OutputCollector
from harness.data.schemas.neighbours import ControlFigures, MovedBlock, ShapeNeighbours
from harness.data.schemas.refusals import LEAK, NUMERICS, Cause
from harness.data.schemas.results import Canary, CanaryRun, Reproduction, RequestEvidence, Score, ShapeScore
from harness.evidence.arrangement_slots import BlockFigures
from harness.evidence.kind import with_evidence
from harness.evidence.neighbour_evidence import NOISE_MULTIPLE, Figures, build_op, decide
from harness.evidence.refusal import ScoreFacts, with_cause
from harness.judging.lane_scoring import LaneScorer, shape_result

EXPECTED: Mapping[str, Cause] = {"leak": LEAK, "rebasing": LEAK, "exchange": LEAK, "shift": NUMERICS}
HOLDING_LAWS = {"verdict": "hold", "packer_identity": "canary", "broken": []}  # the laws are not what is tested


def canary_facts(verification: Reproduction) -> ScoreFacts:
    """What a canary's cause is derived with: the laws held and the golden reproduced (a canary tests the
    evidence's judges, not the night's packer or golden, whose own lines say what they found)."""
    return ScoreFacts(HOLDING_LAWS, verification.model_copy(update={"passed": True}))


def lane_of(
    answers: Mapping[str, np.ndarray], op: Op, gold: LaneOutputs, rows: Mapping[str, VoiceprintRows], g: Geometry
) -> LaneOutputs:
    """A canary's answers (per block) as a lane of the golden's blocks: OP 0 as given, OP 1/2 with their rows (the
    segmentation then the golden's own, unjudged)."""
    order = [b for b in gold.segmentation.block_ids if b in answers]
    out = OutputCollector(g)
    index = gold.segmentation.index()
    for b in order:
        valid = gold.segmentation.valid[index[b]]
        if op is Op.SEGMENTATION:
            out.add_segmentation(b, valid, answers[b])
        else:
            out.add_segmentation(b, valid, gold.segmentation.logprobs[index[b]])
            out.add_voiceprint(op, b, rows[b], answers[b])
    return out.finish(order)


@dataclass(frozen=True)
class Judging:
    """What every canary of a night is judged with: the night's limits (its mode's), the golden's reproduction
    (for the cause's facts) and the geometry."""

    limits: Mapping[Op, OpLimits]
    verification: Reproduction
    geometry: Geometry


def judge(
    name: str,
    planted: str,
    k: int,
    ops: list[Op],
    lanes: tuple[LaneOutputs, LaneOutputs, LaneOutputs | None, ControlFigures | None],
    reference_noise: Mapping[Op, float | None],
    judging: Judging,
) -> Canary:
    """One canary judged (module doc). ``lanes``: the golden's outputs of its blocks, its plain answers, its answers
    beside other neighbours (the answered blocks only; None: no neighbour evidence) and the plain request's
    second send (None: not sent)."""
    gold, plain, beside, again = lanes
    limits, verification, g = judging.limits, judging.verification, judging.geometry
    judged = [Op.SEGMENTATION, *(op for op in ops if op is not Op.SEGMENTATION)]  # OP 0 first: every judge reads it
    scorer = LaneScorer(k, judged, g, limits, VoiceprintInputs.ISOLATED)
    scorer.add(gold, plain)
    verdicts = scorer.verdicts()
    ids = list(plain.segmentation.block_ids)
    requests = RequestEvidence(full=1, full_blocks=len(ids), partial=0, partial_blocks=0, needed_blocks=None)
    shape = shape_result(k, verdicts, requests, None)
    if beside is not None:
        evidence = neighbours(k, ops, plain, beside, again, reference_noise, limits)
        leaks = [v.line for v in evidence.ops.values() if v.outcome == "leak"]
        shape = with_evidence(shape, {"neighbours": evidence}, reasons_first=leaks, refused=bool(leaks))
    shape = with_cause(k, shape, canary_facts(verification))
    expected = EXPECTED[name]
    return Canary.model_validate(
        {
            "name": name,
            "planted": planted,
            "ops": [int(op) for op in ops],
            "blocks": ids,
            "expected": expected,
            "shape": shape,
            "seen": shape.cause is not None and shape.cause.kind == expected,
        }
    )


def neighbours(
    k: int,
    ops: list[Op],
    plain: LaneOutputs,
    beside: LaneOutputs,
    again: ControlFigures | None,
    reference_noise: Mapping[Op, float | None],
    limits: Mapping[Op, OpLimits],
) -> ShapeNeighbours:
    """The answered blocks' answers beside other neighbours against their plain answers, as the neighbour evidence
    judges them."""
    answered = list(beside.segmentation.block_ids)
    moves = BlockFigures(ops)
    moves.add("n", plain.select(answered), beside)
    out = {}
    for op in ops:
        blocks, units, moved, max_abs, max_ulp = moves.of("n", op)
        hits = np.flatnonzero(moved > 0)
        first = None
        if hits.size:
            i = int(hits[0])
            first = MovedBlock(
                block=blocks[i],
                slot=str(ids_slot(plain, blocks[i])),
                neighbours=[f"{b!r} (filled)" for b in plain.segmentation.block_ids if b not in answered],
                units=int(units[i]),
                units_moved=int(moved[i]),
                max_abs=None if np.isnan(max_abs[i]) else float(max_abs[i]),
                max_ulp=int(max_ulp[i]),
            )
        worst = None if np.isnan(max_abs[hits]).any() else float(max_abs[hits].max(initial=0.0))
        figures = Figures(
            blocks=len(blocks),
            blocks_moved=int(hits.size),
            units=int(units.sum()),
            units_moved=int(moved.sum()),
            max_abs=worst,
            max_ulp=int(max_ulp[hits].max(initial=0)),
            controls=again,
            repeats_bitwise=None,
            repeats_max_abs=None,
            reference_noise=reference_noise.get(op),
        )
        d = decide(figures)
        per_block = np.where(np.isnan(max_abs[hits]), np.inf, max_abs[hits])
        if d.noise is None:
            beyond = 0
        elif d.noise == 0.0:
            beyond = int(hits.size)
        else:
            beyond = int((per_block > NOISE_MULTIPLE * d.noise).sum())
        out[str(int(op))] = build_op(k, op, figures, first, d, beyond, limits[op])
    return ShapeNeighbours.model_validate(
        {"lane": f"k{k}.n", "ops": out, "leak": any(v.outcome == "leak" for v in out.values())}
    )


def ids_slot(lane: LaneOutputs, block: str) -> int:
    return list(lane.segmentation.block_ids).index(block)


def canaries_hold(score: Score, where: str) -> bool:
    """Promotion's re-derivation of the night's canaries: each cause from its own stored figures, each ``seen`` from
    its cause; True when the gate saw every one (False: the night may promote nothing)."""
    run: CanaryRun | None = score.canaries
    if run is None or not run.planted:
        return True
    facts = canary_facts(score.verification)
    for c in run.canaries:
        again = with_cause(int(c.shape.shape), _without_cause(c.shape), facts)
        if again.cause != c.shape.cause:
            raise LedgerError(
                f"{where}: canary {c.name}: its cause is not the one its own figures give: the score disagrees "
                "with itself"
            )
        if c.expected != EXPECTED[c.name]:
            raise LedgerError(f"{where}: canary {c.name}: expected cause {c.expected!r} is not its own")
    return run.seen


def _without_cause(shape: ShapeScore) -> ShapeScore:
    given = {name: getattr(shape, name) for name in shape.model_fields_set if name != "cause"}
    return ShapeScore(**given)
