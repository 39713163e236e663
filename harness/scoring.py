"""Scoring one lane against the golden, batch by batch: every OP's evidence, then its verdicts.

A :class:`LaneScorer` holds one evidence accumulator per OP (from that OP's judge); the caller
feeds it the golden's and the lane's outputs of the same blocks, one batch at a time, so memory is
one batch whatever the corpus size. OP 0 runs first in each batch: in chained mode the voiceprint
judge attributes changed voiceprint rows to the OP 0 flips of their window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from harness.geometry import Geometry
from harness.judges import judge_for
from harness.judges.base import OpVerdict
from harness.ops import Op
from harness.outputs import LaneOutputs
from harness.tolerances import Tolerances


def op_limits(tolerances: Tolerances, ops: Sequence[Op], floors: Mapping[int, dict] | None,
              sample_bound: bool = True) -> dict[Op, dict]:
    """Every OP's limits for the tolerances' modes (noise-floor modes read the golden's floor)."""
    floors = floors or {}
    return {op: judge_for(op).limits(tolerances.for_op(op), floors.get(int(op)), sample_bound) for op in ops}


class LaneScorer:
    """Every OP of one lane (a packed shape, or a run's exact lane) against the golden."""

    def __init__(self, shape: int | str, ops: Sequence[Op], geometry: Geometry, limits: Mapping[Op, dict],
                 mode: str) -> None:
        self.shape = shape
        self.ops = list(ops)
        self.evidence = {op: judge_for(op).evidence(op, geometry, limits[op], mode) for op in self.ops}

    def add(self, golden: LaneOutputs, lane: LaneOutputs) -> None:
        notes = self.evidence[Op.SEGMENTATION].add(golden.segmentation, lane.segmentation)
        for op in self.ops:
            if op.is_voiceprint:
                self.evidence[op].add(golden.voiceprint.get(op), lane.voiceprint.get(op), notes)

    def verdicts(self) -> list[OpVerdict]:
        return [self.evidence[op].verdict(self.shape) for op in self.ops]


def shape_result(shape: int, verdicts: list[OpVerdict]) -> dict:
    """The score file's entry for one packed shape."""
    return {
        "shape": shape,
        "verdict": "pass" if all(v.passed for v in verdicts) else "fail",
        "reasons": [r for v in verdicts for r in v.reasons],
        "ops": {str(v.op): v.to_dict() for v in verdicts},
    }


def packing_effect(verdicts: list[OpVerdict]) -> dict:
    """A shape against the run's own exact lane (same process, same moment): what packing alone
    changes, told apart from drift between the golden's machine and this one."""
    out = {}
    for v in verdicts:
        m = v.metrics
        out[str(v.op)] = {"bitwise": m["bitwise"], "max_abs": m.get("max_abs_finite", m.get("max_abs")),
                          "min_cosine": m.get("min_cosine"), "argmax_flips": m.get("flips")}
    return {"bitwise": all(o["bitwise"] for o in out.values()), "ops": out}
