"""Negative controls: models with a known defect must be rejected with the right OP and metric;
an invariant model must be promoted bitwise; the NNPACK case shows a real non-bitwise CPU difference."""

from __future__ import annotations

import pytest

from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.tolerances import SegmentationTolerance, Tolerances
from harness.pipeline.localise import localise_failures
from harness.pipeline.score import score_run
from tests.pipeline import pipeline

BITWISE = Tolerances().with_mode("bitwise")


@pytest.fixture(scope="module")
def corpus16(geometry):
    return synth_corpus(geometry, 16, seed=0)


def evaluate(spec, corpus, tmp_path, shapes, numerics=NumericSettings(), tolerances=Tolerances()):
    p = pipeline(spec, tmp_path, shapes, numerics=numerics, tolerances=tolerances, corpus=corpus)
    return p.model, p.golden, p.run, p.score


def reasons(score, k):
    return score.shapes[str(k)].reasons


def starts(score, k, prefix):
    return any(r.startswith(prefix) for r in reasons(score, k))


def test_leak_into_the_next_block_is_rejected_and_localised(corpus16, tmp_path):
    model, golden, run, score = evaluate("lanes.controls:leaky", corpus16, tmp_path, (4,))
    assert score.shapes["4"].verdict == "fail"
    assert starts(score, 4, "OP 0 max_abs:") and starts(score, 4, "OP 0 confident_flips:")
    assert starts(score, 4, "OP 1 min_cosine:") and starts(score, 4, "OP 2 min_cosine:")
    assert score.shapes["4"].ops["1"].metrics["min_cosine"] < 0.9
    loc = localise_failures(score, golden, run, lambda: model)["4"]
    assert loc["0"]["first_diverging_layer"].startswith("segmentation <input")
    assert loc["1"]["first_diverging_layer"].startswith("voiceprint <input")
    # the pack replayed is the one the run sent (its call log), not one rebuilt from the corpus order
    call = next(c for c in run.calls() if c["lane"] == "fast" and c["op"] == 0 and loc["0"]["block"] in c["block_ids"])
    assert loc["0"]["blocks"] == list(call["block_ids"])


def test_request_wide_normalisation_is_rejected(corpus16, tmp_path):
    _, _, _, score = evaluate("lanes.controls:cross_window_norm", corpus16, tmp_path, (2,))
    assert score.shapes["2"].verdict == "fail"
    assert starts(score, 2, "OP 0 max_abs:") and starts(score, 2, "OP 1 max_abs:")


def test_a_call_size_dependent_output_is_rejected(corpus16, tmp_path):
    model, golden, run, score = evaluate("lanes.controls:count_dependent", corpus16, tmp_path, (2, 16))
    # +1e-6 x windows: at k=16 the difference (1.2e-4) exceeds the default tolerance ...
    assert score.shapes["16"].verdict == "fail" and starts(score, 16, "OP 0 max_abs:")
    assert starts(score, 16, "OP 1 max_abs:")
    # ... at k=2 it is within it (8e-6), and only a bitwise / noise-floor judgement catches it
    assert score.shapes["2"].verdict == "pass"
    floor = score_run(golden, run, Tolerances(op0=SegmentationTolerance(mode="noise-floor")))
    assert floor.shapes["2"].verdict == "fail" and starts(floor, 2, "OP 0 differing_elements:")
    loc = localise_failures(score, golden, run, lambda: model)["16"]
    assert loc["0"]["first_diverging_layer"] == "<output: the model's answer>"


def test_nan_in_one_window_is_rejected(corpus16, tmp_path):
    _, _, _, score = evaluate("lanes.controls:nan_window", corpus16, tmp_path, (2,))
    assert starts(score, 2, "OP 0 non_finite:") and starts(score, 2, "OP 1 non_finite_rows:")
    assert score.shapes["2"].ops["0"].metrics["non_finite"] > 0


def test_an_invariant_model_is_promoted_bitwise(corpus16, tmp_path):
    # k=2 and k=16 (the whole corpus in one request): the model runs every window alone, ~1 s a shape here
    _, _, _, score = evaluate("lanes.controls:invariant", corpus16, tmp_path, (2, 16), tolerances=BITWISE)
    assert score.verdict == "pass"
    for shape in score.shapes.values():
        assert all(op.metrics["bitwise"] for op in shape.ops.values())
        assert all(op.limits["bitwise"] for op in shape.ops.values())


def test_nnpack_is_a_real_non_bitwise_case_within_the_default_tolerance(corpus16, tmp_path):
    """oneDNN off: CPU convolutions go through NNPACK, which switches algorithm from batch 16 on."""
    no_mkldnn = NumericSettings(mkldnn=False)
    _, golden, run, default = evaluate("small", corpus16, tmp_path, (2,), numerics=no_mkldnn)
    assert golden.manifest.numerics.in_force["mkldnn"] is False
    op0 = default.shapes["2"].ops["0"]
    assert default.shapes["2"].verdict == "pass", default.shapes["2"].reasons
    assert 0 < op0.metrics["max_abs"] < 1e-4 and op0.metrics["fraction_differing"] > 0.5
    assert op0.metrics["argmax_flips_confident"] == 0
    bitwise = score_run(golden, run, BITWISE)
    assert bitwise.shapes["2"].verdict == "fail" and starts(bitwise, 2, "OP 0 differing_elements:")
