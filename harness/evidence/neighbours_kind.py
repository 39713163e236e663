"""The neighbour evidence as a kind of evidence (:mod:`harness.evidence.kind`): the seam every generic path asks.

Which lane it reads at shape k (``k4.n``), where each answered block sat and whose audio changed around it
(the call log), the scorer fed beside the plain lane, its judged pairs (a leak first, then an inconclusive
OP's run-to-run difference), promotion's re-derivation, its warnings, its report section and its JUnit
properties. What the evidence is and how it is judged: :mod:`harness.evidence.neighbour_evidence`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.files import RunEvidence, RunLayout
from harness.data.schemas.neighbours import ControlFigures, NeighbourOp
from harness.data.schemas.refusals import EvidenceWarning
from harness.data.schemas.results import Score, ShapeScore
from harness.data.shape import Shape, lane_name
from harness.evidence.kind import (
    Floors,
    JudgedPair,
    KindDefaults,
    Recheck,
    ReportSection,
    ShapeEvidence,
    ShapeFinish,
    ShapeSetting,
    with_evidence,
)
from harness.evidence.neighbour_evidence import NeighbourMap, NeighbourScorer, neighbours_hold
from harness.evidence.rule import evidence_limits, noise_text, release_floor

NEIGHBOURS = "neighbours"  # a run manifest's evidence.variants[lane].kind for the neighbour lane


def neighbour_lanes(evidence: RunEvidence | None) -> dict[int, str]:
    """Per shape k, its neighbour lane (``k4.n``) as the run manifest's ``evidence`` names it ({}: none)."""
    if evidence is None:
        return {}
    return {v.k: lane for lane, v in evidence.variants.items() if v.kind == NEIGHBOURS}


class _NeighboursOfShape:
    def __init__(self, scorer: NeighbourScorer, floors: Floors) -> None:
        self.scorer, self.floors = scorer, floors

    def add(self, gold: LaneOutputs, lanes: Mapping[str, LaneOutputs]) -> None:
        self.scorer.add(lanes)

    def apply(self, score: ShapeScore, finish: ShapeFinish) -> ShapeScore:
        evidence = self.scorer.evidence(finish.counted[NEIGHBOURS], run_controls(finish), score.repeats)
        leaks = [v.line for v in evidence.ops.values() if v.outcome == "leak"]
        noisy = [
            f"{v.line}; {v.run_to_run.reasons[0]}"
            for v in evidence.ops.values()
            if v.run_to_run is not None and not v.run_to_run.passed
        ]
        warnings = [self._warning(Op(int(key)), v) for key, v in evidence.ops.items() if _warns(v)]
        return with_evidence(
            score,
            {"neighbours": evidence},
            reasons_first=leaks,
            reasons_after=noisy,
            refused=bool(leaks or noisy),
            warnings=warnings,
        )

    def _warning(self, op: Op, v: NeighbourOp) -> EvidenceWarning:
        """An inconclusive OP whose run-to-run difference holds its mode's limits: reported, not refused."""
        return EvidenceWarning.model_validate(
            {
                "kind": NEIGHBOURS,
                "op": int(op),
                "tolerance_mode": str(self.scorer.limits[op].mode),
                "unit": "windows" if op is Op.SEGMENTATION else "rows",
                "blocks": v.blocks,
                "blocks_differing": v.blocks_moved,
                "units": v.units,
                "units_differing": v.units_moved,
                "max_abs": float(v.max_abs or 0.0),
                "max_ulp": v.max_ulp,
                "where": None if v.first is None else repr(v.first.block),
                "release_floor": noise_text(op, release_floor(self.floors, op)),
                "line": v.line,
            }
        )


def run_controls(finish: ShapeFinish) -> dict[str, dict[str, ControlFigures]]:
    """The run's control repeats, every shape's, per OP (none: an empty mapping)."""
    found = finish.run.neighbour_controls if finish.run is not None else None
    return {k: {op: f for op, f in per_op.items()} for k, per_op in (found or {}).items()}


def stored_controls(shapes: Mapping[str, ShapeScore]) -> dict[str, dict[str, ControlFigures]]:
    """The run's control repeats as a score stores them (each shape's neighbour evidence): promotion's view."""
    out: dict[str, dict[str, ControlFigures]] = {}
    for k, shape in shapes.items():
        if shape.neighbours is None:
            continue
        for op, v in shape.neighbours.ops.items():
            if v.controls is not None:
                out.setdefault(k, {})[op] = v.controls
    return out


