"""What a night could see: per shape and OP, the smallest effect its evidence would refuse.

A night that passes says "no defect this evidence can see". How much it can see depends on the corpus and
the backend: the statistical gate refuses a flip or failed-row rate only once the corpus is large enough
to bound it (95 % upper bound within the allowed rate), the tolerances refuse one element or row beyond
their figures, and the neighbour evidence refuses any bit on a backend that repeats itself (else a move
``NOISE_MULTIPLE`` times its run-to-run difference). :func:`sensitivity` states all three from the score's own
figures, so the report and score.json say what a green night is worth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from harness.base.figures import fmt
from harness.data.judge_limits import OpLimits, SegmentationLimits, VoiceprintLimits
from harness.data.ops import Op
from harness.data.schemas.results import OpSensitivity, ShapeScore
from harness.data.schemas.verdict_figures import VerdictFigures
from harness.judging.binomial import upper_bound

POWER = 0.95
NEIGHBOUR_MULTIPLE = 4.0  # harness.evidence.neighbour_evidence.NOISE_MULTIPLE (the evidence layer is above this one)


def _share(rate: float) -> str:
    return f"{100 * rate:.2g} %"


def refused_rate(n: int, allowed: float, power: float = POWER) -> float | None:
    """The smallest true rate of failing units that the gate (95 % upper bound of the observed rate within
    ``allowed``) refuses with probability ``power`` over ``n`` units; None when the gate refuses every corpus of
    this size (3/n above ``allowed``: not judged at its size)."""
    if n <= 0 or allowed <= 0 or upper_bound(0, n) > allowed:
        return None
    lo, hi = 0, n  # the largest count that still passes: upper_bound is increasing in it
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if upper_bound(mid, n) <= allowed:
            lo = mid
        else:
            hi = mid - 1
    if lo >= n:
        return None
    from scipy.stats import beta

    return float(beta.ppf(power, lo + 1, n - lo))  # P(Binomial(n, p) > lo) = power


def op_sensitivity(k: int, op: Op, figures: VerdictFigures, limits: OpLimits, neighbours: Any) -> OpSensitivity:
    """One OP's figures (module doc); ``neighbours``: the shape's neighbour evidence of this OP (None: none).
    ``figures``: the OP's verdict's (:attr:`OpVerdictModel.figures`)."""
    unit: Literal["audio frames", "rows"]
    if op is Op.SEGMENTATION:
        unit, n = "audio frames", int(figures.audio_frames or 0)
        allowed = limits.max_flip_rate if isinstance(limits, SegmentationLimits) else None
        what = "flip"
    else:
        unit, n = "rows", int(figures.judged_rows or figures.rows or 0)
        allowed = limits.max_failed_row_rate if isinstance(limits, VoiceprintLimits) else None
        what = "failed-row"
    rate = refused_rate(n, allowed) if allowed is not None else None
    if limits.bitwise:
        element = "any bit"
    else:
        parts = [f"max_abs {fmt(limits.max_abs)}"]
        if isinstance(limits, VoiceprintLimits):
            parts += [f"min_cosine {fmt(limits.min_cosine)}", f"max_rel_l2 {fmt(limits.max_rel_l2)}"]
        if isinstance(limits, SegmentationLimits):
            parts.append(f"more than {limits.max_confident_flips} confident flip(s)")
        element = "one unit beyond " + ", ".join(parts)
    floor = None
    if neighbours is not None:
        noise = 0.0 if neighbours.outcome == "bitwise" else neighbours.noise_max_abs
        floor = None if noise is None else float(noise) * (NEIGHBOUR_MULTIPLE if noise else 1.0)
    if allowed is None:
        rate_text = f"no {what} rate gate in {limits.mode} mode"
    elif rate is None:
        rate_text = f"no {what} rate: {n:,} {unit} cannot bound one within {_share(allowed)} (not judged at its size)"
    else:
        rate_text = (
            f"a {what} rate of {_share(rate)} or more ({POWER:.0%} power over {n:,} {unit}; allowed {_share(allowed)})"
        )
    leak = (
        "no neighbour evidence"
        if neighbours is None
        else "a leak of any size (the backend repeated itself)"
        if floor == 0.0
        else f"a leak moving answers more than {fmt(floor)} ({NEIGHBOUR_MULTIPLE:g}x the run-to-run difference)"
        if floor is not None
        else "no leak smaller than the backend's run-to-run noise (not measured)"
    )
    line = f"k={k} OP {int(op)} refuses {rate_text}; {element}; {leak}"
    return OpSensitivity(
        unit=unit,
        units=n,
        rate_allowed=allowed,
        rate_refused=rate,
        element=element,
        neighbour_floor=floor,
        line=line,
    )


def sensitivity(shape: ShapeScore, limits: Mapping[Op, OpLimits]) -> dict[str, OpSensitivity]:
    """Every OP of a scored shape (module doc)."""
    out: dict[str, OpSensitivity] = {}
    for key, v in sorted(shape.ops.items()):
        op = Op(int(key))
        nb = shape.neighbours.ops.get(key) if shape.neighbours is not None else None
        out[key] = op_sensitivity(int(shape.shape), op, v.figures, limits[op], nb)
    return out
