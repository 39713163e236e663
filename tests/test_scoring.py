"""The judges: flips (near-tie / confident), row matching by key, chained attribution, NaN never passes,
and checks that say observed vs allowed, how many of how many, and where."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs
from harness.judging.judges import SegmentationJudge, SegmentationTolerance, VoiceprintJudge, VoiceprintTolerance
from harness.judging.judges.judge_base import Check, holds

G = Geometry(window_samples=1000, frames_per_window=10, frame_step=100, windows_per_block=2, embedding_dim=4)


def seg(logprobs, valid=None, ids=("a", "b")):
    b, n = logprobs.shape[:2]
    valid = np.full((b, n), 1000, np.int32) if valid is None else valid
    return SegmentationOutputs(list(ids), valid, logprobs.astype(np.float32))


def judge_seg(golden, run, tol=SegmentationTolerance(), floor=None, sample_bound=True):
    j = SegmentationJudge()
    ev = j.evidence(Op.SEGMENTATION, G, j.limits(tol, floor, sample_bound), "isolated")
    notes = ev.add(golden, run)
    return ev.verdict(2), notes


def judge_vp(golden, run, tol=VoiceprintTolerance(), voiceprint_inputs="isolated", notes=None, floor=None):
    j = VoiceprintJudge()
    ev = j.evidence(Op.VOICEPRINT, G, j.limits(tol, floor), voiceprint_inputs)
    ev.add(golden, run, notes)
    return ev.verdict(2)


def failed(v, metric):
    return [c for c in v.checks if c.metric == metric and c.failed]


def base():
    rng = np.random.default_rng(0)
    lp = rng.standard_normal((2, 2, 10, 7)).astype(np.float32)
    lp[..., 0] += 5.0  # class 0 wins by a wide margin everywhere ...
    lp[0, 1, 3, 2] = lp[0, 1, 3, 0] - 0.01  # ... but one near tie
    return lp


def test_identical_outputs_are_bitwise_and_pass_every_mode():
    lp = base()
    for mode in ("bitwise", "tolerance"):
        v, _ = judge_seg(seg(lp), seg(lp.copy()), SegmentationTolerance(mode=mode, max_flip_rate=0.5))
        assert v.passed and v.metrics["bitwise"]


def test_flips_are_counted_and_classed_by_the_golden_margin():
    golden = base()
    run = golden.copy()
    run[0, 1, 3, 2] += 0.02  # the near tie flips to class 2
    run[1, 0, 5, 4] += 10.0  # a confident frame flips to class 4 (speakers {0, 1})
    v, notes = judge_seg(seg(golden), seg(run), SegmentationTolerance(max_abs=100.0, max_flip_rate=1.0))
    t = v.metrics
    assert t["argmax_flips_near_tie"] == 1 and t["argmax_flips_confident"] == 1
    assert notes == {("a", 1): (1, 0), ("b", 0): (0, 1)}
    # class 0 is the empty set: {} -> {1} changes one speaker's activity, {} -> {0, 1} changes two
    assert t["mask_flips_near_tie"] == 1 and t["mask_flips_confident"] == 2
    (c,) = failed(v, "confident_flips")
    assert c.observed == 1 and c.allowed == 0 and c.offending == 1 and c.total == 40
    assert c.where == "first block 'b' window 0 frame 5"
    assert c.line().startswith(
        "OP 0 confident_flips: 1 > 0 allowed (would pass at 1), 1 of 40 audio frames (2.5 %), first block 'b'"
    )


def test_flips_where_the_window_holds_no_audio_do_not_count():
    golden = base()
    run = golden.copy()
    run[1, 1, 9, 4] += 10.0  # last frame of a window whose VALID ends before it
    valid = np.full((2, 2), 1000, np.int32)
    valid[1, 1] = 850
    v, _ = judge_seg(seg(golden, valid), seg(run, valid), SegmentationTolerance(max_abs=100.0))
    assert v.metrics["argmax_flips_confident"] == 0
    assert v.metrics["max_abs"] > 1.0  # the values still count


def test_max_abs_says_how_many_of_how_many_and_where():
    golden = base()
    run = golden.copy()
    run[1, 1, 2, :3] += np.float32(0.5)  # three elements of one window
    v, _ = judge_seg(seg(golden), seg(run), SegmentationTolerance(max_flip_rate=1.0, max_confident_flips=10))
    (c,) = failed(v, "max_abs")
    assert c.observed == pytest.approx(0.5, rel=1e-5) and c.allowed == 1e-4
    assert (c.offending, c.total, c.unit) == (1, 4, "windows") and c.where == "worst block 'b' window 1"
    assert c.note == "3 of 280 elements over the limit"
    assert "golden record --regen" in c.hint
    assert c.line().startswith(
        "OP 0 max_abs: 0.5 > 0.0001 allowed (would pass at 0.5), 1 of 4 windows (25 %), worst block 'b' window 1"
    )


def test_nan_never_passes():
    golden = base()
    run = golden.copy()
    run[1, 0, 2, 3] = np.nan
    v, _ = judge_seg(
        seg(golden), seg(run), SegmentationTolerance(max_abs=1e9, max_flip_rate=1.0, max_confident_flips=10**6)
    )
    (c,) = failed(v, "non_finite")
    assert not v.passed and c.observed == 1 and c.where == "first block 'b' window 0"
    assert v.metrics["max_abs"] is None  # a non-finite value has no finite max: never "within tolerance"


def test_flip_rate_bound_refuses_a_corpus_too_small():
    lp = base()
    v, _ = judge_seg(seg(lp), seg(lp), SegmentationTolerance(max_flip_rate=1e-3))
    (c,) = failed(v, "flip_rate_upper95")
    assert c.observed == pytest.approx(3 / 40) and "needs >= 3,000 audio frames" in c.note
    assert "larger corpus" in c.hint


def test_reproduction_limits_have_no_sample_bound():
    lp = base()
    v, _ = judge_seg(seg(lp), seg(lp), SegmentationTolerance(max_flip_rate=1e-3), sample_bound=False)
    assert v.passed and not any(c.metric == "flip_rate_upper95" for c in v.checks)


def vp(rows, order=None, weights=None):
    ids, windows, speakers, emb = rows
    order = np.arange(len(ids)) if order is None else np.asarray(order)
    w = np.ones((len(ids), 10), np.float32) if weights is None else weights
    return VoiceprintOutputs(
        Op.VOICEPRINT,
        np.array(ids, dtype=object)[order],
        np.arange(len(ids), dtype=np.int32),
        np.array(windows, np.int32)[order],
        np.array(speakers, np.int32)[order],
        np.asarray(w, np.float32)[order],
        np.asarray(emb, np.float32)[order],
    )


def vp_rows(n=80, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"b{i // 4}" for i in range(n)]
    windows = [(i // 2) % 2 for i in range(n)]
    speakers = [i % 2 for i in range(n)]
    return ids, windows, speakers, rng.standard_normal((n, 4))


def test_rows_are_matched_by_key_not_position():
    rows = vp_rows()
    shuffled = np.random.default_rng(3).permutation(80)
    v = judge_vp(vp(rows), vp(rows, shuffled))
    assert v.passed and v.metrics["bitwise"] and v.metrics["min_cosine"] == 1.0  # exactly: bit-identical rows
    # positional comparison would have failed: the shuffled embeddings differ row by row
    assert not np.array_equal(vp(rows).embedding, vp(rows, shuffled).embedding)


def test_a_row_on_one_side_only_fails():
    rows = vp_rows()
    short = tuple(x[:-1] for x in rows)
    v = judge_vp(vp(rows), vp(short))
    (c,) = failed(v, "missing_rows")
    assert c.observed == 1 and c.where == "first block 'b19' window 1 speaker 1"
    v2 = judge_vp(vp(short), vp(rows))
    assert failed(v2, "extra_rows")[0].where == "first block 'b19' window 1 speaker 1"


def test_voiceprint_metrics_and_limits():
    ids, w, s, emb = rows = vp_rows()
    moved = emb.copy()
    moved[7] += 1e-3
    v = judge_vp(vp(rows), vp((ids, w, s, moved)))
    assert not v.passed
    (c,) = failed(v, "max_abs")
    assert c.observed == pytest.approx(1e-3, rel=1e-3) and c.where == "worst block 'b1' window 1 speaker 1"
    assert (c.offending, c.total) == (1, 80)
    assert failed(v, "max_rel_l2")
    nan = emb.copy()
    nan[3, 2] = np.nan
    v2 = judge_vp(vp(rows), vp((ids, w, s, nan)), VoiceprintTolerance(min_cosine=-1, max_abs=1e9, max_rel_l2=1e9))
    (c2,) = failed(v2, "non_finite_rows")
    assert c2.observed == 1 and c2.where == "first block 'b0' window 1 speaker 1"


def test_isolated_mode_fails_rows_called_with_other_weights():
    rows = vp_rows()
    weights = np.ones((80, 10), np.float32)
    weights[5, 3] = 0.0
    v = judge_vp(vp(rows), vp(rows, weights=weights))
    (c,) = failed(v, "inputs_differ")
    assert c.observed == 1 and "isolated mode" in c.note


def test_chained_mode_attributes_changed_masks_to_the_flips_that_caused_them():
    """Rows whose WEIGHTS changed are judged by the OP 0 flips of their window: near-tie flips are
    counted against their own rate limit, a confident flip fails, a change nothing explains fails."""
    rows = vp_rows()
    weights = np.ones((80, 10), np.float32)
    weights[5, 3] = 0.0  # row 5: block b1 window 0 speaker 1
    ids, w, s, emb = rows
    changed = emb.copy()
    changed[5] += 1.0  # its embedding changes with its mask: not an embedding failure
    run = vp((ids, w, s, changed), weights=weights)
    loose = VoiceprintTolerance(max_mask_changed_row_rate=0.2)
    near = judge_vp(vp(rows), run, loose, voiceprint_inputs="chained", notes={("b1", 0): (1, 0)})
    assert near.passed, near.reasons
    assert near.metrics["changed_near_tie"] == 1
    rate = next(c for c in near.checks if c.metric == "mask_changed_near_tie_rate_upper95")
    assert rate.offending == 1 and rate.ok
    # 1 in 80: bound 0.058 > 0.05
    strict = judge_vp(vp(rows), run, voiceprint_inputs="chained", notes={("b1", 0): (1, 0)})
    assert failed(strict, "mask_changed_near_tie_rate_upper95")
    confident = judge_vp(vp(rows), run, voiceprint_inputs="chained", notes={("b1", 0): (0, 2)})
    (c,) = failed(confident, "mask_changed_by_confident_flip")
    assert c.observed == 1 and c.where == "first block 'b1' window 0 speaker 1"
    unexplained = judge_vp(vp(rows), run, voiceprint_inputs="chained", notes={})
    assert failed(unexplained, "inputs_differ")


def test_chained_mode_reports_rows_lost_through_near_ties_without_failing():
    rows = vp_rows()
    short = tuple(x[:-1] for x in rows)
    lost = judge_vp(vp(rows), vp(short), voiceprint_inputs="chained", notes={("b19", 1): (2, 0)})
    assert lost.passed, lost.reasons
    c = next(c for c in lost.checks if c.metric == "rows_gained_or_lost_near_tie")
    assert c.observed == 1 and c.ok is None and "1 lost, 0 gained" in c.note


def test_noise_floor_mode_uses_the_golden_own_noise():
    golden = base()
    run = golden + np.float32(1e-6)
    tol = SegmentationTolerance(mode="noise-floor", max_flip_rate=1.0)
    v, _ = judge_seg(seg(golden), seg(run), tol, floor={"bitwise": False, "max_abs": 1e-5, "max_ulp": 500})
    assert v.passed
    v2, _ = judge_seg(seg(golden), seg(run), tol, floor={"bitwise": True, "max_abs": 0.0, "max_ulp": 0})
    assert not v2.passed and v2.limits["bitwise"] and failed(v2, "differing_elements")


@given(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["<=", ">=", "=="]),
    st.floats(allow_nan=False, allow_infinity=False),
)
def test_a_check_holds_only_for_a_finite_observation(observed, relation, allowed):
    import math

    result = holds(observed, relation, allowed)
    if not math.isfinite(observed):
        assert result is False
    c = Check.gate(0, "m", observed, relation, allowed)
    assert c.ok == result and (c.observed is None) == (not math.isfinite(observed))


@given(st.integers(0, 2**32 - 1), st.floats(1e-7, 3.0), st.floats(0.0, 0.3))
def test_pruned_flip_search_equals_a_full_argmax_comparison(seed, noise, tie_fraction):
    """Only frames whose golden margin is within 2 max|d| are searched: the result must be exact."""
    rng = np.random.default_rng(seed)
    golden = rng.standard_normal((3, 2, 10, 7)).astype(np.float32)
    ties = rng.random((3, 2, 10)) < tie_fraction
    top = golden.argmax(-1)
    other = (top + 1) % 7
    flat_g = golden.reshape(-1, 7)
    sel = np.flatnonzero(ties.reshape(-1))
    flat_g[sel, other.reshape(-1)[sel]] = flat_g[sel, top.reshape(-1)[sel]] - np.float32(1e-4)
    run = golden + (noise * rng.standard_normal(golden.shape)).astype(np.float32)
    valid = rng.integers(0, 1001, size=(3, 2)).astype(np.int32)
    v, notes = judge_seg(
        seg(golden, valid, ("a", "b", "c")),
        seg(run, valid, ("a", "b", "c")),
        SegmentationTolerance(near_tie_margin=0.05),
    )
    audio = (np.arange(10) * 100)[None, None, :] < valid[..., None]
    flips = (golden.argmax(-1) != run.argmax(-1)) & audio
    assert v.metrics["flips"] == int(flips.sum())
    per_window = {(b, w): sum(n) for (b, w), n in notes.items()}
    for i, b in enumerate("abc"):
        for w in range(2):
            assert per_window.get((b, w), 0) == int(flips[i, w].sum())


@pytest.mark.parametrize(
    "part,whole,text",
    [
        (230, 230, "100 %"),
        (37_631, 37_632, "99.99 %"),
        (999, 1000, "99.9 %"),
        (1, 3, "33 %"),
        (1, 40, "2.5 %"),
        (1, 1_000_000, "0.0001 %"),
    ],
)
def test_a_share_is_never_rounded_to_all_or_none(part, whole, text):
    from harness.judging.judges.judge_base import percent

    assert percent(part, whole) == text


def reproduce(golden: LaneOutputs, rerun: LaneOutputs, floors: dict) -> dict:
    from harness.data.tolerances import Tolerances
    from harness.judging.reproduction import reproduction, reproduction_scorer

    scorer = reproduction_scorer(golden.ops(), G, floors, Tolerances(), "isolated")
    scorer.add(golden, rerun)
    return reproduction("rel@0123456789ab", scorer.verdicts(), False, True, [])


def lanes(lp, emb_rows):
    return LaneOutputs(seg(lp), {Op.VOICEPRINT: vp(emb_rows)})


FLOORS = {
    0: {"bitwise": False, "max_abs": 1e-6, "max_ulp": 16, "argmax_flips": 0},
    1: {"bitwise": False, "max_abs": 1e-6, "max_ulp": 16, "min_cosine": 0.999999, "max_rel_l2": 1e-6},
}


def test_a_rerun_within_the_floor_reproduces_but_nan_or_a_missing_row_never_does():
    """Golden reproduction is the judges in noise-floor mode: 1e-7 noise is within a 1e-6 floor,
    the same noise plus one NaN window is not (the NaN is not read past), nor is a row lost."""
    lp, rows = base(), vp_rows()
    noisy = lp + np.float32(1e-7) * np.sign(lp)
    assert reproduce(lanes(lp, rows), lanes(noisy, rows), FLOORS).status == "within-noise-floor"

    nan = noisy.copy()
    nan[1, 0, 4, :] = np.nan
    r = reproduce(lanes(lp, rows), lanes(nan, rows), FLOORS)
    assert not r.passed and r.status == "failed" and "OP 0 non_finite" in r.summary

    short = tuple(x[:-1] for x in rows)
    r = reproduce(lanes(lp, rows), lanes(noisy, short), FLOORS)
    assert not r.passed and "OP 1 missing_rows" in r.summary


# ---------------------------------------------------------------- figures over non-finite values
def _strict_json(verdict) -> dict:
    """The verdict as the score file holds it: JSON with no bare NaN/Infinity (as harness.base.jsonio writes)."""
    import json

    return json.loads(json.dumps(verdict.model_dump(mode="json"), allow_nan=False))


def test_voiceprint_figures_over_nan_rows_are_non_finite_never_perfect():
    """Rows bit-identical except two NaN rows: min_cosine / max_abs / max_rel_l2 / max_ulp were
    1.0 / 0 / 0 / 0 (the finite rows only, a perfect-looking OP that fails). Now each figure is
    None (non-finite), its check fails with 'non-finite (2 of 80 rows)', the finite-only figure is
    kept under its own name and said to be finite-only."""
    ids, w, s, emb = rows = vp_rows()
    nan = emb.copy()
    nan[[3, 41]] = np.nan
    v = judge_vp(vp(rows), vp((ids, w, s, nan)))
    m = _strict_json(v)["metrics"]
    for name in ("min_cosine", "max_abs", "max_rel_l2", "max_ulp"):
        assert m[name] is None, name
    assert (m["min_cosine_finite"], m["max_abs_finite"], m["max_rel_l2_finite"]) == (1.0, 0.0, 0.0)
    assert m["figures_non_finite"] == {"count": 2, "of": 80, "unit": "rows"}
    for name in ("min_cosine", "max_abs", "max_rel_l2"):
        (c,) = failed(v, name)
        assert c.observed is None and (c.offending, c.total, c.unit) == (2, 80, "rows")
        assert c.line().startswith(f"OP 1 {name}: non-finite (2 of 80 rows), ")
        assert "first non-finite at block 'b0' window 1 speaker 1" in c.line()
        assert "over the 78 finite rows only" in c.note
    assert c.line() in v.reasons
    ulp = next(c for c in v.checks if c.metric == "max_ulp")  # reported, not gated: still not a number
    assert ulp.ok is None and ulp.line().startswith("OP 1 max_ulp: non-finite (2 of 80 rows) (reported, not gated)")


def test_voiceprint_figures_without_nan_are_unchanged():
    ids, w, s, emb = rows = vp_rows()
    moved = emb.copy()
    moved[7] += 1e-3
    v = judge_vp(vp(rows), vp((ids, w, s, moved)))
    m = v.metrics
    assert m["max_abs"] == m["max_abs_finite"] > 0 and m["min_cosine"] == m["min_cosine_finite"] < 1
    assert m["figures_non_finite"]["count"] == 0
    (c,) = failed(v, "max_abs")
    # 0.001000002 reads 0.001; the least limit that passes it, at those digits, is 0.00101
    assert c.line().startswith("OP 1 max_abs: 0.001 > 0.0001 allowed (would pass at 0.00101), 1 of 80 rows")


def test_voiceprint_bitwise_mode_names_non_finite_figures():
    ids, w, s, emb = rows = vp_rows()
    nan = emb.copy()
    nan[3, 0] = np.nan
    v = judge_vp(vp(rows), vp((ids, w, s, nan)), VoiceprintTolerance(mode="bitwise"))
    (c,) = failed(v, "differing_rows")
    assert c.note == "max_abs non-finite, min cosine non-finite"


def test_segmentation_figures_over_a_nan_window_are_non_finite():
    """OP 0 max_abs was gated on the finite windows only (0 <= 1e-4: 'ok' beside a NaN window)."""
    golden = base()
    run = golden.copy()
    run[1, 0, 2, 3] = np.nan
    v, _ = judge_seg(seg(golden), seg(run), SegmentationTolerance(max_flip_rate=1.0, max_confident_flips=10**6))
    m = _strict_json(v)["metrics"]
    assert m["max_abs"] is None and m["mean_abs"] is None and m["max_ulp"] is None
    assert m["max_abs_finite"] == 0.0 and m["figures_non_finite"] == {"count": 1, "of": 4, "unit": "windows"}
    (c,) = failed(v, "max_abs")
    assert c.observed is None and c.line().startswith(
        "OP 0 max_abs: non-finite (1 of 4 windows), <= 0.0001 allowed (no limit passes a non-finite value), "
        "first non-finite at block 'b' window 0; "
        "over the 3 finite windows only: 0"
    )


def test_a_figure_check_over_non_finite_values_agrees_with_its_re_derivation():
    """score_check re-derives every ok from observed, relation, allowed: None never holds."""
    ids, w, s, emb = rows = vp_rows()
    nan = emb.copy()
    nan[3] = np.nan
    for c in _strict_json(judge_vp(vp(rows), vp((ids, w, s, nan))))["checks"]:
        if c["relation"] != "report":
            assert c["ok"] == holds(c["observed"], c["relation"], c["allowed"]), c["metric"]
        assert Check.model_validate(c).line()


def test_flips_in_nan_frames_are_classed_by_the_golden_margin():
    """A NaN window of the lane: every audio frame in it is a flip, classed as the check's note says,
    by the golden's top-two margin (they were all 'confident'). Window (a, 1): all ten frames are
    near ties in the golden (margin 0.01) -> ten near-tie flips; window (b, 0): wide margins ->
    ten confident flips."""
    golden = base()
    golden[0, 1, :, 2] = golden[0, 1, :, 0] - 0.01  # every frame of window (a, 1) a near tie
    run = golden.copy()
    run[0, 1] = np.nan
    tol = SegmentationTolerance(max_abs=1e9, max_flip_rate=1.0, max_confident_flips=10**6)
    v, notes = judge_seg(seg(golden), seg(run), tol)
    assert v.metrics["argmax_flips_near_tie"] == 10 and v.metrics["argmax_flips_confident"] == 0
    assert notes == {("a", 1): (10, 0)}
    run2 = golden.copy()
    run2[1, 0] = np.nan
    v2, notes2 = judge_seg(seg(golden), seg(run2), tol)
    assert v2.metrics["argmax_flips_near_tie"] == 0 and v2.metrics["argmax_flips_confident"] == 10
    assert notes2 == {("b", 0): (0, 10)}
    # the speaker activity of a NaN frame is unknown: counted as every speaker changing
    assert v.metrics["mask_flips_near_tie"] == 10 * G.speakers
