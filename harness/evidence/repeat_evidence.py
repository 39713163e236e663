"""A packed lane's own noise: the same shape run N times, measured like the release's floor.

One run of a shape says what it answered once. A kernel chosen per call, a reduction whose order
depends on timing, an atomic add: the same request may get another answer the next time, and one
run cannot see it. ``--repeats N`` runs the shape's plain lane N times in one run (``k4``, then
``k4.r2`` .. ``k4.rN``, each interleaved with the exact lane), and :class:`RepeatScorer` measures how
much every repeat differs from the first run:

- with the golden's own noise-floor measure (``harness.judging.reproduction``: the same judges, the figures
  :func:`harness.judging.reproduction.noise_floor` keeps), so the figure sits beside the release's floor and
  reads "as reproducible as the release" or not (:func:`harness.evidence.rule.within_floor`);
- with a plain bit count: how many blocks and windows (OP 0) or rows (OP 1/2) differ at all, and
  the first such block in corpus order;
- judged, in every tolerance mode (:mod:`harness.evidence.rule`, the one rule for every kind of
  evidence): every repeat against the first run by the OP's own judge, with the limits that mode gives
  against the golden. A failed check refuses the shape (:meth:`RepeatScorer.reasons`; its cause is "not
  reproducible") and promotion re-derives those checks (:func:`repeats_hold`); an OP that holds the
  limits but is less reproducible than the release is flagged (``warnings``), not refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Literal, cast

import numpy as np

from harness.base.errors import LedgerError, ScoringError
from harness.base.figures import holds
from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, VoiceprintOutputs
from harness.data.schemas.base import OpKey
from harness.data.schemas.files import RunEvidence, RunLayout
from harness.data.schemas.refusals import EvidenceWarning
from harness.data.schemas.repeats import RepeatEvidence, RepeatOp
from harness.data.schemas.results import OpVerdictModel, ShapeScore
from harness.data.shape import Shape, lane_name
from harness.data.tolerances import Tolerances
from harness.evidence.kind import (
    Floors,
    JudgedPair,
    KindDefaults,
    Recheck,
    ShapeEvidence,
    ShapeFinish,
    ShapeSetting,
    with_evidence,
)
from harness.evidence.rule import (
    WHAT,
    evidence_limits,
    evidence_warning,
    release_floor,
    warns,
    within_floor,
    worst_noise,
)
from harness.judging.judges import rowkeys
from harness.judging.lane_scoring import LaneScorer, op_key
from harness.judging.reproduction import noise_floor

REPEAT_KIND = "repeat"  # a run manifest's evidence.variants[lane].kind for a repeat lane
HINT = (
    "the lane answers the same request differently from run to run (a nondeterministic kernel, a race, "
    "autotuning): make it deterministic, or widen the limits it is judged with (--tolerance tolerance, or "
    "larger [tolerances])"
)


def repeat_lanes(evidence: RunEvidence | None) -> dict[int, list[str]]:
    """Per shape k, its repeat lanes in run order (``k4.r2``, ``k4.r3``, ...) from the run manifest's
    ``evidence.variants``; {} for a run without repeats (an old run, or ``evidence.repeats = 1``)."""
    variants = evidence.variants if evidence is not None else {}
    found: dict[int, list[tuple[int, str]]] = {}
    for lane, v in variants.items():
        if v.kind == REPEAT_KIND:
            found.setdefault(v.k, []).append((v.index, lane))
    return {k: [lane for _, lane in sorted(items)] for k, items in sorted(found.items())}


def repeat_limits(tolerances: Tolerances, ops: Sequence[Op], floors: Floors) -> dict[Op, OpLimits]:
    """The limits a repeat is judged with against the first run: the OP's own mode's, as against the golden
    (:func:`harness.evidence.rule.evidence_limits`)."""
    return evidence_limits(tolerances, ops, floors)


class _Differing:
    """One OP: which blocks and units differ (any bit, or missing) between the first run and some repeat."""

    def __init__(self) -> None:
        self.blocks = self.blocks_differing = self.units = self.units_differing = 0
        self.first: str | None = None

    def add(self, ids: list[str], blocks: np.ndarray, units: int, units_differing: int) -> None:
        self.blocks += len(ids)
        self.blocks_differing += int(blocks.sum())
        self.units += units
        self.units_differing += units_differing
        if self.first is None and blocks.any():
            self.first = ids[int(np.flatnonzero(blocks)[0])]


class RepeatScorer:
    """One shape's N runs, batch by batch: the first run (its plain lane) against every repeat."""

    def __init__(
        self,
        shape: int,
        lanes: Sequence[str],
        ops: Sequence[Op],
        geometry: Geometry,
        voiceprint_inputs: VoiceprintInputs,
        tolerances: Tolerances,
        floors: Floors,
    ) -> None:
        """``lanes``: the plain lane first, then its repeats (at least one); ``floors``: the golden's."""
        if len(lanes) < 2:
            raise ScoringError(f"k={shape}: repeats need the plain lane and at least one repeat, got {list(lanes)}")
        self.shape, self.lanes, self.ops = int(shape), list(lanes), list(ops)
        self.tolerances, self.floors, self.geometry = tolerances, floors, geometry
        limits = repeat_limits(tolerances, self.ops, floors)
        self.scorers = [LaneScorer(lane, self.ops, geometry, limits, voiceprint_inputs) for lane in self.lanes[1:]]
        self.differing = {op: _Differing() for op in self.ops}

    def add(self, plain: LaneOutputs, repeats: Sequence[LaneOutputs]) -> None:
        """One batch: the plain lane's outputs and each repeat's, of the same blocks in the same order."""
        if len(repeats) != len(self.scorers):
            raise ScoringError(f"k={self.shape}: {len(repeats)} repeat batches for {len(self.scorers)} repeat lanes")
        for scorer, again in zip(self.scorers, repeats, strict=True):
            scorer.add(plain, again)  # the judges check blocks and shapes agree first
        ids = plain.segmentation.block_ids
        pos = {b: i for i, b in enumerate(ids)}
        for op in self.ops:
            blocks = np.zeros(len(ids), dtype=bool)
            if op is Op.SEGMENTATION:
                a = plain.segmentation.logprobs
                windows = np.zeros(a.shape[:2], dtype=bool)
                for again in repeats:
                    windows |= _bits(a, again.segmentation.logprobs).reshape(a.shape[:2])
                blocks |= windows.any(axis=1)
                self.differing[op].add(ids, blocks, int(windows.size), int(windows.sum()))
            else:
                base = plain.voiceprint.get(op) or VoiceprintOutputs.empty(op, self.geometry)
                rows = np.zeros(base.rows, dtype=bool)
                for again in repeats:
                    _rows_differ(
                        base, again.voiceprint.get(op) or VoiceprintOutputs.empty(op, self.geometry), rows, blocks, pos
                    )
                self.differing[op].add(ids, blocks, int(rows.size), int(rows.sum()))

    def evidence(self) -> RepeatEvidence:
        per_pair = [s.verdicts() for s in self.scorers]
        noise = worst_noise([noise_floor(v) for v in per_pair])
        ops: dict[OpKey, RepeatOp] = {}
        for i, op in enumerate(self.ops):
            key = op_key(op)
            d, mode = self.differing[op], self.tolerances.for_op(op).mode
            floor = release_floor(self.floors, op)
            own = noise[key]
            non_finite = any(v[i].figures.non_finite for v in per_pair)
            as_release = not non_finite and within_floor(op, own, floor)
            pairs = [v[i].model_copy(update={"distribution": []}) for v in per_pair]
            ops[key] = RepeatOp(
                op=v_op(op),
                tolerance_mode=mode,
                gated=True,
                blocks=d.blocks,
                blocks_differing=d.blocks_differing,
                first_differing_block=d.first,
                unit="windows" if op is Op.SEGMENTATION else "rows",
                units=d.units,
                units_differing=d.units_differing,
                noise=own,
                release_floor=floor,
                as_reproducible_as_release=as_release,
                pairs=pairs,
            )
        found = repeat_warnings(self.shape, self.lanes, ops, self.floors)
        return RepeatEvidence(
            repeats=len(self.lanes),
            lanes=self.lanes,
            ops=ops,
            reproducible=all(o.noise.bitwise for o in ops.values()),
            warnings=[w.line for w in found],
        )

    def reasons(self, evidence: RepeatEvidence | None = None) -> list[str]:
        """The refusal lines (empty: reproducible enough): per gated OP, the first failed check of the first
        repeat that failed, as observed vs allowed, how many of how many, where, and what to do next."""
        return repeat_reasons(self.shape, evidence or self.evidence())


