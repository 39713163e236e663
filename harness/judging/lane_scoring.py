"""Scoring one lane against the golden, batch by batch: every OP's evidence, then its verdicts.

A :class:`LaneScorer` holds one evidence accumulator per OP (from that OP's judge); the caller
feeds it the golden's and the lane's outputs of the same blocks, one batch at a time, so memory is
one batch whatever the corpus size. OP 0 runs first in each batch: in chained mode the voiceprint
judge attributes changed voiceprint rows to the OP 0 flips of their window.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.base import OpKey
from harness.data.schemas.files import LawsVerdict
from harness.data.schemas.results import RequestEvidence, ShapeScore
from harness.data.shape import Shape
from harness.data.tolerances import Tolerances
from harness.evidence.shape_gates import shape_gates
from harness.judging.judges import judge_for
from harness.judging.judges.floor_figures import FloorSource
from harness.judging.judges.judge_base import NonFiniteFigures, OpVerdict


def op_limits(
    tolerances: Tolerances, ops: Sequence[Op], floors: Mapping[int, FloorSource] | None, sample_bound: bool = True
) -> dict[Op, OpLimits]:
    """Every OP's limits for the tolerances' modes (noise-floor modes read the golden's floor: each OP's model,
    or its JSON as the manifest holds it, ``golden.floors()``, parsed by the judges)."""
    floors = floors or {}
    return {op: judge_for(op).limits(tolerances.for_op(op), floors.get(int(op)), sample_bound) for op in ops}


class LaneScorer:
    """Every OP of one lane (a packed shape, or a run's exact lane) against the golden."""

    def __init__(
        self,
        shape: int | str,
        ops: Sequence[Op],
        geometry: Geometry,
        limits: Mapping[Op, OpLimits],
        voiceprint_inputs: VoiceprintInputs,
    ) -> None:
        """``voiceprint_inputs``: isolated | chained, the run's (its file key is "mode")."""
        self.shape = shape
        self.ops = list(ops)
        self.evidence = {op: judge_for(op).evidence(op, geometry, limits[op], voiceprint_inputs) for op in self.ops}

    def add(self, golden: LaneOutputs, lane: LaneOutputs) -> None:
        notes = self.evidence[Op.SEGMENTATION].add(golden.segmentation, lane.segmentation)
        for op in self.ops:
            if op.is_voiceprint:
                self.evidence[op].add(golden.voiceprint.get(op), lane.voiceprint.get(op), notes)

    def verdicts(self) -> list[OpVerdict]:
        return [self.evidence[op].verdict(self.shape) for op in self.ops]


def shape_result(
    shape: int,
    verdicts: list[OpVerdict],
    requests: RequestEvidence,
    laws: Mapping[str, Any] | LawsVerdict | None = None,
    vs_exact: PackingEffect | None = None,
) -> ShapeScore:
    """The score file's entry for one packed shape: its OPs' verdicts, then the two gates every shape
    passes on top of them (see :func:`shape_gates`); ``vs_exact``: the shape against the run's own
    exact lane (:func:`packing_effect`), absent from the file when None."""
    passed, gate_reasons = shape_gates(Shape(shape), all(v.passed for v in verdicts), requests, laws)
    # the score file's entry (its constructor's keys): ``vs_exact`` given only when measured (an unset key is
    # left out of the file)
    return ShapeScore.model_validate(
        {
            "shape": Shape(shape),
            "verdict": "pass" if passed else "fail",
            "reasons": gate_reasons + [r for v in verdicts for r in v.reasons],
            "ops": {op_key(v.op): v for v in verdicts},
            "requests": requests,
            **({} if vs_exact is None else {"vs_exact": asdict(vs_exact)}),
        }
    )


def op_key(op: int) -> OpKey:
    """An OP's key in the score's ``ops`` dicts ("0", "1", "2")."""
    key = str(int(op))
    assert key in ("0", "1", "2"), key
    return cast(OpKey, key)


@dataclass(frozen=True)
class OpEffect:
    """One OP of a shape against the run's own exact lane: bitwise, or its largest differences (None where
    non-finite values made the figure, or where the OP has no such figure)."""

    bitwise: bool
    max_abs: float | None
    min_cosine: float | None
    argmax_flips: int | None
    figures_non_finite: NonFiniteFigures | None


@dataclass(frozen=True)
class PackingEffect:
    """A shape against the run's own exact lane, per OP (the score file's ``vs_exact``: fields in its key
    order)."""

    bitwise: bool
    ops: dict[str, OpEffect]


def packing_effect(verdicts: list[OpVerdict]) -> PackingEffect:
    """A shape against the run's own exact lane (same process, same moment): what packing alone
    changes, told apart from drift between the golden's machine and this one."""
    out: dict[str, OpEffect] = {}
    for v in verdicts:
        f = v.figures
        assert f.bitwise is not None, v.op  # every judge says whether its OP was bitwise
        out[str(v.op)] = OpEffect(
            bitwise=f.bitwise,
            max_abs=f.max_abs,  # None: non-finite values
            min_cosine=f.min_cosine,
            argmax_flips=f.flips,
            figures_non_finite=f.figures_non_finite,
        )
    return PackingEffect(bitwise=all(o.bitwise for o in out.values()), ops=out)
