"""The packing-law kit (harness.laws): every law holds for the harness's packer, and every law is
shown to fail, on a minimal shrunk example, for a known-bad packer (the negative controls)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.laws import (
    BROKEN,
    HELD,
    LAW_GEOMETRY,
    LAWS,
    LAWS_BY_NAME,
    Law,
    LawBroken,
    block_lists,
    check_packer,
    run_law,
)
from harness.laws.pytest_plugin import PackerLawTests
from harness.packers import CallablePacker
from harness.packers.packing import HarnessPacker, pack

SEED = 0


class TestHarnessPacker(PackerLawTests):
    """The kit's own mixin on the harness's packer: one test per law, 200 examples each."""

    examples = 200

    def make_packer(self):
        return HarnessPacker()


def control(name: str) -> CallablePacker:
    return CallablePacker(f"harness.laws.law_controls:{name}", LAW_GEOMETRY)


# Which laws each known bug must break (at least one control per law), and the most blocks a shrunk
# counterexample may keep (hypothesis shrinks to a local minimum: a handful of blocks at most).
CONTROLS = {
    "off_by_one_packer": {
        "well-formed",
        "round-trip",
        "own-samples",
        "rebased-inside",
        "per-window-function",
        "associative",
    },
    "leaky_packer": {
        "round-trip",
        "own-samples",
        "rebased-inside",
        "per-window-function",
        "associative",
        "padding-dropped",
    },
    "speaker_dropping_packer": {"round-trip"},
    "exclusive_index_packer": {"ragged-index"},
    "PaddingFirstPacker": {"padding-dropped"},
    "NoRebaseNestingPacker": {"associative"},
}
MAX_MINIMAL_BLOCKS = 4


@pytest.fixture(scope="module")
def control_reports():
    reports = {}
    for name in CONTROLS:
        with control(name) as packer:
            reports[name] = check_packer(packer, examples=20, seed=SEED)  # each bug shows on the first examples
    return reports


def test_every_law_has_a_negative_control():
    assert set().union(*CONTROLS.values()) == {law.name for law in LAWS}


@pytest.mark.parametrize("name", CONTROLS)
def test_negative_control_is_caught_with_a_minimal_example(control_reports, name):
    report = control_reports[name]
    assert not report.ok
    broken = {o.law for o in report.outcomes if o.status == BROKEN}
    assert CONTROLS[name] <= broken, report.render()
    for outcome in report.outcomes:
        if outcome.status == BROKEN:
            example = outcome.counterexample
            assert example.reproducible and example.what
            assert 1 <= len(example.blocks) <= MAX_MINIMAL_BLOCKS, (name, outcome.law, len(example.blocks))
            assert example.packed is not None  # the request the packer produced is shown


@pytest.mark.parametrize("name", ["off_by_one_packer", "leaky_packer"])
def test_the_harness_packer_holds_on_every_counterexample_of_the_controls(control_reports, name):
    """No false alarm: the minimal examples that break a control are fine for the real packer."""
    for outcome in control_reports[name].outcomes:
        if outcome.status == BROKEN:
            example = outcome.counterexample
            LAWS_BY_NAME[outcome.law](HarnessPacker(), list(example.blocks), **example.params)


def test_the_rebase_bug_needs_two_blocks_and_shows_them(control_reports):
    """Off by one after the first block: invisible with one block, shown on two with the shift named."""
    report = control_reports["off_by_one_packer"]
    rt = next(o for o in report.outcomes if o.law == "round-trip").counterexample
    assert len(rt.blocks) == 2 and "block 'b1'" in rt.what and "OFFSETS" in rt.what
    one_block = Law(
        "own-samples (k=1)", "", LAWS_BY_NAME["own-samples"].check, lambda: block_lists(max_k=1).map(lambda b: (b, {}))
    )
    with control("off_by_one_packer") as packer:
        assert run_law(packer, one_block, examples=100, seed=SEED).status == HELD


def test_the_rendered_report_names_law_blocks_request_and_difference(control_reports):
    text = control_reports["off_by_one_packer"].render()
    for words in (
        "law own-samples BROKEN",
        "minimal block set: ",
        "b1: SPAN ",
        "OFFSETS [",
        "VALID [",
        "request the packer produced:",
        "layout: b0 SPAN[0:",
        "what differed: ",
        "laws broken",
    ):
        assert words in text, words


def test_same_seed_same_verdict_and_counterexample():
    with control("leaky_packer") as packer:
        a = run_law(packer, LAWS_BY_NAME["own-samples"], examples=30, seed=3)
        b = run_law(packer, LAWS_BY_NAME["own-samples"], examples=30, seed=3)
    assert a.status == b.status == BROKEN
    assert a.to_dict() == b.to_dict()


def test_a_law_is_a_plain_function_raising_law_broken():
    """The kit without hypothesis: a law judges one concrete block list."""
    b0, b1 = _two_blocks()
    for law in LAWS:
        if law.name == "associative":
            law(HarnessPacker(), [b0, b1], cut=1)
        elif law.name == "padding-dropped":
            law(HarnessPacker(), [b0, b1], extra=2)
        else:
            law(HarnessPacker(), [b0, b1])
    with pytest.raises(LawBroken, match="own-samples") as err:
        LAWS_BY_NAME["own-samples"](control("off_by_one_packer"), [b0, b1])
    assert err.value.packed is not None and err.value.packed.offsets[8] == b0.span.shape[0] + 1


def _two_blocks():
    from harness.data.blocks import Block

    span = np.arange(1, 9, dtype=np.float32)
    full = np.full(8, 4, np.int32)
    offsets = np.array([0, 0, 1, 1, 2, 2, 3, 3], np.int64)
    return (
        Block.create("b0", 0, span, offsets, full, LAW_GEOMETRY),
        Block.create("b1", 0, span + 10, offsets, full, LAW_GEOMETRY),
    )


def test_laws_that_depend_on_the_packer_say_what_they_judged():
    with control("off_by_one_packer") as packer:
        outcome = run_law(packer, LAWS_BY_NAME["associative"], examples=20, seed=SEED)
    assert "concatenation form only" in outcome.notes[0]
    outcome = run_law(HarnessPacker(), LAWS_BY_NAME["associative"], examples=20, seed=SEED)
    assert outcome.notes[0] == "concatenation and nested forms"
    outcome = run_law(HarnessPacker(), LAWS_BY_NAME["ragged-index"], examples=20, seed=SEED)
    assert outcome.notes == ("index tensors derived from the packer's layout",)


def test_packing_unchanged_by_the_packer_seam():
    """HarnessPacker is pack/unpack, nothing else."""
    b0, b1 = _two_blocks()
    a, b = HarnessPacker().pack([b0, b1], pad_to=3), pack([b0, b1], pad_to=3)
    assert a.segments == b.segments and np.array_equal(a.offsets, b.offsets)


def test_a_window_running_into_the_next_block_is_named():
    """The leak the laws exist for: the short last window of b0 reads b1's first samples instead of zeros."""
    from harness.data.blocks import Block

    offsets = np.array([0, 1, 2, 3, 4, 5, 6, 56], np.int64)
    valid = np.array([64, 64, 64, 64, 64, 64, 64, 14], np.int32)  # the last window ends on b0's last sample
    b0 = Block.create("b0", 0, np.full(70, 1.0, np.float32), offsets, valid, LAW_GEOMETRY)
    b1 = Block.create("b1", 0, np.full(70, 2.0, np.float32), offsets, valid, LAW_GEOMETRY)
    with pytest.raises(LawBroken) as err:
        LAWS_BY_NAME["own-samples"](control("leaky_packer"), [b0, b1])
    assert (
        "window 7 of block 'b0' (window 7 of the request) sees other samples packed than alone (OFFSETS 56, "
        "VALID 64 packed; OFFSETS 56, VALID 14 alone): 50 of 64 values differ, first at [14]: 2 instead of 0"
    ) in err.value.what
    LAWS_BY_NAME["own-samples"](HarnessPacker(), [b0, b1])


