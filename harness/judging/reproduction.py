"""Golden reproduction: how the exact lane differs from itself, and whether a rerun reproduces it.

At record time the exact lane runs twice, interleaved; how much the second run differs from the
first is the golden's **noise floor** per OP. A later exact-lane run (``golden verify``, or a run's
interleaved exact lane) reproduces the golden when the same judges, in noise-floor mode with that
floor, pass it: bitwise when the golden reproduced bitwise, else within its floor. Any non-finite
value, any row on one side only, or any metric beyond the floor fails; nothing is read past.

Status: ``bitwise``; ``within-noise-floor`` (the golden itself was not bitwise-reproducible);
``failed`` (same model and setup, yet different); ``drift`` (something differs, named first: the
model fingerprint, then the environment and numeric settings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, cast

from pydantic import TypeAdapter

from harness.data.geometry import Geometry
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.schemas.base import OpKey
from harness.data.schemas.files import Floor
from harness.data.schemas.results import OpVerdictModel as OpVerdict
from harness.data.schemas.results import Reproduction
from harness.data.tolerances import Tolerances
from harness.judging.judges import floor_figures, judge_for
from harness.judging.judges.floor_figures import FloorSource, FloorValue
from harness.judging.lane_scoring import LaneScorer, op_limits

REPORT_ONLY = Tolerances().with_mode("tolerance")
Status = Literal["bitwise", "within-noise-floor", "failed", "drift"]


class NoiseFloorDocument(TypedDict):
    """The manifest's ``reproducibility`` as the JSON object written into it (checked by its model,
    ``Reproducibility``, when the manifest is written); one pair's (an evidence kind's noise) may lack OP 0."""

    repeats: int
    bitwise: bool
    ops: dict[str, dict[str, FloorValue]]


@dataclass(frozen=True)
class NoiseFloors:
    """A ``reproducibility`` read back (a manifest's, or one pair's noise): per OP its floor, parsed once."""

    repeats: int
    bitwise: bool
    ops: dict[str, Floor]


_NOISE_FLOORS = TypeAdapter(NoiseFloors)


def _document(repeats: int, ops: Mapping[str, Floor]) -> NoiseFloorDocument:
    """The JSON object of a ``reproducibility``: each OP's floor as the file holds it (its unset figures left out)."""
    return {
        "repeats": repeats,
        "bitwise": all(f.bitwise for f in ops.values()),
        "ops": {key: f.model_dump(mode="json") for key, f in ops.items()},
    }


def floor_scorer(ops: Sequence[Op], geometry: Geometry, voiceprint_inputs: VoiceprintInputs) -> LaneScorer:
    """Evidence of the second exact run against the first (nothing gated: it measures the floor)."""
    limits = op_limits(REPORT_ONLY, ops, None, sample_bound=False)
    return LaneScorer("exact#2", ops, geometry, limits, voiceprint_inputs)


def noise_floor(verdicts: list[OpVerdict]) -> NoiseFloorDocument:
    """The manifest's ``reproducibility``: bitwise per OP, else its floor (the OP's judge's figures)."""
    return _document(2, {str(v.op): floor_figures.take(judge_for(Op(v.op)).floor_figures, v.metrics) for v in verdicts})


def noise_floors(part: Mapping[str, Any]) -> NoiseFloors:
    """A ``reproducibility`` JSON object (a manifest's, or :func:`noise_floor`'s) parsed, once."""
    return _NOISE_FLOORS.validate_python(part)


def worst_floors(parts: Sequence[NoiseFloors], flips: Callable[[list[int]], int]) -> dict[str, Floor]:
    """Per OP, the worst figure of several floors (the OP's judge's figures, :func:`floor_figures.merge`); counts
    (OP 0's flips) combined by ``flips`` (``sum`` over disjoint blocks, ``max`` over the same)."""
    return {
        key: floor_figures.merge(judge_for(Op(int(key))).floor_figures, [p.ops[key] for p in parts], flips)
        for key in parts[0].ops
    }


def worst_of_ops(
    parts: Sequence[Mapping[str, Any]], flips: Callable[[list[int]], int]
) -> dict[str, dict[str, FloorValue]]:
    """:func:`worst_floors` of several ``reproducibility`` JSON objects, as the floors' JSON objects (the
    manifest's form)."""
    worst = worst_floors([noise_floors(p) for p in parts], flips)
    return {key: f.model_dump(mode="json") for key, f in worst.items()}


