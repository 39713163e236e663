"""Verdicts: a score against its tolerance, per OP and shape, with the reasons spelt out.

The rules (the promotion gate applies them to every OP of a shape):

- every metric within its limit on every block (OP 0) or every row (OP 1/2);
- nothing non-finite, no row on one side only;
- the 95 % upper confidence bound of the flip rate (OP 0: frames whose class flips) or of
  the failed-row rate (OP 1/2) within the allowed rate: with no failure the bound is 3/n,
  so a corpus too small to show the rate is low cannot promote a shape.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from harness.binomial import upper_bound
from harness.errors import ScoringError
from harness.scoring import SegmentationScore, VoiceprintScore
from harness.tolerances import SegmentationTolerance, VoiceprintTolerance


@dataclass
class OpVerdict:
    op: int
    shape: int
    passed: bool
    reasons: list[str]
    metrics: dict
    limits: dict
    bound: dict
    failing: list[dict] = field(default_factory=list)  # worst offenders, for the report

    def to_dict(self) -> dict:
        return asdict(self)


def segmentation_limits(tol: SegmentationTolerance, floor: dict | None) -> dict:
    if tol.mode == "bitwise" or (tol.mode == "noise-floor" and floor and floor.get("bitwise")):
        return {"mode": tol.mode, "bitwise": True, "max_abs": 0.0, "max_ulp": 0, "max_confident_flips": 0,
                "max_flip_rate": tol.max_flip_rate, "near_tie_margin": tol.near_tie_margin}
    if tol.mode == "noise-floor":
        if floor is None:
            raise ScoringError("tolerance mode 'noise-floor' needs a golden recorded with its noise floor")
        f = tol.noise_floor_factor
        # ULP is reported, not gated, unless configured: near zero a tiny change is many ULP
        return {"mode": tol.mode, "bitwise": False, "max_abs": floor["max_abs"] * f,
                "max_ulp": tol.max_ulp, "max_confident_flips": tol.max_confident_flips,
                "max_flip_rate": tol.max_flip_rate, "near_tie_margin": tol.near_tie_margin}
    return {"mode": tol.mode, "bitwise": False, "max_abs": tol.max_abs, "max_ulp": tol.max_ulp,
            "max_confident_flips": tol.max_confident_flips, "max_flip_rate": tol.max_flip_rate,
            "near_tie_margin": tol.near_tie_margin}


def voiceprint_limits(tol: VoiceprintTolerance, floor: dict | None) -> dict:
    if tol.mode == "bitwise" or (tol.mode == "noise-floor" and floor and floor.get("bitwise")):
        return {"mode": tol.mode, "bitwise": True, "max_abs": 0.0, "max_ulp": 0, "min_cosine": 1.0,
                "max_rel_l2": 0.0, "max_failed_row_rate": tol.max_failed_row_rate}
    if tol.mode == "noise-floor":
        if floor is None:
            raise ScoringError("tolerance mode 'noise-floor' needs a golden recorded with its noise floor")
        f = tol.noise_floor_factor
        return {"mode": tol.mode, "bitwise": False, "max_abs": floor["max_abs"] * f,
                "max_ulp": tol.max_ulp,
                "min_cosine": 1.0 - (1.0 - floor.get("min_cosine", 1.0)) * f,
                "max_rel_l2": floor.get("max_rel_l2", 0.0) * f, "max_failed_row_rate": tol.max_failed_row_rate}
    return {"mode": tol.mode, "bitwise": False, "max_abs": tol.max_abs, "max_ulp": tol.max_ulp,
            "min_cosine": tol.min_cosine, "max_rel_l2": tol.max_rel_l2,
            "max_failed_row_rate": tol.max_failed_row_rate}


def judge_segmentation(score: SegmentationScore, tol: SegmentationTolerance, shape: int,
                       floor: dict | None = None) -> OpVerdict:
    lim = segmentation_limits(tol, floor)
    totals = score.totals()
    reasons: list[str] = []
    failing: list[dict] = []
    ids = score.block_ids
    if totals["non_finite"]:
        b = int(np.flatnonzero(score.non_finite)[0])
        reasons.append(f"OP 0 non_finite: {totals['non_finite']} NaN/Inf value(s), first in block {ids[b]!r}")
        failing.append({"block": ids[b], "metric": "non_finite", "value": int(score.non_finite[b])})
    if lim["bitwise"]:
        if not totals["bitwise"] and not totals["non_finite"]:
            b = int(np.argmax(score.max_ulp))
            reasons.append(f"OP 0 bitwise: {totals['fraction_differing']:.2%} of elements differ "
                           f"(max_abs {totals['max_abs']:.3g}, max_ulp {totals['max_ulp']}), e.g. block {ids[b]!r}")
            failing += [{"block": ids[i], "metric": "bitwise", "value": int(score.max_ulp[i])}
                        for i in np.flatnonzero(score.differs)[:20]]
    else:
        over = np.flatnonzero(np.nan_to_num(score.max_abs, nan=0.0) > lim["max_abs"])
        if over.size:
            worst = over[np.argmax(score.max_abs[over])]
            w = int(np.nanargmax(score.window_max_abs[worst]))
            reasons.append(f"OP 0 max_abs: {score.max_abs[worst]:.3g} > {lim['max_abs']:.3g} in {over.size} "
                           f"block(s), worst block {ids[worst]!r} window {w}")
            failing += [{"block": ids[i], "metric": "max_abs", "value": float(score.max_abs[i])} for i in over[:20]]
        if lim["max_ulp"] is not None:
            over = np.flatnonzero(score.max_ulp > lim["max_ulp"])
            if over.size:
                worst = over[np.argmax(score.max_ulp[over])]
                reasons.append(f"OP 0 max_ulp: {int(score.max_ulp[worst])} > {lim['max_ulp']} in {over.size} "
                               f"block(s), worst block {ids[worst]!r}")
    confident = totals["argmax_flips_confident"]
    if confident > lim["max_confident_flips"]:
        b = int(np.argmax(score.argmax_confident))
        reasons.append(f"OP 0 confident_flips: {confident} frame(s) changed class with a golden margin >= "
                       f"{lim['near_tie_margin']} (allowed {lim['max_confident_flips']}), most in block {ids[b]!r}")
        failing += [{"block": ids[i], "metric": "confident_flips", "value": int(score.argmax_confident[i])}
                    for i in np.flatnonzero(score.argmax_confident)[:20]]
    flips = totals["argmax_flips_near_tie"] + confident
    n = totals["audio_frames"]
    bound = _bound(flips, n, lim["max_flip_rate"], "frames")
    if lim["bitwise"] and flips and not reasons:
        reasons.append(f"OP 0 flips: {flips} frame(s) changed class")
    if bound["upper95"] > lim["max_flip_rate"]:
        reasons.append(_bound_reason("OP 0 flip_rate", bound))
    return OpVerdict(0, shape, not reasons, reasons, totals, lim, bound, failing)


def judge_voiceprint(score: VoiceprintScore, tol: VoiceprintTolerance, shape: int,
                     floor: dict | None = None) -> OpVerdict:
    op = int(score.op)
    lim = voiceprint_limits(tol, floor)
    totals = score.totals()
    reasons: list[str] = []
    failing: list[dict] = []

    def where(i: int) -> str:
        return f"block {score.block_ids[i]!r} window {int(score.window[i])} speaker {int(score.speaker[i])}"

    bad = score.non_finite > 0
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        reasons.append(f"OP {op} non_finite: {int(bad.sum())} row(s) hold NaN/Inf, first {where(i)}")
        failing += [{"block": str(score.block_ids[j]), "window": int(score.window[j]), "speaker": int(score.speaker[j]),
                     "metric": "non_finite", "value": int(score.non_finite[j])} for j in np.flatnonzero(bad)[:20]]
    if lim["bitwise"]:  # bits, not metrics: float64 cosine of equal rows may round below 1
        checks = [("bitwise (max_ulp)", score.differs, score.max_ulp, ">", 0, np.argmax)]
    else:
        checks = [
            ("cosine", score.cosine < lim["min_cosine"], score.cosine, "<", lim["min_cosine"], np.argmin),
            ("max_abs", score.max_abs > lim["max_abs"], score.max_abs, ">", lim["max_abs"], np.argmax),
            ("rel_l2", score.rel_l2 > lim["max_rel_l2"], score.rel_l2, ">", lim["max_rel_l2"], np.argmax),
        ]
    if lim["max_ulp"] is not None and not lim["bitwise"]:
        checks.append(("max_ulp", score.max_ulp > lim["max_ulp"], score.max_ulp, ">", lim["max_ulp"], np.argmax))
    for name, over, values, sign, limit, pick in checks:
        over = over & ~bad
        bad_rows = np.flatnonzero(over)
        if bad_rows.size:
            i = int(bad_rows[pick(values[bad_rows])])
            reasons.append(f"OP {op} {name}: {values[i]:.9g} {sign} {limit:.9g} in {bad_rows.size} row(s), "
                           f"worst {where(i)}")
            failing += [{"block": str(score.block_ids[j]), "window": int(score.window[j]),
                         "speaker": int(score.speaker[j]), "metric": name, "value": float(values[j])}
                        for j in bad_rows[:20]]
    for kind, rows in (("missing", score.missing), ("extra", score.extra)):
        if rows:
            side = "golden only" if kind == "missing" else "run only"
            reasons.append(f"OP {op} {kind}_rows: {len(rows)} row(s) on the {side} side, first (block "
                           f"{rows[0][0]!r}, window {rows[0][1]}, speaker {rows[0][2]})")
    if score.inputs_differ:
        reasons.append(f"OP {op} inputs: {score.inputs_differ} matched row(s) were called with other WEIGHTS "
                       "than the golden's (not an isolated comparison)")
    row_failed = bad.copy()
    for _, over, *_ in checks:
        row_failed |= over
    failures = int(row_failed.sum()) + len(score.missing) + len(score.extra)
    n = totals["rows"] + len(score.missing) + len(score.extra)
    bound = _bound(failures, n, lim["max_failed_row_rate"], "rows")
    if bound["upper95"] > lim["max_failed_row_rate"]:
        reasons.append(_bound_reason(f"OP {op} failed_row_rate", bound))
    return OpVerdict(op, shape, not reasons, reasons, totals, lim, bound, failing)


def _bound(failures: int, n: int, allowed: float, unit: str) -> dict:
    needed = int(np.ceil(3.0 / allowed)) if allowed > 0 else None
    return {"unit": unit, "n": int(n), "failures": int(failures), "upper95": upper_bound(failures, n),
            "allowed": allowed, "n_needed_at_zero": needed}


def _bound_reason(name: str, bound: dict) -> str:
    if bound["failures"] == 0:
        return (f"{name}: corpus too small to bound the rate: 3/{bound['n']} = {bound['upper95']:.3g} > allowed "
                f"{bound['allowed']:.3g} (needs >= {bound['n_needed_at_zero']} {bound['unit']})")
    return (f"{name}: 95% upper bound {bound['upper95']:.3g} > allowed {bound['allowed']:.3g} "
            f"({bound['failures']} of {bound['n']} {bound['unit']})")