def _warns(v: NeighbourOp) -> bool:
    return v.outcome == "inconclusive" and (v.run_to_run is None or v.run_to_run.passed)


class NeighboursKind(KindDefaults):
    """``[evidence] neighbours``: every block at its own slot beside neighbours of other audio
    (:mod:`harness.evidence.neighbour_evidence`)."""

    name = NEIGHBOURS

    def lanes(self, layout: RunLayout, k: Shape) -> list[str]:
        lane = neighbour_lanes(layout.evidence).get(k)
        return [] if lane is None else [lane]

    def counter(self, layout: RunLayout, blocks: Sequence[str]) -> NeighbourMap:
        return NeighbourMap({lane: k for k, lane in neighbour_lanes(layout.evidence).items()})

    def scorer(self, setting: ShapeSetting) -> ShapeEvidence | None:
        lane = neighbour_lanes(setting.layout.evidence).get(setting.k)
        if lane is None:
            return None
        scorer = NeighbourScorer(setting.k, lane_name(setting.k), lane, setting.ops, setting.limits)
        return _NeighboursOfShape(scorer, setting.floors)

    def pairs(self, k: Shape, shape: ShapeScore) -> Iterator[JudgedPair]:
        ev = shape.neighbours
        if ev is None:
            return
        for _, v in sorted(ev.ops.items()):
            yield JudgedPair(
                "leak", f"k={k} neighbours ({ev.lane}) against the plain lane at the same slots:", v.verdict
            )
        for _, v in sorted(ev.ops.items()):
            if v.run_to_run is not None:
                yield JudgedPair("repeats", f"k={k} neighbours ({ev.lane}): the same request sent again:", v.run_to_run)

    def holds(self, shape: ShapeScore, recheck: Recheck) -> bool:
        ev = shape.neighbours
        if ev is None:
            return True
        limits = evidence_limits(recheck.tolerances, [Op(int(o)) for o in shape.ops], recheck.floors)
        for key, v in ev.ops.items():
            recheck.check(v.verdict, None, f"{recheck.where}: neighbours OP {key}")
            if v.run_to_run is not None:
                recheck.check(v.run_to_run, None, f"{recheck.where}: neighbours OP {key}, the same request again")
        run = stored_controls(recheck.shapes)
        no_leak = neighbours_hold(str(shape.shape), ev, shape.repeats, limits, run, recheck.where)
        return no_leak and all(v.run_to_run is None or v.run_to_run.passed for v in ev.ops.values())

    def warning_keys(self, shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
        ev = shape.neighbours
        if ev is None:
            return set()
        return {(NEIGHBOURS, int(key)) for key, v in ev.ops.items() if _warns(v)}

    def report(self, score: Score) -> ReportSection | None:
        rows = []
        for k, shape in score.shapes.items():
            ev = shape.neighbours
            if ev is None:
                continue
            for key, v in sorted(ev.ops.items()):
                rows.append(
                    (
                        f"k={k}",
                        f"OP {key}",
                        f"{v.blocks_moved:,} of {v.blocks:,}",
                        f"{v.units_moved:,} of {v.units:,}",
                        "-" if v.blocks_moved == 0 else "non-finite" if v.max_abs is None else f"{v.max_abs:.3g}",
                        "-"
                        if v.controls is None
                        else f"{v.controls.plain_reproduced + v.controls.neighbour_reproduced}"
                        f" of {v.controls.sent} alike",
                        v.outcome,
                    )
                )
        if not rows:
            return None
        lines = tuple(
            v.line for shape in score.shapes.values() if shape.neighbours for v in shape.neighbours.ops.values()
        )
        return ReportSection(
            title="Neighbours: every block at its own slot, beside other audio",
            columns=("shape", "OP", "blocks moved", "windows / rows moved", "max abs", "sent again", "outcome"),
            rows=tuple(rows),
            lines=lines,
        )

    def junit(self, k: Shape, shape: ShapeScore) -> list[tuple[str, str]]:
        ev = shape.neighbours
        if ev is None:
            return []
        return [(f"neighbours_op{key}", v.outcome) for key, v in sorted(ev.ops.items())]


def _sent_again(v: NeighbourOp) -> str:
    c = v.controls
    return "-" if c is None else f"{c.plain_reproduced + c.neighbour_reproduced} of {c.sent} alike"
