"""One rule for every kind of evidence: judged with the limits of the mode the user chose, per OP.

The harness compares many pairs: a packed lane against the golden, one slot against another (the
shuffled arrangements against the plain lane), the two copies of a block sent twice in one request,
one repeat of a lane against the first. Each pair is judged, per OP, with the limits its tolerance mode
gives against the golden (:func:`evidence_limits`, the one implementation of "the limits of this mode"):

- ``tolerance``: the OP's tolerances (max abs, cosine, relative L2, no confident flip, and the sample-size
  bound of the flip and failed-row rates);
- ``bitwise``: every bit;
- ``noise-floor``: the release's own floor (x its factor; bitwise where the golden reproduced bitwise).

Real kernels move answers by a few ULPs with the batch shape and the position in the batch: in
``tolerance`` mode that is what the user accepted, so a pair that differs more than the release differs
from itself, yet within the mode's limits, is reported as a warning (:func:`evidence_warning`), never
refused. A pair beyond the limits refuses the shape in every mode.

Why one place: the limits, the noise measured between the two sides, "as reproducible as the release"
and the warning's wording were written once per kind of evidence; now every kind calls these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from harness.data.figures import fmt
from harness.data.ops import Op
from harness.data.schemas.files import Floor
from harness.data.schemas.refusals import EvidenceKind, EvidenceWarning
from harness.data.schemas.results import OpVerdictModel, ShapeScore
from harness.data.tolerances import Tolerances
from harness.judging.lane_scoring import op_limits
from harness.judging.reproduction import noise_floor, worst_of_ops

Floors = Mapping[int, Mapping[str, Any]]
WHAT = {"slots": "answer differently in another slot or beside other neighbours",
        "duplicates": "give two answers when sent twice in one request",
        "repeats": "answer differently from run to run"}


def evidence_limits(tolerances: Tolerances, ops: Sequence[Op], floors: Floors | None) -> dict[Op, dict[str, Any]]:
    """Every OP's limits for any pair of lanes: exactly those a packed lane gets against the golden (see module
    doc). ``floors``: the golden's noise floors (what ``noise-floor`` mode is held to)."""
    return op_limits(tolerances, ops, {int(k): dict(v) for k, v in (floors or {}).items()})


def noise_of(op: Op, verdicts: Sequence[OpVerdictModel]) -> Floor:
    """How far apart the two sides of one OP's pairs are (the worst pair), measured as the golden's floor is
    (the same figures: :func:`harness.judging.reproduction.noise_floor`)."""
    merged = worst_noise([noise_floor([v]) for v in verdicts])
    return Floor.model_validate(merged[str(int(op))])


def warns(op: Op, verdicts: Sequence[OpVerdictModel], floors: Floors | None) -> bool:
    """A kind of evidence of one OP warns when every pair held its mode's limits yet the worst differs beyond
    the release's own floor (a failed pair is a refusal, said elsewhere)."""
    return bool(verdicts) and all(v.passed for v in verdicts) and not within_floor(
        noise_of(op, verdicts), release_floor(floors, op))


def warning_keys(shape: ShapeScore, floors: Floors | None) -> set[tuple[str, int]]:
    """(kind, OP) of every warning a shape's evidence must carry, from its stored verdicts alone: what promotion
    re-derives."""
    keys: set[tuple[str, int]] = set()
    ev = shape.arrangements
    if ev is not None:
        same: dict[str, list[OpVerdictModel]] = {}
        for lane in ev.lanes.values():
            for key, v in lane.same_as_plain.items():
                same.setdefault(key, []).append(v)
        keys |= {("slots", int(key)) for key, vs in same.items() if warns(Op(int(key)), vs, floors)}
        keys |= {("duplicates", int(key)) for key, v in (ev.duplicates or {}).items()
                 if warns(Op(int(key)), [v], floors)}
    if shape.repeats is not None:
        keys |= {("repeats", int(key)) for key, o in shape.repeats.ops.items() if warns(Op(int(key)), o.pairs, floors)}
    return keys