def repeat_warnings(
    shape: int, lanes: Sequence[str], ops: Mapping[OpKey, RepeatOp], floors: Floors
) -> list[EvidenceWarning]:
    """Per OP whose every repeat held the mode's limits but which is less reproducible than the release: its
    warning (:func:`harness.evidence.rule.evidence_warning`), worst repeat's verdict and the OP's noise."""
    out = []
    for key, o in sorted(ops.items()):
        first = f"first block {o.first_differing_block!r}" if o.first_differing_block is not None else None
        found = evidence_warning(
            shape,
            Op(int(key)),
            "repeats",
            o.pairs,
            floors,
            (o.blocks, o.blocks_differing, o.units, o.units_differing),
            first,
            what=f"{WHAT['repeats']} ({len(lanes)} runs)",  # WHAT: each kind's words, by the kind's name
        )
        if found is not None:
            out.append(found)
    return out


def repeat_reasons(shape: int, evidence: RepeatEvidence) -> list[str]:
    out = []
    for o in evidence.ops.values():
        failed = [(j, p) for j, p in enumerate(o.pairs, start=2) if not p.passed]
        if not failed:
            continue
        j, pair = failed[0]
        check = next(c for c in pair.checks if c.ok is False)
        more = sum(1 for _, p in failed for c in p.checks if c.ok is False) - 1
        also = f" (+{more} more failed check{'s' if more != 1 else ''} over the repeats)" if more else ""
        out.append(
            f"k={shape} is not reproducible ({o.tolerance_mode} mode): {check.line()}, run {j} of "
            f"{evidence.repeats} ({evidence.lanes[j - 1]}) against the first ({evidence.lanes[0]}){also}; "
            f"{_differ_text(o)}; {HINT}"
        )
    return out