def merge_noise_floors(parts: Sequence[Mapping[str, Any]]) -> NoiseFloorDocument:
    """The ``reproducibility`` of a corpus recorded in shards (``golden record --ray``): the worst of
    the shards' floors, which is what :func:`noise_floor` gives over the whole corpus (every field is
    a maximum, a minimum, a count or an all-of)."""
    if not parts:
        raise ValueError("no noise floors to merge")
    parsed = [noise_floors(p) for p in parts]
    return _document(parsed[0].repeats, worst_floors(parsed, flips=sum))


def reproduction_scorer(
    ops: Sequence[Op],
    geometry: Geometry,
    floors: Mapping[int, FloorSource],
    tolerances: Tolerances,
    voiceprint_inputs: VoiceprintInputs,
) -> LaneScorer:
    """Evidence of a rerun of the exact lane against the golden, judged against its floor."""
    at_floor = Tolerances(
        op0=tolerances.op0.model_copy(update={"mode": "noise-floor", "noise_floor_factor": 1.0}),
        op1=tolerances.op1.model_copy(update={"mode": "noise-floor", "noise_floor_factor": 1.0}),
        op2=tolerances.op2.model_copy(update={"mode": "noise-floor", "noise_floor_factor": 1.0}),
    )
    return LaneScorer("exact", ops, geometry, op_limits(at_floor, ops, floors, sample_bound=False), voiceprint_inputs)


def reproduction(
    golden_id: str,
    verdicts: list[OpVerdict],
    golden_reproducible: bool,
    fingerprint_matches: bool,
    differences: list[str],
) -> Reproduction:
    """The verification record (score files, JUnit, the report)."""
    passed = all(v.passed for v in verdicts)
    bitwise = all(v.figures.bitwise for v in verdicts)
    same_setup = fingerprint_matches and not differences
    status: Status
    if passed and bitwise:
        status = "bitwise"
    elif passed:
        status = "within-noise-floor"
    elif same_setup:
        status = "failed"
    else:
        status = "drift"
    ops: dict[str, OpVerdict] = {str(v.op): v for v in verdicts}
    summary = describe(golden_id, status, fingerprint_matches, list(differences), ops)
    return Reproduction(
        golden_id=golden_id,
        status=status,
        passed=passed,
        bitwise=bool(bitwise),
        same_setup=same_setup,
        fingerprint_matches=fingerprint_matches,
        golden_reproducible=bool(golden_reproducible),
        environment_differences=list(differences),
        ops=cast(dict[OpKey, OpVerdict], ops),
        summary=summary,
    )


def describe(
    gid: str, status: str, fingerprint_matches: bool, differences: list[str], ops: Mapping[str, OpVerdict]
) -> str:
    """One line for people and CI logs; a different model fingerprint is named first."""
    if status == "bitwise":
        return f"golden {gid}: reproduced bitwise"
    worst = _worst(ops)
    if status == "within-noise-floor":
        return f"golden {gid}: reproduced within its recorded noise floor ({worst})"
    if status == "failed":
        return f"golden {gid}: NOT reproduced on the same model and environment ({worst})"
    why = [] if fingerprint_matches else ["the model fingerprint differs (another model or other weights)"]
    why += differences
    return f"golden {gid}: drift ({worst}); what differs: {'; '.join(why) or 'nothing recorded'}"


def _worst(ops: Mapping[str, OpVerdict]) -> str:
    for op, verdict in sorted(ops.items()):
        failed = [c for c in verdict.checks if c.ok is False]
        if failed:
            c = failed[0]
            return f"OP {op} {c.metric} {c.observed} vs allowed {c.allowed}"
    maxes = {op: _max_abs(v) for op, v in ops.items()}
    op, value = max(maxes.items(), key=lambda kv: kv[1] or 0.0)
    return f"OP {op} max_abs {value:.3g}"


def _max_abs(verdict: OpVerdict) -> float | None:
    """The verdict's largest finite difference (an older score has no ``max_abs_finite``: its ``max_abs``)."""
    figures = verdict.figures
    # whether the judge wrote the figure at all (a None it wrote is kept: non-finite values throughout)
    return figures.max_abs_finite if "max_abs_finite" in verdict.metrics else figures.max_abs
