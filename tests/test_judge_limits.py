"""Each judge's limits are a typed model (harness.data.judge_limits): whatever the tolerance table, mode and
noise floor, a judge gives its own model with every key, and a verdict stores exactly its dump."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from harness.data.geometry import Geometry
from harness.data.judge_limits import SegmentationLimits, VoiceprintLimits
from harness.data.modes import TOLERANCE_MODES, ToleranceMode, VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import SegmentationOutputs
from harness.data.tolerances import SegmentationTolerance, VoiceprintTolerance
from harness.judging.judges import SegmentationJudge, VoiceprintJudge

G = Geometry(window_samples=1000, frames_per_window=10, frame_step=100, windows_per_block=2, embedding_dim=4)
small = st.floats(min_value=0.0, max_value=1e-2, allow_nan=False)
floors = st.none() | st.builds(
    lambda bitwise, max_abs, cosine, rel: {
        "bitwise": bitwise,
        "max_abs": 0.0 if bitwise else max_abs,
        "max_ulp": 0 if bitwise else 3,
        "min_cosine": 1.0 if bitwise else 1.0 - cosine,
        "max_rel_l2": 0.0 if bitwise else rel,
        "argmax_flips": 0,
    },
    st.booleans(),
    small,
    small,
    small,
)


@settings(deadline=None, max_examples=60)
@given(st.sampled_from(TOLERANCE_MODES), floors, st.booleans(), small)
def test_every_judge_gives_its_own_model_with_every_key(mode, floor, sample_bound, max_abs):
    if mode == "noise-floor" and floor is None:
        return  # refused by the judge: a golden without its floor (tested with the dispatch)
    seg = SegmentationJudge().limits(SegmentationTolerance(mode=mode, max_abs=max_abs), floor, sample_bound)
    vp = VoiceprintJudge().limits(VoiceprintTolerance(mode=mode, max_abs=max_abs), floor, sample_bound)
    assert type(seg) is SegmentationLimits and type(vp) is VoiceprintLimits
    for limits in (seg, vp):
        assert limits.mode is ToleranceMode(mode)
        assert set(limits.document()) == set(type(limits).model_fields)  # every key, None where none is set
        assert limits.bitwise == (mode == "bitwise" or (mode == "noise-floor" and floor["bitwise"]))
    assert (seg.max_flip_rate is None) == (not sample_bound) == (vp.max_failed_row_rate is None)


def test_a_verdict_stores_exactly_the_dump_of_its_limits():
    judge = SegmentationJudge()
    limits = judge.limits(SegmentationTolerance(mode="noise-floor"), {"bitwise": False, "max_abs": 1e-6, "max_ulp": 2})
    evidence = judge.evidence(Op.SEGMENTATION, G, limits, VoiceprintInputs.ISOLATED)
    logprobs = np.random.default_rng(0).normal(size=(2, 2, 10, 7)).astype(np.float32)
    outputs = SegmentationOutputs(["a", "b"], np.full((2, 2), 1000, np.int32), logprobs)
    evidence.add(outputs, outputs)
    verdict = evidence.verdict(2)
    assert verdict.limits == limits.document() and verdict.limits["mode"] == "noise-floor"


def test_a_judge_refuses_another_judges_limits_and_a_model_refuses_a_key_too_many_or_too_few():
    """The negative controls: the types hold (a voiceprint judge is never given OP 0's limits), and a limits
    model is exactly its keys."""
    seg = SegmentationJudge().limits(SegmentationTolerance(), None)
    with pytest.raises(AssertionError, match="SegmentationLimits"):
        VoiceprintJudge().evidence(Op.VOICEPRINT, G, seg, VoiceprintInputs.ISOLATED)
    with pytest.raises(ValidationError, match="min_cosine"):
        SegmentationLimits.model_validate({**seg.document(), "min_cosine": 1.0})
    with pytest.raises(ValidationError, match="near_tie_margin"):
        SegmentationLimits.model_validate({k: v for k, v in seg.document().items() if k != "near_tie_margin"})
