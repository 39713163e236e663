"""Judging the neighbour lane: does a block's answer at its own slot move with its neighbours' audio?

The run's lane ``k4.n`` (``lanes.running.neighbour_lane``) answers every block at its slot of its plain request, in a
request of that request's geometry whose other blocks carry other audio. At a fixed request and slot an
honest network on a deterministic backend answers bitwise the same whatever its neighbours hold (the
kernel is chosen by the shapes, never by the contents), so, per OP and block, the two answers are
compared bit for bit (:class:`NeighbourScorer`, in the same pass over the golden as the plain lane), and a
moved answer is judged against what the backend does with the *same* request twice: the run's control
repeats (``lanes.running.neighbour_controls``: the plain and neighbour requests concerned sent once more) and the
shape's repeats (``--repeats``). :func:`decide` is the rule:

- nothing moved: ``bitwise``, the neighbours' audio moved nothing;
- moved, and every request sent again answered bitwise alike: ``leak``, refused in every mode whatever the
  size (one user's audio inside another user's answer; cause ``reads another block's audio``);
- moved, the backend does not repeat itself: a move more than ``NOISE_MULTIPLE`` times the run-to-run
  difference of the same request is a ``leak``; within it the test is ``inconclusive`` (a warning that says
  by how much), and the run-to-run difference is judged with the limits of the OP's mode (a failure:
  ``not reproducible``).

Promotion re-derives the outcome and every check from the stored figures (:func:`neighbours_hold`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.base.errors import LedgerError
from harness.base.figures import fmt
from harness.data.call_record import CallRecord
from harness.data.judge_limits import LimitSet, OpLimits
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.arrangements import PAD, slot_label
from harness.data.schemas.neighbours import ControlFigures, MovedBlock, NeighbourOp, Outcome, ShapeNeighbours
from harness.data.schemas.repeats import RepeatEvidence
from harness.data.schemas.verdicts import CheckDetails, CheckModel, OpVerdictModel
from harness.evidence.arrangement_slots import BlockFigures

NOISE_MULTIPLE = 4.0  # a move this many times the run-to-run difference of the same request is no noise
FILLER_MARK = "~n"  # a filled neighbour's id on the wire (lanes.running.neighbour_lane)
LEAK_RULE = (
    "at a fixed request and slot an honest network answers bitwise alike whatever its neighbours hold: one "
    "block's audio reaches another block's answer (a window reading past its end, a normalisation over the "
    "request, a rebasing fault)"
)


class NeighbourMap:
    """Per neighbour lane, each answered block's slot and the filled neighbours around it, read from the call log
    (``block_ids`` of each OP 0 call of the lane, in request order; a filled block is ``id~n``)."""

    def __init__(self, lanes: Mapping[str, int]) -> None:
        self.lanes = dict(lanes)  # lane -> k
        self.placed: dict[str, dict[str, tuple[str, list[str]]]] = {}

    def observe(self, calls: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
        for given in calls:  # the call log's records (mappings of its columns), passed on as they came
            call = CallRecord.of(given)
            lane = str(call.variant or "")
            if lane in self.lanes and int(call.op) == int(Op.SEGMENTATION):
                self._note(lane, self.lanes[lane], list(call.block_ids), int(call.blocks))
            yield given

    def _note(self, lane: str, k: int, ids: list[str], blocks: int) -> None:
        filled = [(i, b.removesuffix(FILLER_MARK)) for i, b in enumerate(ids) if b.endswith(FILLER_MARK)]
        short = blocks < k
        for pos, sent in enumerate(ids):
            if sent.endswith(FILLER_MARK):
                continue
            slot = PAD if short and pos == len(ids) - 1 else str(pos)
            around = [f"{b!r} (slot {slot_label(str(i), k)})" for i, b in filled]
            self.placed.setdefault(lane, {})[sent] = (slot, around)

    def of(self, lane: str, block: str) -> tuple[str | None, list[str]]:
        slot, around = self.placed.get(lane, {}).get(block, (None, []))
        return slot, list(around)


class NeighbourScorer:
    """One shape's neighbour lane against its plain lane, per block and OP, bit for bit (module doc)."""

    def __init__(self, k: int, plain: str, lane: str, ops: Sequence[Op], limits: Mapping[Op, OpLimits]) -> None:
        self.k, self.plain, self.lane, self.ops, self.limits = k, plain, lane, list(ops), limits
        self.moves = BlockFigures(ops)

    def add(self, lanes: Mapping[str, LaneOutputs]) -> None:
        self.moves.add(self.lane, lanes[self.plain], lanes[self.lane])

    def evidence(
        self,
        placed: NeighbourMap,
        run_controls: Mapping[str, Mapping[str, ControlFigures]],
        repeats: RepeatEvidence | None,
    ) -> ShapeNeighbours:
        """``run_controls``: every shape's control repeats, per OP (the run manifest's): the backend is one, so a
        request it answered otherwise anywhere in the run makes its answers here suspect too."""
        controls = run_controls.get(str(self.k), {})
        reproduced, noise_at = run_facts(run_controls)
        out: dict[str, NeighbourOp] = {}
        for op in self.ops:
            key = str(int(op))
            blocks, units, moved, max_abs, max_ulp = self.moves.of(self.lane, op)
            hits = np.flatnonzero(moved > 0)
            first = None
            if hits.size:
                i = int(hits[0])
                slot, around = placed.of(self.lane, blocks[i])
                first = MovedBlock(
                    block=blocks[i],
                    slot=slot,
                    neighbours=around,
                    units=int(units[i]),
                    units_moved=int(moved[i]),
                    max_abs=None if np.isnan(max_abs[i]) else float(max_abs[i]),
                    max_ulp=int(max_ulp[i]),
                )
            worst = None if np.isnan(max_abs[hits]).any() else float(max_abs[hits].max(initial=0.0))
            repeat = repeats.ops.get(key) if repeats is not None else None  # type: ignore[call-overload]
            figures = Figures(
                blocks=len(blocks),
                blocks_moved=int(hits.size),
                units=int(units.sum()),
                units_moved=int(moved.sum()),
                max_abs=worst,
                max_ulp=int(max_ulp[hits].max(initial=0)),
                controls=controls.get(key),
                repeats_bitwise=None if repeat is None else repeat.units_differing == 0,
                repeats_max_abs=None if repeat is None else float(repeat.noise.max_abs),
                reference_noise=noise_at.get(key),
                run_reproduced=reproduced,
            )
            decision = decide(figures)
            per_block = np.where(np.isnan(max_abs[hits]), np.inf, max_abs[hits])
            beyond = (
                int(hits.size)
                if decision.noise == 0.0
                else int((per_block > NOISE_MULTIPLE * decision.noise).sum())
                if decision.noise is not None
                else 0
            )
            out[key] = build_op(self.k, op, figures, first, decision, beyond, self.limits[op])
        return ShapeNeighbours(lane=self.lane, ops=out, leak=any(v.outcome == "leak" for v in out.values()))  # type: ignore[arg-type]


