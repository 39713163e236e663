"""A voiceprint verdict's worst offenders hold the row its max_abs check names as worst.

The report's "worst offenders" and `golden diff`'s "worst blocks" read ``verdict.failing``; the checks name
their worst row from every row judged. The list must lead with that row: it used to keep the first 20 rows of
each batch that differed, so a batch with more lost its worst (a verdict naming 3.1e-6 beside a list topping
out at 1.31e-6).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import VoiceprintOutputs
from harness.judging.judges.shared_checks import MAX_FAILING
from harness.judging.judges.voiceprint_judge import VoiceprintJudge, VoiceprintTolerance

G = Geometry(window_samples=16_000, frames_per_window=5, frame_step=2700, embedding_dim=4)
OP = Op(1)


def outputs(embedding: np.ndarray, blocks: int) -> VoiceprintOutputs:
    rows = embedding.shape[0]
    per = -(-rows // blocks)
    block_ids = np.array([f"b{i // per:03d}" for i in range(rows)], dtype=object)
    window = np.array([i % per for i in range(rows)], np.int32)
    return VoiceprintOutputs(
        OP,
        block_ids,
        window.copy(),
        window,
        np.zeros(rows, np.int32),
        np.ones((rows, G.frames_per_window), np.float32),
        embedding.astype(np.float32),
    )


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 3 * MAX_FAILING),
    batches=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    worst_at=st.floats(0, 1, exclude_max=True),
)
def test_the_worst_offender_is_the_row_the_max_abs_check_names(rows, batches, seed, worst_at):
    rng = np.random.default_rng(seed)
    golden = rng.standard_normal((rows, G.embedding_dim)).astype(np.float32)
    run = golden + rng.uniform(0, 1e-6, golden.shape).astype(np.float32)  # most rows differ a little
    run[int(worst_at * rows)] += np.float32(3e-5)  # one row far worse, anywhere: past the 20th of its batch too
    limits = VoiceprintJudge().limits(VoiceprintTolerance(max_abs=1e-7), None, sample_bound=False)
    evidence = VoiceprintJudge().evidence(OP, G, limits, "isolated")
    a, b = outputs(golden, 4), outputs(run, 4)
    cut = np.linspace(0, rows, batches + 1).astype(int)
    for lo, hi in zip(cut[:-1], cut[1:], strict=True):  # batches of whole rows, the same rows on both sides
        pick = slice(lo, hi)
        evidence.add(
            *(
                VoiceprintOutputs(
                    OP,
                    o.block_ids[pick],
                    o.row[pick],
                    o.window[pick],
                    o.speaker[pick],
                    o.weights[pick],
                    o.embedding[pick],
                )
                for o in (a, b)
            )
        )
    verdict = evidence.verdict(2)
    check = next(c for c in verdict.checks if c.metric == "max_abs")
    first = verdict.failing[0]
    assert first["value"] == verdict.metrics["max_abs"] == check.observed
    assert check.where == f"worst block {first['block']!r} window {first['window']} speaker {first['speaker']}"
    # and the list is the worst rows overall, largest first
    per_row = np.abs(run.astype(np.float64) - golden.astype(np.float64)).max(axis=1)
    shown = [item["value"] for item in verdict.failing if item["metric"] == "max_abs"]
    assert shown == sorted(shown, reverse=True) and len(shown) == min(MAX_FAILING, int((per_row > 0).sum()))
    assert np.isclose(shown[-1], np.sort(per_row)[::-1][len(shown) - 1], rtol=1e-6)