# ------------------------------------------------------------------ the kit misses nothing


@pytest.mark.parametrize("name,blocks", [("truncate_at_16_packer", 17), ("truncate_at_40_packer", 41)])
def test_a_packer_that_drops_blocks_past_k_breaks_every_law_at_one_example(name, blocks):
    """Malformed answers are counterexamples (not skipped), and the boundary examples reach 64 blocks:
    a packer that drops every block after the 16th / 40th breaks every law, even with --examples 1."""
    with control(name) as packer:
        report = check_packer(packer, examples=1, seed=SEED)
    assert not report.ok and all(o.status == BROKEN for o in report.outcomes), report.render()
    rt = next(o for o in report.outcomes if o.law == "round-trip").counterexample
    assert len(rt.blocks) == blocks and "malformed answer (law well-formed)" in rt.what
    assert "all 8 laws hold" not in report.render()


@pytest.mark.parametrize("name", ["padded_index_packer", "padding_length_packer"])
def test_index_tensors_of_padded_requests_are_judged_exactly(name):
    with control(name) as packer:
        outcome = run_law(packer, LAWS_BY_NAME["ragged-index"], examples=1, seed=SEED)
    assert outcome.status == BROKEN
    what = outcome.counterexample.what
    assert "padding item(s) of 0" in what and "the layout gives int32[" in what, what