def run_facts(run_controls: Mapping[str, Mapping[str, ControlFigures]]) -> tuple[bool | None, dict[str, float]]:
    """Over every shape's control repeats of a run: whether every request sent again answered alike (None: none
    was sent), and per OP the largest run-to-run difference of the requests that did not (an OP absent: none)."""
    found = [(op, c) for per_op in run_controls.values() for op, c in per_op.items() if c.sent]
    if not found:
        return None, {}
    noise: dict[str, float] = {}
    for op, c in found:
        if not c.reproduced and c.max_abs is not None:
            noise[op] = max(noise.get(op, 0.0), c.max_abs)
    return all(c.reproduced for _, c in found), noise


@dataclass(frozen=True)
class Figures:
    """What :func:`decide` needs of one OP of one shape (the stored figures, so promotion can decide again)."""

    blocks: int
    blocks_moved: int
    units: int
    units_moved: int
    max_abs: float | None  # None: a non-finite value moved
    max_ulp: int
    controls: ControlFigures | None
    repeats_bitwise: bool | None
    repeats_max_abs: float | None
    reference_noise: float | None = None  # the run-to-run difference at this OP measured elsewhere in the run
    run_reproduced: bool | None = None  # every control repeat of the run answered alike (None: none was sent)

    @classmethod
    def of(cls, stored: NeighbourOp, repeats_max_abs: float | None) -> Figures:
        return cls(
            stored.blocks,
            stored.blocks_moved,
            stored.units,
            stored.units_moved,
            stored.max_abs,
            stored.max_ulp,
            stored.controls,
            stored.repeats_bitwise,
            repeats_max_abs,
            stored.reference_noise,
            stored.run_reproduced,
        )


@dataclass(frozen=True)
class Decision:
    """An OP's outcome, the run-to-run difference it was judged against (0.0: the backend repeated itself;
    None: not measured, or non-finite) and whether any control or repeat measured it."""

    outcome: Outcome
    noise: float | None
    measured: bool


