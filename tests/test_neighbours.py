"""The neighbour evidence: every block at its own slot beside neighbours of other audio, and the leak it refuses.

The laws of the arrangement (hypothesis): each plain request becomes two of the same size, every block at its
own slot, answered exactly once, the other parity filled; a filled block keeps its geometry and changes its
audio. The physics on the reference networks: at a fixed request and slot, a block's answer does not move with
its neighbour's audio (bitwise). The rule (:func:`harness.evidence.neighbour_evidence.decide`) on figures, and
promotion's re-derivation against a hand-edited outcome. End to end on the small geometry: a model that reads 64
samples past its windows' end (answers moved by about 1e-6, inside every tolerance) and one that normalises over
the request are refused in every mode with the cause ``reads another block's audio`` first; the ULP controls are
promoted in tolerance mode with slot warnings that say the neighbours moved nothing; the run-to-run noisy control
is ``not reproducible``, never a leak; without control repeats a move is inconclusive, not a refusal.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import LedgerError
from harness.data.blocks import Block
from harness.data.ops import Op
from harness.data.schemas.config_file import EvidenceSection
from harness.data.schemas.neighbours import ControlFigures
from harness.data.schemas.refusals import LEAK, NOT_REPRODUCIBLE
from harness.data.tolerances import Tolerances
from harness.evidence.neighbour_evidence import NOISE_MULTIPLE, Figures, decide
from harness.ledger.score_check import check_self_consistent
from harness.packers.packing import HARNESS_PACKER
from harness.pipeline.score import score_run
from lanes.models.diar_nn_g.model import DiarNNG
from lanes.running.neighbour_lane import FILLER_MARK, filler, split_chunks
from lanes.running.variants import FILLER
from tests.pipeline import config_for, record, run_shapes

SHAPES = (2, 4)
BLOCKS = 8


def _blocks(small_corpus, n: int) -> list[Block]:
    return [b for b, _, _ in list(small_corpus.rows())[:n]]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), k=st.integers(2, 6))  # the session corpus holds 12 blocks
def test_the_arrangement_keeps_every_block_at_its_slot_in_a_request_of_its_size(small_corpus, n, k):
    members = _blocks(small_corpus, n)
    chunks = split_chunks(members, k)
    plain = [members[i : i + k] for i in range(0, n, k)]
    expected = [c for c in plain for _ in (range(2) if len(c) > 1 else range(1))]
    assert [len(c) for c in chunks] == [len(c) for c in expected]  # the plain request's size, every time
    for chunk, original in zip(chunks, expected, strict=True):
        assert [b.id for b, _ in chunk] == [b.id for b in original]  # every block at its own slot
        if len(chunk) > 1:
            assert any(c == FILLER for _, c in chunk) and any(c == 0 for _, c in chunk)
    answered = [b.id for chunk in chunks for b, c in chunk if c == 0]
    assert sorted(answered) == sorted(b.id for b in members)  # each block answered exactly once
    assert len(set(answered)) == n


def test_a_filled_block_keeps_its_geometry_and_changes_its_audio(small_corpus):
    block = _blocks(small_corpus, 1)[0]
    f = filler(block, 0)
    assert f.id == block.id + FILLER_MARK
    assert f.span.shape == block.span.shape and f.span.dtype == np.float32
    assert np.array_equal(f.offsets, block.offsets) and np.array_equal(f.valid, block.valid)
    changed = f.span != block.span
    assert changed.mean() > 0.99  # noise: no silence left where the block had some
    assert np.array_equal(filler(block, 0).span, f.span)  # the same in every process
    assert not np.array_equal(filler(block, 1).span, f.span)  # the seed draws another
    rms = np.sqrt(np.mean(np.square(block.span, dtype=np.float64)))
    assert abs(np.sqrt(np.mean(np.square(f.span, dtype=np.float64))) - rms) < 0.1 * rms


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**16), pair=st.sampled_from([(0, 1), (2, 3), (4, 5)]))
def test_a_block_answers_bitwise_alike_whatever_its_neighbour_holds(small_corpus, seed, pair):
    """The physical claim, on the reference network (small, every OP): at a fixed request and slot the neighbour's
    audio does not reach a block's answer; the rows of both blocks are kept, so the request's geometry is too."""
    model = DiarNNG("small")
    blocks = _blocks(small_corpus, 6)
    a, b = blocks[pair[0]], blocks[pair[1]]
    for op in (Op.SEGMENTATION, Op.VOICEPRINT):
        sent = [a, b]
        if op is Op.VOICEPRINT:
            rows = np.ones((3, model.geometry.frames_per_window), np.float32)
            idx = np.array([0, 3, 7], np.int32)
            sent = [x.with_voiceprint(op, rows, idx, np.zeros(3, np.int32), model.geometry) for x in sent]
        beside = [sent[0], filler(sent[1], seed)]
        answers = []
        for request in (sent, beside):
            packed = HARNESS_PACKER.pack(request)
            out = model.infer(packed.tensors())
            answers.append(HARNESS_PACKER.unpack(packed, out)[0])
        assert np.array_equal(answers[0].view(np.uint32), answers[1].view(np.uint32)), op


def _figures(moved: int, max_abs: float | None, controls: ControlFigures | None, repeats=None) -> Figures:
    return Figures(8, moved, 64, 3 * moved, max_abs, 5, controls, repeats, None if repeats is None else 1e-6)


def _controls(reproduced: bool, max_abs: float = 0.0) -> ControlFigures:
    return ControlFigures(
        plain_sent=2,
        plain_reproduced=2 if reproduced else 1,
        neighbour_sent=4,
        neighbour_reproduced=4,
        units=32,
        units_differing=0 if reproduced else 3,
        max_abs=max_abs,
        max_ulp=0 if reproduced else 9,
    )


@given(max_abs=st.floats(1e-12, 10.0))
def test_the_rule_a_move_on_a_backend_that_repeats_itself_is_a_leak_at_any_size(max_abs):
    assert decide(_figures(0, 0.0, None)).outcome == "bitwise"
    assert decide(_figures(2, max_abs, _controls(True))).outcome == "leak"  # however small
    assert decide(_figures(2, max_abs, None)).outcome == "inconclusive"  # nothing sent again: no telling
    assert decide(_figures(2, max_abs, None, repeats=True)).outcome == "leak"  # the repeats measured it


@given(noise=st.floats(1e-9, 1e-3), factor=st.floats(0.0, 10.0))
def test_the_rule_on_a_backend_that_does_not_repeat_itself_judges_the_move_against_its_noise(noise, factor):
    d = decide(_figures(2, noise * factor, _controls(False, noise)))
    assert d.noise == noise
    assert d.outcome == ("leak" if noise * factor > NOISE_MULTIPLE * noise else "inconclusive")
    assert decide(_figures(2, None, _controls(False, noise))).outcome == "leak"  # a non-finite move: beyond


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """``judged(spec, mode, **evidence)``: the self-consistent score of a run of the small geometry at k = 2, 4."""
    goldens: dict[str, tuple] = {}
    runs: dict[tuple, object] = {}

    def judge(spec: str, mode: str = "tolerance", **evidence):
        key = (spec, tuple(sorted(evidence.items())))
        tmp = tmp_path_factory.mktemp("neighbours")
        evidence = {"arrangements": 2, "canaries": False, **evidence}
        cfg = config_for(spec, evidence=EvidenceSection(**evidence))
        if spec not in goldens:
            goldens[spec] = record(spec, tmp, BLOCKS, config=cfg)
        backend, _, golden = goldens[spec]
        if key not in runs:
            runs[key] = run_shapes(backend, golden, tmp, SHAPES, cfg)
        score = score_run(golden, runs[key], Tolerances().with_mode(mode))
        check_self_consistent(score, "score")  # promotion re-derives every outcome
        return score

    return judge


@pytest.mark.parametrize("mode", ["tolerance", "bitwise", "noise-floor"])
@pytest.mark.parametrize("spec", ["lanes.controls:reads_past_end", "lanes.controls:cross_window_norm"])
def test_a_leak_is_refused_in_every_mode_whatever_its_size(judged, spec, mode):
    score = judged(spec, mode)
    for k, shape in score.shapes.items():
        assert shape.verdict == "fail" and shape.cause is not None and shape.cause.kind == LEAK, (k, shape.cause)
        assert shape.neighbours is not None and shape.neighbours.leak
        first = next(v for v in shape.neighbours.ops.values() if v.outcome == "leak")
        assert first.first is not None and first.first.slot is not None and first.first.neighbours
        assert first.controls is not None and first.controls.reproduced  # sent again: the backend repeats itself
        assert shape.cause.line(k).startswith(f"k={k} refused (reads another block's audio): neighbours")
    if spec.endswith("reads_past_end") and mode == "tolerance":  # inside every tolerance against the golden
        assert all(v.passed for v in score.shapes["2"].ops.values())


def test_ulp_controls_are_promoted_in_tolerance_mode_with_slot_warnings_that_say_slot(judged):
    score = judged("lanes.controls.ulp_controls:small", arrangements=3)  # a shuffled arrangement: other slots
    for shape in score.shapes.values():
        assert shape.verdict == "pass", shape.reasons
        assert shape.neighbours is not None and {v.outcome for v in shape.neighbours.ops.values()} == {"bitwise"}
        slots = [w for w in shape.warnings if w.kind == "slots"]
        assert slots and all(
            "answer differently in another slot (the neighbours' audio moved nothing" in w.line for w in slots
        )
        assert any(w.kind == "golden" for w in shape.warnings)  # the drift from the golden is said too


def test_the_noisy_backend_is_not_reproducible_never_a_leak(judged):
    for mode in ("bitwise", "noise-floor"):
        score = judged("lanes.controls.noisy_control:one_in_three", mode)
        for shape in score.shapes.values():
            assert shape.cause is not None and shape.cause.kind == NOT_REPRODUCIBLE, shape.cause
            assert not shape.neighbours.leak  # type: ignore[union-attr]
    tolerant = judged("lanes.controls.noisy_control:one_in_three")
    warned = {w.kind for s in tolerant.shapes.values() for w in s.warnings}
    assert "neighbours" in warned and all(s.verdict == "pass" for s in tolerant.shapes.values())
    line = next(w.line for s in tolerant.shapes.values() for w in s.warnings if w.kind == "neighbours")
    assert "the leak test was inconclusive on this backend" in line


def test_without_control_repeats_a_move_is_inconclusive_not_a_refusal(judged):
    score = judged("lanes.controls:reads_past_end", "tolerance", neighbour_controls=0)
    shape = score.shapes["2"]
    assert shape.neighbours is not None and not shape.neighbours.leak
    assert {v.outcome for v in shape.neighbours.ops.values()} == {"inconclusive"}
    assert any("neighbour_controls = 0" in w.line for w in shape.warnings if w.kind == "neighbours")


def test_a_hand_edited_outcome_is_refused_by_promotion(judged):
    score = judged("lanes.controls:reads_past_end")
    body = score.model_dump(mode="json")
    op = body["shapes"]["2"]["neighbours"]["ops"]["0"]
    op["controls"]["plain_reproduced"] = 0  # the backend "did not repeat itself": the leak is no longer derived
    op["controls"]["units_differing"] = 1
    edited = type(score).model_validate(body)
    with pytest.raises(LedgerError, match="neighbours OP 0"):
        check_self_consistent(edited, "score")


# ------------------------------------------------------------------ what a progress bar counts


@given(n=st.integers(1, 64), k=st.integers(2, 16))
def test_the_neighbour_lane_is_counted_as_the_requests_it_sends(n, k):
    """A plan's call count (the progress bar's total) holds the neighbour lane's two requests per plain chunk of
    more than one block, as the arrangement makes them."""
    from lanes.running.neighbour_lane import request_count

    assert request_count(n, k) == len(split_chunks(list(range(n)), k))  # type: ignore[arg-type]


def test_a_plan_with_the_neighbour_lane_counts_its_calls():
    from lanes.running.arrangers import variants_for
    from lanes.running.run_plan import RunPlan

    plain = RunPlan(shapes=(2, 4))
    plan = RunPlan(shapes=(2, 4), variants=variants_for((2, 4), 1, 1, 0, with_neighbours=True))
    # 8 blocks: the neighbour lane sends every plain request twice (4 + 2 at k = 2 and 4), per OP
    assert plan.calls(8) - plain.calls(8) == 2 * (4 + 2) * len(plan.ops)
    # negative control: counted as one copy k to a request, the lane would be half of it
    assert plan.calls(8) - plain.calls(8) != (4 + 2) * len(plan.ops)