def test_the_issue_example_of_an_accumulated_count_one_too_high_when_padded():
    """Spans of 40/30/20/35 samples padded to 6: [41 71 91 126 126 126] instead of [40 70 90 125 125 125]."""
    from harness.data.blocks import Block

    blocks = [
        Block.create(f"b{i}", 0, np.ones(n, np.float32), np.zeros(8, np.int64), np.zeros(8, np.int32), LAW_GEOMETRY)
        for i, n in enumerate((40, 30, 20, 35))
    ]
    with pytest.raises(LawBroken) as err:
        LAWS_BY_NAME["ragged-index"](control("padded_index_packer"), blocks, pad_to=6)
    assert (
        "BATCH_ACCUMULATED_ELEMENT_COUNT (emitted by the packer) for 6 items (spans of [40, 30, 20, 35] samples "
        "and 2 padding item(s) of 0): 6 of 6 values differ, first at [0]: 41 instead of 40; got "
        "int32[41 71 91 126 126 126], the layout gives int32[40 70 90 125 125 125]"
    ) in err.value.what
    LAWS_BY_NAME["ragged-index"](control("padded_index_packer"), blocks)  # unpadded: right
    LAWS_BY_NAME["ragged-index"](HarnessPacker(), blocks, pad_to=6)


def test_mixed_index_dtypes_break_ragged_index():
    def mixed(items, pad_to=None):
        good = pack(items, pad_to=pad_to)
        index = good.ragged_index()
        index["BATCH_ELEMENT_COUNT"] = index["BATCH_ELEMENT_COUNT"].astype(np.int64)
        return type(good)(
            good.op, good.span, good.offsets, good.valid, good.weights, good.idx, good.speakers, good.segments, index
        )

    with pytest.raises(LawBroken, match="mix dtypes"):
        LAWS_BY_NAME["ragged-index"](_Bare(mixed), list(_two_blocks()))


class _Bare:
    """A bare Packer object around a pack function (no CallablePacker checks)."""

    name = "bare"

    def __init__(self, fn):
        self.pack = fn

    def unpack(self, packed, outputs):
        from harness.packers.packing import unpack

        return unpack(packed, outputs)

    def describe(self):
        return {"name": self.name}


def test_every_law_is_judged_at_64_blocks_and_padded_to_64_even_at_one_example():
    seen = []

    def recording(items, pad_to=None):
        seen.append((len(items), pad_to))
        return pack(items, pad_to=pad_to)

    report = check_packer(_Bare(recording), examples=1, seed=SEED)
    assert report.ok, report.render()
    assert max(n for n, _ in seen) == 64 and max(p or 0 for _, p in seen) == 64
    assert (1, 64) in seen  # one real block and 63 padding blocks
    assert all(o.boundary >= 12 for o in report.outcomes)
    seen.clear()
    check_packer(_Bare(recording), examples=1, seed=SEED, max_blocks=32)
    assert max(n for n, _ in seen) == 32 and max(p or 0 for _, p in seen) == 32


def test_a_law_not_judged_on_every_example_never_holds():
    """A report never says "all laws hold" while a law was not judged (NotJudged), nor on 0 examples."""
    from harness.laws import NOT_JUDGED, NotJudged

    def skips(packer, blocks):
        raise NotJudged("cannot judge")

    def skips_some(packer, blocks):
        if len(blocks) > 1:
            raise NotJudged("cannot judge")

    for check in (skips, skips_some):
        law = Law(
            check.__name__,
            "",
            check,
            lambda: block_lists(max_k=4).map(lambda b: (b, {})),
            boundary=lambda k: [([_two_blocks()[0]], {}), (list(_two_blocks()), {})],
        )
        report = check_packer(HarnessPacker(), examples=5, seed=SEED, laws=[law])
        assert report.outcomes[0].status == NOT_JUDGED and not report.ok
        assert "laws hold" not in report.render() and "never as held" in report.render()


def test_a_packer_object_that_raises_is_not_a_counterexample():
    def raising(items, pad_to=None):
        if len(items) > 2:
            raise IndexError("index 2 out of range")
        return pack(items, pad_to=pad_to)

    with pytest.raises(IndexError):
        check_packer(_Bare(raising), examples=5, seed=SEED)