def decide(f: Figures) -> Decision:
    """The rule of the module doc, from the figures alone."""
    if f.blocks_moved == 0:
        return Decision("bitwise", None, False)
    parts: list[float | None] = []  # the run-to-run differences of the same request, wherever measured
    if f.controls is not None and f.controls.sent:
        parts.append(0.0 if f.controls.reproduced else f.controls.max_abs)
    if f.repeats_bitwise is not None:
        parts.append(0.0 if f.repeats_bitwise else f.repeats_max_abs)
    if f.reference_noise is not None:
        parts.append(f.reference_noise)
    if not parts:
        return Decision("inconclusive", None, False)
    if any(p is None for p in parts):
        return Decision("inconclusive", None, True)
    noise = max(p for p in parts if p is not None)
    if noise == 0.0 and f.run_reproduced is False:  # alike here, but the backend did not repeat itself elsewhere
        return Decision("inconclusive", None, True)
    if noise == 0.0:
        return Decision("leak", 0.0, True)
    beyond = f.max_abs is None or f.max_abs > NOISE_MULTIPLE * noise
    return Decision("leak" if beyond else "inconclusive", noise, True)


def build_op(
    k: int, op: Op, f: Figures, first: MovedBlock | None, d: Decision, beyond: int, limits: OpLimits
) -> NeighbourOp:
    """One OP's stored evidence: figures, outcome, its line and checks."""
    unit = "windows" if op is Op.SEGMENTATION else "rows"
    head = f"k={k} OP {int(op)} neighbours:"
    where = None
    if first is not None:
        slot = "slot ?" if first.slot is None else f"slot {slot_label(first.slot, k)}"
        beside = f" beside {', '.join(first.neighbours)}" if first.neighbours else ""
        where = (
            f"first block {first.block!r} in {slot}{beside}: {first.units_moved:,} of {first.units:,} {unit} moved, "
            f"max_abs {fmt(first.max_abs)}, max_ulp {first.max_ulp:,}"
        )
    controls = _controls_text(f.controls)
    if d.outcome == "bitwise":
        line = (
            f"{head} the neighbours' audio moved nothing: {f.blocks:,} of {f.blocks:,} blocks ({f.units:,} {unit}) "
            "answered bitwise alike at their slots beside other audio"
        )
    elif d.outcome == "leak":
        why = (
            f"sent again exactly as before, {controls}: the backend repeats itself"
            if d.noise == 0.0
            else f"the same requests sent again differ by at most {fmt(d.noise)} ({controls}); the neighbours moved "
            f"{beyond:,} block(s) more than {NOISE_MULTIPLE:g}x that"
        )
        line = (
            f"{head} {f.blocks_moved:,} of {f.blocks:,} blocks ({f.units_moved:,} of {f.units:,} {unit}) answer "
            f"differently when their neighbours' audio changes, max_abs {fmt(f.max_abs)} (max_ulp {f.max_ulp:,}); "
            f"{where}; {why}: the neighbours' audio moved the answer"
        )
    else:
        within = (
            "no control repeat was sent ([evidence] neighbour_controls = 0), so a leak cannot be told from noise"
            if not d.measured
            else f"within {NOISE_MULTIPLE:g}x the run-to-run difference of the same request "
            f"({fmt(d.noise)}; {controls})"
            if d.noise is not None
            else f"the same requests sent again answer non-finite values ({controls})"
        )
        line = (
            f"{head} the leak test was inconclusive on this backend: {f.blocks_moved:,} of {f.blocks:,} blocks "
            f"moved beside other neighbours by at most {fmt(f.max_abs)}, {within}"
        )
    gated = d.outcome != "inconclusive"
    leak_check = CheckModel.gate(
        int(op),
        f"neighbour_moved_{unit}",
        f.units_moved,
        "==",
        0 if gated else None,
        CheckDetails(
            unit=unit,
            offending=f.units_moved,
            total=f.units,
            where=where,
            note="" if d.outcome != "leak" else LEAK_RULE,
            hint=""
            if d.outcome != "leak"
            else "look for a read past a window's VALID end, or a reduction over the request",
        ),
    )
    verdict = OpVerdictModel.of(int(op), f"{k}", [leak_check], {"outcome": d.outcome}, {"bitwise": True})
    run_to_run = None
    if d.outcome == "inconclusive" and d.measured:
        run_to_run = _run_to_run(k, op, f, d, limits)
    return NeighbourOp(
        blocks=f.blocks,
        blocks_moved=f.blocks_moved,
        units=f.units,
        units_moved=f.units_moved,
        max_abs=f.max_abs,
        max_ulp=f.max_ulp,
        first=first,
        controls=f.controls,
        repeats_bitwise=f.repeats_bitwise,
        reference_noise=f.reference_noise,
        run_reproduced=f.run_reproduced,
        noise_max_abs=d.noise,
        beyond_noise=beyond,
        outcome=d.outcome,
        line=line,
        verdict=verdict,
        run_to_run=run_to_run,
    )