def _differ_text(o: RepeatOp) -> str:
    first = f", first block {o.first_differing_block!r}" if o.first_differing_block is not None else ""
    return (
        f"{o.blocks_differing:,} of {o.blocks:,} blocks and {o.units_differing:,} of {o.units:,} {o.unit} "
        f"differ between the runs{first}"
    )


def v_op(op: Op) -> Literal[0, 1, 2]:
    """An OP as the score's models type it."""
    value = int(op)
    assert value in (0, 1, 2), value
    return cast(Literal[0, 1, 2], value)


def _bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row of the first two axes flattened: any bit differs (NaN payloads included)."""
    rows = a.shape[0] * a.shape[1] if a.ndim > 2 else a.shape[0]
    x = np.ascontiguousarray(a, dtype=np.float32).view(np.int32).reshape(rows, -1)
    y = np.ascontiguousarray(b, dtype=np.float32).view(np.int32).reshape(rows, -1)
    out: np.ndarray = (x != y).any(axis=1)
    return out


def _rows_differ(
    base: VoiceprintOutputs, again: VoiceprintOutputs, rows: np.ndarray, blocks: np.ndarray, pos: Mapping[str, int]
) -> None:
    """Mark the first run's rows (``rows``) and the batch's blocks (``blocks``) that differ in ``again``: a row
    on one side only, other WEIGHTS or other embedding bits."""
    found = rowkeys.match(base, again)
    differs = np.zeros(found.golden.size, dtype=bool)
    if found.golden.size:
        differs = _bits(base.embedding[found.golden], again.embedding[found.run]) | _bits(
            base.weights[found.golden], again.weights[found.run]
        )
    rows[found.golden[differs]] = True
    rows[found.golden_only] = True
    for i in np.concatenate([found.golden[differs], found.golden_only]).tolist():
        blocks[pos[str(base.block_ids[i])]] = True
    for i in found.run_only.tolist():
        blocks[pos[str(again.block_ids[i])]] = True


def with_repeats(score: ShapeScore, scorer: RepeatScorer | None) -> ShapeScore:
    """The shape's score with its repeat evidence; refused when an OP is not reproducible within its mode's
    limits (its reasons first, with the shape's other gates), warned where it holds them but is less
    reproducible than the release. ``scorer`` None: the score unchanged (a run without repeats)."""
    if scorer is None:
        return score
    evidence = scorer.evidence()
    reasons = scorer.reasons(evidence)
    warnings = repeat_warnings(scorer.shape, scorer.lanes, evidence.ops, scorer.floors)
    return with_evidence(score, {"repeats": evidence}, reasons_first=reasons, refused=bool(reasons), warnings=warnings)


def repeats_hold(shape: ShapeScore, tolerances: Tolerances, floors: Floors, where: str) -> bool:
    """Promotion's re-derivation: the shape's repeat checks (if any) follow from the score's tolerances and the
    golden's floor, each ``ok`` from its figures; True when no gated repeat failed. A score that disagrees with
    itself is a LedgerError."""
    ev = shape.repeats
    if ev is None:
        return True
    ops = [Op(int(k)) for k in ev.ops]
    limits = repeat_limits(tolerances, ops, floors)
    for key, o in ev.ops.items():
        op, at = Op(int(key)), f"{where}: repeats OP {key}"
        mode = tolerances.for_op(op).mode
        if o.tolerance_mode != mode or not o.gated:
            raise LedgerError(
                f"{at}: judged in mode {o.tolerance_mode!r} (gated {o.gated}), but the score's "
                f"tolerances say {mode!r}, and every mode judges the repeats: score the run again"
            )
        if len(o.pairs) != ev.repeats - 1:
            raise LedgerError(f"{at}: {len(o.pairs)} repeat verdict(s) for {ev.repeats} runs")
        for pair in o.pairs:
            _verify(pair, limits[op], at)
    return not any(not p.passed for o in ev.ops.values() for p in o.pairs)


def _verify(pair: OpVerdictModel, derived: OpLimits, where: str) -> None:
    limits = derived.document()  # as the verdict stores them
    if pair.limits != limits:
        raise LedgerError(f"{where}: {pair.shape}'s limits are not the ones the score's tolerances give")
    for c in pair.checks:
        if c.relation == "report":
            continue
        expected = limits.get(c.limit) if c.limit else 0
        if c.allowed != expected or c.ok != holds(c.observed, c.relation, c.allowed):
            raise LedgerError(
                f"{where}: {pair.shape} check {c.metric} ({c.observed!r} {c.relation} {c.allowed!r}, "
                f"ok={c.ok}) does not follow from its limit {expected!r}: the score disagrees with "
                "itself"
            )
    if pair.passed != (not any(c.ok is False for c in pair.checks)):
        raise LedgerError(f"{where}: {pair.shape}: 'passed' disagrees with its checks")


class _RepeatsOfShape:
    """The repeats of one shape as a :class:`harness.evidence.kind.ShapeEvidence`."""

    def __init__(self, scorer: RepeatScorer) -> None:
        self.scorer = scorer

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        self.scorer.add(lanes[self.scorer.lanes[0]], [lanes[name] for name in self.scorer.lanes[1:]])

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        return with_repeats(score, self.scorer)


class RepeatsKind(KindDefaults):
    """``--repeats N``: the shape's plain lane run N times, every repeat against the first (module doc)."""

    name = "repeats"

    def lanes(self, layout: RunLayout, k: Shape) -> list[str]:
        return repeat_lanes(layout.evidence).get(k, [])

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        again = repeat_lanes(setting.layout.evidence).get(setting.k)
        if not again:
            return None
        return _RepeatsOfShape(
            RepeatScorer(
                setting.k,
                [lane_name(setting.k), *again],
                setting.ops,
                setting.geometry,
                setting.voiceprint_inputs,
                setting.tolerances,
                setting.floors,
            )
        )

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        rep = shape.repeats
        if rep is None:
            return
        for _, o in sorted(rep.ops.items()):
            for j, pair_verdict in enumerate(o.pairs, start=2):
                yield JudgedPair(
                    "repeats",
                    f"k={k} run {j} of {rep.repeats} ({rep.lanes[j - 1]}) against the first ({rep.lanes[0]}):",
                    pair_verdict,
                )

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        return repeats_hold(shape, recheck.tolerances, recheck.floors, recheck.where)

    def warning_keys(self, shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
        if shape.repeats is None:
            return set()
        return {("repeats", int(key)) for key, o in shape.repeats.ops.items() if warns(Op(int(key)), o.pairs, floors)}
