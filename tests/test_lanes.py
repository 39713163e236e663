"""Exact and fast lanes over one backend: shapes, interleaving, isolated/chained, call records."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import LaneError
from harness.ops import Op
from lanes.lanes import ExactLane, FastLane
from lanes.runner import RunPlan, pack_members, run_lanes


def test_exact_lane_refuses_a_shape_outside_the_release(backend, small_corpus):
    log = []
    lane = ExactLane(backend, {op: (1,) for op in Op}, log)
    assert len(lane.run(small_corpus.blocks[:1])) == 1
    with pytest.raises(LaneError, match=r"exact lane refuses a call of 2 block\(s\) for OP 0: the release's shapes "
                                        r"for OP 0 are \[1\]"):
        lane.run(small_corpus.blocks[:2])
    assert len(log) == 1 and log[0].lane == "exact" and log[0].windows == 8


def test_fast_lane_packs_and_optionally_pads(backend, small_corpus):
    log = []
    outs = FastLane(backend, 4, log, pad_to_fixed=True).run(small_corpus.blocks[:3])
    assert len(outs) == 3
    assert log[0].windows == 32 and log[0].blocks == 3 and log[0].shape == 4
    assert log[0].request_bytes == sum(b.span.nbytes for b in small_corpus.blocks[:3]) + 32 * 12 + 4
    with pytest.raises(LaneError, match="k=4 given 5 blocks"):
        FastLane(backend, 4, log).run(small_corpus.blocks[:5])


def test_lanes_are_interleaved_group_by_group(backend, small_corpus):
    result = run_lanes(small_corpus.blocks[:8], backend, RunPlan(shapes=(2, 4)))
    order = [(c.lane, c.shape, c.op) for c in result.calls]
    # group of lcm(2, 4) = 4 blocks: 4 exact OP 0 calls, then 2 calls at k=2, 1 at k=4, then OP 1, OP 2 alike
    assert order[:7] == [("exact", 1, 0)] * 4 + [("fast", 2, 0)] * 2 + [("fast", 4, 0)]
    assert order[7:14] == [("exact", 1, 1)] * 4 + [("fast", 2, 1)] * 2 + [("fast", 4, 1)]
    assert len(order) == RunPlan(shapes=(2, 4)).calls(8) == 2 * 21
    assert all(c.wall_s > 0 for c in result.calls)


def test_isolated_mode_gives_every_lane_the_same_voiceprint_inputs(backend, small_corpus):
    result = run_lanes(small_corpus.blocks[:6], backend, RunPlan(shapes=(3,), mode="isolated"))
    exact, fast = result.exact[0], result.fast[3]
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        np.testing.assert_array_equal(exact.voiceprint[op].weights, fast.voiceprint[op].weights)
        np.testing.assert_array_equal(exact.voiceprint[op].window, fast.voiceprint[op].window)


def test_chained_mode_derives_inputs_from_each_lanes_own_segmentation(small_corpus):
    from harness.numerics import NumericSettings
    from lanes.backend import InProcessBackend
    from lanes.model_api import load_model

    leaky = InProcessBackend(load_model("lanes.controls:leaky"), NumericSettings())
    blocks = small_corpus.blocks[:6]
    iso = run_lanes(blocks, leaky, RunPlan(shapes=(6,), mode="isolated"))
    chained = run_lanes(blocks, leaky, RunPlan(shapes=(6,), mode="chained"))
    op = Op.VOICEPRINT
    np.testing.assert_array_equal(iso.fast[6].voiceprint[op].weights, iso.exact[0].voiceprint[op].weights)
    # the leak changes the fast lane's segmentation, so chained voiceprint requests differ
    assert not np.array_equal(chained.fast[6].segmentation.logprobs, chained.exact[0].segmentation.logprobs)
    a, b = chained.fast[6].voiceprint[op], chained.exact[0].voiceprint[op]
    assert a.rows != b.rows or not np.array_equal(a.weights, b.weights)


def test_isolated_without_exact_lane_needs_golden_inputs(backend, small_corpus):
    with pytest.raises(LaneError, match="needs the golden's voiceprint inputs"):
        run_lanes(small_corpus.blocks[:2], backend, RunPlan(shapes=(2,), include_exact=False))


def test_request_size_limit_refuses_a_too_large_k_up_front(backend, small_corpus):
    class Limited:
        geometry, fingerprint = backend.geometry, backend.fingerprint
        max_request_bytes = 400_000

        def call(self, *a, **k):
            raise AssertionError("no call may be made")

    limit = r"shape k=8 needs requests of about .* MiB, over the backend's limit of 0.4 MiB"
    with pytest.raises(LaneError, match=limit):
        run_lanes(small_corpus.blocks, Limited(), RunPlan(shapes=(8,)))


def test_pack_members_mirrors_the_runner(small_corpus):
    ids = small_corpus.ids
    assert pack_members(ids, (2, 4), 4, ids[5]) == ids[4:8]
    assert pack_members(ids, (2, 4), 2, ids[5]) == ids[4:6]
    assert pack_members(ids, (3,), 3, ids[11]) == ids[9:12]


def test_plan_validation():
    with pytest.raises(LaneError, match="unknown lane mode"):
        RunPlan(mode="parallel")
    with pytest.raises(LaneError, match=">= 1"):
        RunPlan(shapes=(0,))