def worst_noise(parts: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The noise of several pairs over the same blocks (each :func:`harness.judging.reproduction.noise_floor` of one
    pair) as one floor: per OP the worst figure of any pair (flips too: every pair covers the same blocks)."""
    return worst_of_ops(parts, flips=max)


def within_floor(noise: Floor, floor: Floor | None) -> bool:
    """As close as the release is to itself: bitwise where the release is bitwise, else no figure beyond its
    floor."""
    if noise.bitwise:
        return True
    if floor is None or floor.bitwise:
        return False
    if noise.max_abs > floor.max_abs or noise.max_ulp > floor.max_ulp:
        return False
    if (noise.argmax_flips or 0) > (floor.argmax_flips or 0):
        return False
    if noise.min_cosine is not None and noise.min_cosine < (1.0 if floor.min_cosine is None else floor.min_cosine):
        return False
    return (noise.max_rel_l2 or 0.0) <= (floor.max_rel_l2 or 0.0)


def release_floor(floors: Floors | None, op: Op) -> Floor | None:
    found = (floors or {}).get(int(op))
    return None if found is None else Floor.model_validate(dict(found))


def noise_text(f: Floor | None) -> str:
    """A floor (or the noise between two sides) in words: 'bitwise', or its figures."""
    if f is None:
        return "not recorded"
    if f.bitwise:
        return "bitwise"
    text = f"max_abs {f.max_abs:.3g}, max_ulp {f.max_ulp:,}"
    if f.argmax_flips:
        text += f", {f.argmax_flips} argmax flips"
    if f.min_cosine is not None and f.min_cosine < 1.0:
        text += f", min cosine 1 - {1.0 - f.min_cosine:.2g}"
    return text


def limits_text(limits: Mapping[str, Any]) -> str:
    """The limits a pair held, in words: 'max_abs 0.0001, min_cosine 0.99999'."""
    if limits.get("bitwise"):
        return "bitwise"
    parts = [f"{key} {fmt(limits[key])}" for key in ("max_abs", "min_cosine", "max_rel_l2", "max_ulp")
             if limits.get(key) is not None]
    return ", ".join(parts) or "none"


def evidence_warning(k: int, op: Op, kind: EvidenceKind, verdicts: Sequence[OpVerdictModel], floors: Floors | None,
                     counts: tuple[int, int, int, int], where: str | None, more: str = "") -> EvidenceWarning | None:
    """The warning of one kind of evidence of one OP (:func:`warns`), or None. ``verdicts``: its pairs (the
    worst is named); ``counts``: blocks, blocks differing, units, units differing (of the worst pair)."""
    if not warns(op, verdicts, floors):
        return None
    floor, noise = release_floor(floors, op), noise_of(op, verdicts)
    worst = max(verdicts, key=lambda v: v.metrics.get("max_abs_finite") or 0.0)
    unit: Literal["windows", "rows"] = "windows" if op is Op.SEGMENTATION else "rows"
    blocks, blocks_differing, units, units_differing = counts
    mode = str(worst.limits.get("mode"))
    at = f", {where}" if where else ""
    line = (f"k={k} OP {int(op)} {kind}: {blocks_differing:,} of {blocks:,} blocks ({units_differing:,} of "
            f"{units:,} {unit}) {WHAT[kind]}{more}, beyond the release's own floor ({noise_text(floor)}): "
            f"{noise_text(noise)}{at}; within the limits of {mode} mode ({limits_text(worst.limits)}): "
            "reported, not refused")
    return EvidenceWarning.model_validate({
        "kind": kind, "op": int(op), "tolerance_mode": mode, "unit": unit, "blocks": blocks,
        "blocks_differing": blocks_differing, "units": units, "units_differing": units_differing,
        "max_abs": float(noise.max_abs), "max_ulp": int(noise.max_ulp), "where": where,
        "release_floor": noise_text(floor), "line": line})
