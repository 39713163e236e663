"""Exact and fast lanes over one backend: shapes, interleaving, isolated/chained, call records, streaming."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from harness.base.errors import LaneError
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from lanes.running.lanes import ExactLane, FastLane
from lanes.running.run_plan import RunPlan, check_request_sizes
from lanes.running.runner import run_lanes


def collect(blocks, backend, plan, **kw):
    parts = defaultdict(list)
    calls = run_lanes(blocks, backend, plan, lambda lane, batch: parts[lane].append(batch), **kw)
    return {lane: LaneOutputs.concat(p) for lane, p in parts.items()}, calls, parts


def test_exact_lane_sends_each_block_alone(backend, small_corpus):
    log = []
    lane = ExactLane(backend, {op: (1,) for op in Op}, log)
    outs = lane.run(small_corpus.blocks[:2])
    assert len(outs) == 2 and [c.block_ids for c in log] == [(b.id,) for b in small_corpus.blocks[:2]]
    assert log[0].lane == "exact" and log[0].windows == 8
    refusing = ExactLane(backend, {op: (2,) for op in Op}, log)
    with pytest.raises(
        LaneError,
        match=r"exact lane refuses a call of 1 block for OP 0: the release's shapes for "
        r"OP 0 are \[2\]",
    ):
        refusing.run(small_corpus.blocks[:1])


def test_fast_lane_packs_and_optionally_pads(backend, small_corpus):
    log = []
    (outs,) = FastLane(backend, 4, log, pad_to_fixed=True).run([small_corpus.blocks[:3]])
    assert len(outs) == 3
    assert log[0].windows == 32 and log[0].blocks == 3 and log[0].shape == 4
    assert log[0].block_ids == tuple(b.id for b in small_corpus.blocks[:3])
    assert log[0].request_bytes == sum(b.span.nbytes for b in small_corpus.blocks[:3]) + 32 * 12 + 4
    with pytest.raises(LaneError, match="k=4 given 5 blocks"):
        FastLane(backend, 4, log).run([small_corpus.blocks[:5]])


def test_lanes_are_interleaved_group_by_group(backend, small_corpus):
    _, calls, parts = collect(small_corpus.blocks[:8], backend, RunPlan(shapes=(2, 4)))
    order = [(c.lane, c.shape, c.op) for c in calls]
    # group of lcm(2, 4) = 4 blocks: 4 exact OP 0 calls, then 2 calls at k=2, 1 at k=4, then OP 1, OP 2 alike
    assert order[:7] == [("exact", 1, 0)] * 4 + [("fast", 2, 0)] * 2 + [("fast", 4, 0)]
    assert order[7:14] == [("exact", 1, 1)] * 4 + [("fast", 2, 1)] * 2 + [("fast", 4, 1)]
    assert len(order) == RunPlan(shapes=(2, 4)).calls(8) == 2 * 21
    assert all(c.wall_s > 0 for c in calls)
    # the sink gets every lane's outputs group by group: memory is one group, not the corpus
    assert {lane: [len(b.block_ids) for b in p] for lane, p in parts.items()} == {
        "exact": [4, 4],
        "k2": [4, 4],
        "k4": [4, 4],
    }


def test_a_generator_of_blocks_is_consumed_once(backend, small_corpus):
    seen = []

    def blocks():
        for b in small_corpus.blocks[:5]:
            seen.append(b.id)
            yield b

    out, _, _ = collect(blocks(), backend, RunPlan(shapes=(2,)))
    assert seen == small_corpus.ids[:5] and out["k2"].block_ids == small_corpus.ids[:5]


def test_isolated_mode_gives_every_lane_the_same_voiceprint_inputs(backend, small_corpus):
    out, _, _ = collect(small_corpus.blocks[:6], backend, RunPlan(shapes=(3,), voiceprint_inputs="isolated"))
    exact, fast = out["exact"], out["k3"]
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        np.testing.assert_array_equal(exact.voiceprint[op].weights, fast.voiceprint[op].weights)
        np.testing.assert_array_equal(exact.voiceprint[op].window, fast.voiceprint[op].window)


def test_chained_mode_derives_inputs_from_each_lanes_own_segmentation(small_corpus):
    from harness.data.numeric_settings import NumericSettings
    from lanes.backends.backend import InProcessBackend
    from lanes.models.model_api import load_model

    leaky = InProcessBackend(load_model("lanes.controls:leaky"), NumericSettings())
    blocks = small_corpus.blocks[:6]
    iso, _, _ = collect(blocks, leaky, RunPlan(shapes=(6,), voiceprint_inputs="isolated"))
    chained, _, _ = collect(blocks, leaky, RunPlan(shapes=(6,), voiceprint_inputs="chained"))
    op = Op.VOICEPRINT
    np.testing.assert_array_equal(iso["k6"].voiceprint[op].weights, iso["exact"].voiceprint[op].weights)
    # the leak changes the fast lane's segmentation, so chained voiceprint requests differ
    assert not np.array_equal(chained["k6"].segmentation.logprobs, chained["exact"].segmentation.logprobs)
    a, b = chained["k6"].voiceprint[op], chained["exact"].voiceprint[op]
    assert a.rows != b.rows or not np.array_equal(a.weights, b.weights)


def test_two_exact_repeats_are_two_lanes(backend, small_corpus):
    out, calls, _ = collect(small_corpus.blocks[:3], backend, RunPlan(exact_repeats=2))
    assert set(out) == {"exact", "exact#2"} and {c.replica for c in calls} == {0, 1}


def test_isolated_without_exact_lane_needs_golden_inputs(backend, small_corpus):
    with pytest.raises(LaneError, match="needs the golden's voiceprint inputs"):
        collect(small_corpus.blocks[:2], backend, RunPlan(shapes=(2,), include_exact=False))


def test_request_size_limit_refuses_a_too_large_k_up_front(backend):
    class Limited:
        geometry, fingerprint = backend.geometry, backend.fingerprint
        max_request_bytes = 400_000

    limit = r"shape k=8 needs requests of about .* MiB, over the backend's limit of 0.4 MiB"
    with pytest.raises(LaneError, match=limit):
        check_request_sizes(44_000, 12, Limited(), RunPlan(shapes=(8,)))
    check_request_sizes(44_000, 12, Limited(), RunPlan(shapes=(2,)))


def test_plan_validation():
    with pytest.raises(LaneError, match="unknown voiceprint inputs"):
        RunPlan(voiceprint_inputs="parallel")
    with pytest.raises(LaneError, match="under the smallest shape, 1"):
        RunPlan(shapes=(0,))
