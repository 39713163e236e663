"""The engine's mask function: powerset argmax -> speaker activity -> voiceprint rows."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.data.geometry import Geometry
from harness.data.masks import MaskPolicy, audio_frames, voiceprint_rows
from harness.data.ops import Op

G = Geometry(window_samples=1000, frames_per_window=20, frame_step=50, windows_per_block=4)


def logprobs_for(classes: np.ndarray) -> np.ndarray:
    """Log-probabilities whose argmax is ``classes`` [N, F]."""
    lp = np.full((*classes.shape, G.classes), -5.0, dtype=np.float32)
    np.put_along_axis(lp, classes[..., None], -0.01, axis=-1)
    return lp


@given(st.lists(st.integers(0, 6), min_size=80, max_size=80), st.lists(st.integers(0, 1000), min_size=4, max_size=4))
def test_rows_follow_the_activity(classes, valid):
    classes = np.array(classes).reshape(4, 20)
    valid = np.array(valid, dtype=np.int32)
    lp = logprobs_for(classes)
    policy = MaskPolicy(min_active_frames=3)
    act = speaker_activity(lp, valid, G)
    audio = audio_frames(valid, G)
    assert (act[~audio] == 0).all()  # no activity where the window holds no audio
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        rows = voiceprint_rows(lp, valid, op, G, policy)
        counts = act.sum(axis=1)
        expected = [(n, s) for n in range(4) for s in range(3) if counts[n, s] >= 3 and valid[n] > 0]
        assert list(zip(rows.idx.tolist(), rows.speakers.tolist(), strict=True)) == expected
        for r, (n, s) in enumerate(expected):
            w = rows.weights[r]
            assert ((w == 0) | (w == 1)).all()
            assert (w <= act[n, :, s]).all()  # never weighs a frame where the speaker is silent
            if op is Op.VOICEPRINT:
                np.testing.assert_array_equal(w, act[n, :, s])
            else:
                overlap = act[n].sum(axis=1) >= 2
                clean = act[n, :, s] * ~overlap
                np.testing.assert_array_equal(w, clean if clean.sum() >= 3 else act[n, :, s])


def test_op2_falls_back_to_the_full_mask_when_too_few_clean_frames():
    classes = np.zeros((4, 20), dtype=int)
    classes[0, :10] = 4  # speakers {0, 1} together: no clean frame for speaker 0 in window 0
    classes[0, 10:12] = 1  # speaker 0 alone for 2 frames
    lp = logprobs_for(classes)
    valid = np.full(4, 1000, np.int32)
    rows = voiceprint_rows(lp, valid, Op.VOICEPRINT_CLEAN, G, MaskPolicy(min_active_frames=3))
    r = list(zip(rows.idx, rows.speakers, strict=True)).index((0, 0))
    assert rows.weights[r].sum() == 12  # fell back: 10 overlapped + 2 clean frames


def test_padding_windows_get_no_rows():
    lp = logprobs_for(np.full((4, 20), 1))
    rows = voiceprint_rows(lp, np.array([1000, 0, 1000, 0], np.int32), Op.VOICEPRINT, G)
    assert rows.idx.tolist() == [0, 2]


def test_default_threshold_is_two_percent_of_the_window():
    assert MaskPolicy().threshold(Geometry()) == 12  # ceil(0.02 * 589)


def speaker_activity(logprobs: np.ndarray, valid: np.ndarray, geometry: Geometry) -> np.ndarray:
    """[N, F, S] float32 0/1 activity: powerset argmax, zero where the frame holds no audio."""
    classes = np.argmax(logprobs, axis=-1)
    activity = geometry.powerset[classes]
    activity *= audio_frames(valid, geometry)[..., None]
    return activity


def reference_rows(logprobs, valid, op, geometry, policy):
    """The mask function written the obvious way: [windows, frames, speakers] activity arrays."""
    activity = speaker_activity(logprobs, valid, geometry)
    minimum = policy.threshold(geometry)
    weights = activity
    if op is Op.VOICEPRINT_CLEAN:
        clean = activity * (activity.sum(axis=2, keepdims=True) < 2)
        weights = np.where((clean.sum(axis=1) >= minimum)[:, None, :], clean, activity)
    keep = (activity.sum(axis=1) >= minimum) & (np.asarray(valid)[:, None] > 0)
    windows, speakers = np.nonzero(keep)
    return weights[windows, :, speakers].astype(np.float32), windows, speakers


@given(
    st.lists(st.integers(0, 6), min_size=80, max_size=80),
    st.lists(st.integers(0, 1000), min_size=4, max_size=4),
    st.integers(1, 12),
)
def test_rows_by_class_lookup_equal_the_obvious_computation(classes, valid, minimum):
    lp = logprobs_for(np.array(classes).reshape(4, 20))
    valid = np.array(valid, dtype=np.int32)
    policy = MaskPolicy(min_active_frames=minimum)
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        rows = voiceprint_rows(lp, valid, op, G, policy)
        weights, windows, speakers = reference_rows(lp, valid, op, G, policy)
        assert rows.weights.dtype == np.float32 and rows.weights.shape == (len(windows), G.frames_per_window)
        np.testing.assert_array_equal(rows.weights, weights)
        assert rows.idx.tolist() == windows.tolist() and rows.speakers.tolist() == speakers.tolist()