class RunToRunLimits(LimitSet):
    """What the run-to-run difference of an inconclusive OP is held to: its mode's bits or max abs."""

    mode: str
    bitwise: bool
    max_abs: float


def run_to_run_limits(limits: OpLimits) -> RunToRunLimits:
    return RunToRunLimits(mode=str(limits.mode), bitwise=limits.bitwise, max_abs=limits.max_abs)


def _run_to_run(k: int, op: Op, f: Figures, d: Decision, limits: OpLimits) -> OpVerdictModel:
    unit = "windows" if op is Op.SEGMENTATION else "rows"
    c = f.controls
    differing = (c.units_differing if c is not None else 0) + (0 if f.repeats_bitwise is not False else 1)
    note = "the same request answered otherwise when sent again (the control repeats and --repeats)"
    if limits.bitwise:
        check = CheckModel.gate(
            int(op),
            f"run_to_run_differing_{unit}",
            differing,
            "==",
            0,
            CheckDetails(unit=unit, offending=differing, total=c.units if c is not None else None, note=note),
        )
    else:
        check = CheckModel.gate(
            int(op),
            "run_to_run_max_abs",
            d.noise,
            "<=",
            limits.max_abs,
            CheckDetails(note=note, limit="max_abs"),
        )
    return OpVerdictModel.of(int(op), f"{k}", [check], {"noise": d.noise}, run_to_run_limits(limits).document())


def _controls_text(c: ControlFigures | None) -> str:
    if c is None or not c.sent:
        return "no control repeat sent"
    return (
        f"{c.plain_reproduced:,} of {c.plain_sent:,} plain and {c.neighbour_reproduced:,} of {c.neighbour_sent:,} "
        "neighbour requests answered bitwise alike when sent again"
    )


def neighbours_hold(
    k: str,
    evidence: ShapeNeighbours,
    repeats: RepeatEvidence | None,
    limits: Mapping[Op, OpLimits],
    run_controls: Mapping[str, Mapping[str, ControlFigures]],
    where: str,
) -> bool:
    """Promotion's re-derivation: every OP's outcome, checks and limits from its stored figures and the run's
    control repeats (every shape's, as stored); True when no OP shows a leak (a LedgerError where the score
    disagrees with itself)."""
    reproduced, noise_at = run_facts(run_controls)
    for key, stored in evidence.ops.items():
        if stored.run_reproduced != reproduced or stored.reference_noise != noise_at.get(key):
            raise LedgerError(
                f"{where}: neighbours OP {key}: its run-wide figures are not the ones the score's control repeats "
                "give: the score disagrees with itself"
            )
        op = Op(int(key))
        repeat = repeats.ops.get(key) if repeats is not None else None
        want_bitwise = None if repeat is None else repeat.units_differing == 0
        if stored.repeats_bitwise != want_bitwise:
            raise LedgerError(f"{where}: neighbours OP {key}: repeats_bitwise is not the shape's repeats'")
        d = decide(Figures.of(stored, None if repeat is None else float(repeat.noise.max_abs)))
        if d.outcome != stored.outcome or d.noise != stored.noise_max_abs:
            raise LedgerError(
                f"{where}: neighbours OP {key}: outcome {stored.outcome!r} (noise {stored.noise_max_abs!r}) is not "
                f"the one its own figures give ({d.outcome!r}, noise {d.noise!r}): the score disagrees with itself"
            )
        if d.noise is not None and (stored.beyond_noise > 0) != (
            d.noise == 0.0 or stored.max_abs is None or stored.max_abs > NOISE_MULTIPLE * d.noise
        ):
            raise LedgerError(f"{where}: neighbours OP {key}: beyond_noise disagrees with max_abs and the noise")
        again = build_op(int(k), op, Figures.of(stored, None), stored.first, d, stored.beyond_noise, limits[op])
        if again.verdict != stored.verdict or again.run_to_run != stored.run_to_run:
            raise LedgerError(f"{where}: neighbours OP {key}: its checks are not the ones its own figures give")
    return not evidence.leak
