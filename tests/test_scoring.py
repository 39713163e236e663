"""Scoring per OP: flips (near-tie / confident), row matching by key, NaN never passes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.gate import judge_segmentation, judge_voiceprint
from harness.geometry import Geometry
from harness.ops import Op
from harness.outputs import SegmentationOutputs, VoiceprintOutputs
from harness.scoring import compare_segmentation, compare_voiceprint
from harness.tolerances import SegmentationTolerance, VoiceprintTolerance

G = Geometry(window_samples=1000, frames_per_window=10, frame_step=100, windows_per_block=2, embedding_dim=4)


def seg(logprobs, valid=None, ids=("a", "b")):
    b, n = logprobs.shape[:2]
    valid = np.full((b, n), 1000, np.int32) if valid is None else valid
    return SegmentationOutputs(list(ids), valid, logprobs.astype(np.float32))


def base():
    rng = np.random.default_rng(0)
    lp = rng.standard_normal((2, 2, 10, 7)).astype(np.float32)
    lp[..., 0] += 5.0  # class 0 wins by a wide margin everywhere ...
    lp[0, 1, 3, 2] = lp[0, 1, 3, 0] - 0.01  # ... but one near tie
    return lp


def test_identical_outputs_are_bitwise_and_pass_every_mode():
    lp = base()
    s = compare_segmentation(seg(lp), seg(lp.copy()), G, 0.1)
    assert s.totals()["bitwise"]
    for mode in ("bitwise", "tolerance"):
        assert judge_segmentation(s, SegmentationTolerance(mode=mode, max_flip_rate=0.5), 2).passed


def test_flips_are_counted_and_classed_by_the_golden_margin():
    golden = base()
    run = golden.copy()
    run[0, 1, 3, 2] += 0.02  # the near tie flips to class 2
    run[1, 0, 5, 4] += 10.0  # a confident frame flips to class 4 (speakers {0, 1})
    s = compare_segmentation(seg(golden), seg(run), G, near_tie_margin=0.1)
    t = s.totals()
    assert t["argmax_flips_near_tie"] == 1 and t["argmax_flips_confident"] == 1
    assert s.argmax_near.tolist() == [1, 0] and s.argmax_confident.tolist() == [0, 1]
    # class 0 is the empty set: {} -> {1} changes one speaker's activity, {} -> {0, 1} changes two
    assert t["mask_flips_near_tie"] == 1 and t["mask_flips_confident"] == 2
    v = judge_segmentation(s, SegmentationTolerance(max_abs=100.0, max_flip_rate=1.0), 4)
    assert not v.passed and any("OP 0 confident_flips: 1 frame(s)" in r for r in v.reasons)


def test_flips_where_the_window_holds_no_audio_do_not_count():
    golden = base()
    run = golden.copy()
    run[1, 1, 9, 4] += 10.0  # last frame of a window whose VALID ends before it
    valid = np.full((2, 2), 1000, np.int32)
    valid[1, 1] = 850
    s = compare_segmentation(seg(golden, valid), seg(run, valid), G, 0.1)
    assert s.totals()["argmax_flips_confident"] == 0
    assert s.totals()["max_abs"] > 1.0  # the values still count


def test_nan_never_passes():
    golden = base()
    run = golden.copy()
    run[1, 0, 2, 3] = np.nan
    s = compare_segmentation(seg(golden), seg(run), G, 0.1)
    v = judge_segmentation(s, SegmentationTolerance(max_abs=1e9, max_flip_rate=1.0, max_confident_flips=10**6), 2)
    assert not v.passed and v.reasons[0].startswith("OP 0 non_finite: 1 NaN/Inf value(s), first in block 'b'")


def test_flip_rate_bound_refuses_a_corpus_too_small():
    lp = base()
    s = compare_segmentation(seg(lp), seg(lp), G, 0.1)
    v = judge_segmentation(s, SegmentationTolerance(max_flip_rate=1e-3), 2)
    assert not v.passed
    assert "corpus too small to bound the rate: 3/40" in v.reasons[0] and "needs >= 3000 frames" in v.reasons[0]
    assert v.bound["upper95"] == pytest.approx(3 / 40)


def vp(rows, order=None):
    ids, windows, speakers, emb = rows
    order = np.arange(len(ids)) if order is None else np.asarray(order)
    return VoiceprintOutputs(Op.VOICEPRINT, np.array(ids, dtype=object)[order], np.arange(len(ids), dtype=np.int32),
                             np.array(windows, np.int32)[order], np.array(speakers, np.int32)[order],
                             np.ones((len(ids), 10), np.float32), np.asarray(emb, np.float32)[order])


def vp_rows(n=40, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"b{i // 4}" for i in range(n)]
    windows = [(i // 2) % 2 for i in range(n)]
    speakers = [i % 2 for i in range(n)]
    return ids, windows, speakers, rng.standard_normal((n, 4))


def test_rows_are_matched_by_key_not_position():
    rows = vp_rows()
    shuffled = np.random.default_rng(3).permutation(40)
    s = compare_voiceprint(vp(rows), vp(rows, shuffled), G)
    assert s.totals()["bitwise"] and s.totals()["min_cosine"] == 1.0  # exactly: bit-identical rows
    # positional comparison would have failed: the shuffled embeddings differ row by row
    assert not np.array_equal(vp(rows).embedding, vp(rows, shuffled).embedding)


def test_a_row_on_one_side_only_fails():
    rows = vp_rows()
    short = tuple(x[:-1] for x in rows)
    s = compare_voiceprint(vp(rows), vp(short), G)
    assert s.missing == [("b9", 1, 1)] and s.extra == []
    v = judge_voiceprint(s, VoiceprintTolerance(max_failed_row_rate=1.0), 2)
    assert not v.passed and any(r.startswith("OP 1 missing_rows: 1 row(s) on the golden only side") for r in v.reasons)
    s2 = compare_voiceprint(vp(short), vp(rows), G)
    assert s2.extra == [("b9", 1, 1)]


def test_voiceprint_metrics_and_limits():
    rows = vp_rows()
    ids, w, s, emb = rows
    moved = emb.copy()
    moved[7] += 1e-3
    score = compare_voiceprint(vp(rows), vp((ids, w, s, moved)), G)
    t = score.totals()
    assert t["max_abs"] == pytest.approx(1e-3, rel=1e-3) and t["min_cosine"] < 1.0
    v = judge_voiceprint(score, VoiceprintTolerance(max_failed_row_rate=1.0), 2)
    assert not v.passed and v.reasons[0].startswith("OP 1 max_abs:") and "block 'b1' window 1 speaker 1" in v.reasons[0]
    assert any(r.startswith("OP 1 rel_l2:") for r in v.reasons)
    nan = emb.copy()
    nan[3, 2] = np.nan
    v2 = judge_voiceprint(compare_voiceprint(vp(rows), vp((ids, w, s, nan)), G),
                          VoiceprintTolerance(min_cosine=-1, max_abs=1e9, max_rel_l2=1e9, max_failed_row_rate=1.0), 2)
    assert not v2.passed and v2.reasons[0].startswith("OP 1 non_finite: 1 row(s)")


def test_noise_floor_mode_uses_the_golden_own_noise():
    golden = base()
    run = golden + np.float32(1e-6)
    s = compare_segmentation(seg(golden), seg(run), G, 0.1)
    tol = SegmentationTolerance(mode="noise-floor", max_flip_rate=1.0)
    assert judge_segmentation(s, tol, 2, floor={"bitwise": False, "max_abs": 1e-5, "max_ulp": 500}).passed
    v = judge_segmentation(s, tol, 2, floor={"bitwise": True, "max_abs": 0.0, "max_ulp": 0})
    assert not v.passed and v.limits["bitwise"] and v.reasons[0].startswith("OP 0 bitwise:")


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
    score = compare_segmentation(seg(golden, valid, ("a", "b", "c")), seg(run, valid, ("a", "b", "c")), G, 0.05)
    audio = (np.arange(10) * 100)[None, None, :] < valid[..., None]
    flips = (golden.argmax(-1) != run.argmax(-1)) & audio
    assert int(score.argmax_near.sum() + score.argmax_confident.sum()) == int(flips.sum())
    assert (score.argmax_near + score.argmax_confident).tolist() == flips.reshape(3, -1).sum(1).tolist()
