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

from harness.base.figures import fmt
from harness.data.judge_limits import OpLimits
from harness.data.ops import Op
from harness.data.schemas.files import Floor
from harness.data.schemas.refusals import EvidenceKind, EvidenceWarning
from harness.data.schemas.results import OpVerdictModel
from harness.data.tolerances import Tolerances
from harness.evidence.kind import Floors
from harness.judging.judges import floor_figures, judge_for
from harness.judging.lane_scoring import op_limits
from harness.judging.reproduction import noise_floor, worst_of_ops

WHAT = {
    "slots": "answer differently in another slot or beside other neighbours",
    "duplicates": "give two answers when sent twice in one request",
    "repeats": "answer differently from run to run",
    "golden": "answer differently from the golden",
}
# with the neighbours told apart (their own evidence bitwise at fixed slots), what a slot or a copy differs by
WHERE_ONLY = {
    "slots": "answer differently in another slot",
    "duplicates": "answer differently at the position of their copy in one request",
}
NEIGHBOURS_CLEAN = " (the neighbours' audio moved nothing: bitwise at fixed slots)"


def evidence_limits(tolerances: Tolerances, ops: Sequence[Op], floors: Floors | None) -> dict[Op, OpLimits]:
    """Every OP's limits for any pair of lanes: exactly those a packed lane gets against the golden (see module
    doc). ``floors``: the golden's noise floors (what ``noise-floor`` mode is held to)."""
    return op_limits(tolerances, ops, {int(k): dict(v) for k, v in (floors or {}).items()})


def noise_of(op: Op, verdicts: Sequence[OpVerdictModel]) -> Floor:
    """How far apart the two sides of one OP's pairs are (the worst pair), measured as the golden's floor is
    (the same figures: :func:`harness.judging.reproduction.noise_floor`)."""
    return worst_noise([noise_floor([v]) for v in verdicts])[str(int(op))]


def warns(op: Op, verdicts: Sequence[OpVerdictModel], floors: Floors | None) -> bool:
    """A kind of evidence of one OP warns when every pair held its mode's limits yet the worst differs beyond
    the release's own floor (a failed pair is a refusal, said elsewhere)."""
    return (
        bool(verdicts)
        and all(v.passed for v in verdicts)
        and not within_floor(op, noise_of(op, verdicts), release_floor(floors, op))
    )


def worst_noise(parts: Sequence[Mapping[str, Any]]) -> dict[str, Floor]:
    """The noise of several pairs over the same blocks (each :func:`harness.judging.reproduction.noise_floor` of one
    pair) as one floor: per OP the worst figure of any pair (flips too: every pair covers the same blocks). The
    parts in the manifest's JSON form, as the judges' floor figures take them; per OP key, a floor."""
    return {key: Floor.model_validate(floor) for key, floor in worst_of_ops(parts, flips=max).items()}


def within_floor(op: Op, noise: Floor, floor: Floor | None) -> bool:
    """As close as the release is to itself: bitwise where the release is bitwise, else no figure beyond its
    floor (the OP's judge's figures: :func:`harness.judging.judges.floor_figures.within`)."""
    return floor_figures.within(
        judge_for(op).floor_figures, noise.model_dump(), None if floor is None else floor.model_dump()
    )


def release_floor(floors: Floors | None, op: Op) -> Floor | None:
    found = (floors or {}).get(int(op))
    return None if found is None else Floor.model_validate(dict(found))


def noise_text(op: Op, f: Floor | None) -> str:
    """A floor (or the noise between two sides) in words: 'bitwise', or its figures."""
    return floor_figures.words(judge_for(op).floor_figures, None if f is None else f.model_dump())


def limits_text(limits: Mapping[str, Any]) -> str:
    """The limits a pair held, in words: 'max_abs 0.0001, min_cosine 0.99999'. ``limits``: a verdict's, as the
    score file holds them (any judge's or kind's keys), read by key."""
    if limits.get("bitwise"):  # the limits by name, each judge's own
        return "bitwise"
    parts = [
        f"{key} {fmt(limits[key])}"
        for key in ("max_abs", "min_cosine", "max_rel_l2", "max_ulp")
        if limits.get(key) is not None
    ]
    return ", ".join(parts) or "none"


def where_only(kind: EvidenceKind) -> str:
    """What a slot's or a copy's difference is when the neighbour evidence answered the OP bitwise at fixed
    slots: its own (``WHERE_ONLY``), said so."""
    return f"{WHERE_ONLY[kind]}{NEIGHBOURS_CLEAN}"


def evidence_warning(
    k: int,
    op: Op,
    kind: EvidenceKind,
    verdicts: Sequence[OpVerdictModel],
    floors: Floors | None,
    counts: tuple[int, int, int, int],
    where: str | None,
    what: str | None = None,
) -> EvidenceWarning | None:
    """The warning of one kind of evidence of one OP (:func:`warns`), or None. ``verdicts``: its pairs (the
    worst is named); ``counts``: blocks, blocks differing, units, units differing (of the worst pair); ``what``: what
    the pairs do, in words (default: the kind's, ``WHAT``; :func:`where_only` where the neighbours are clean)."""
    if not warns(op, verdicts, floors):
        return None
    floor, noise = release_floor(floors, op), noise_of(op, verdicts)
    worst = max(verdicts, key=lambda v: v.figures.max_abs_finite or 0.0)
    unit: Literal["windows", "rows"] = "windows" if op is Op.SEGMENTATION else "rows"
    blocks, blocks_differing, units, units_differing = counts
    mode = str(worst.limits.get("mode"))  # a verdict's limits: each judge's own, by name as the score holds them
    at = f", {where}" if where else ""
    line = (
        f"k={k} OP {int(op)} {kind}: {blocks_differing:,} of {blocks:,} blocks ({units_differing:,} of "
        f"{units:,} {unit}) {what or WHAT[kind]}, beyond the release's own floor ({noise_text(op, floor)}): "
        f"{noise_text(op, noise)}{at}; within the limits of {mode} mode ({limits_text(worst.limits)}): "
        "reported, not refused"
    )
    return EvidenceWarning.model_validate(
        {
            "kind": kind,
            "op": int(op),
            "tolerance_mode": mode,
            "unit": unit,
            "blocks": blocks,
            "blocks_differing": blocks_differing,
            "units": units,
            "units_differing": units_differing,
            "max_abs": float(noise.max_abs),
            "max_ulp": int(noise.max_ulp),
            "where": where,
            "release_floor": noise_text(op, floor),
            "line": line,
        }
    )
