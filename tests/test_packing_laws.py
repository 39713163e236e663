"""The packer's laws (hypothesis, >= 200 examples each) and the negative controls that break them."""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from harness.packing import pack
from tests import laws
from tests.strategies import block_lists

LAWS = 200


@settings(max_examples=LAWS)
@given(block_lists())
def test_pack_then_unpack_is_the_identity(blocks):
    laws.law_roundtrip(pack, blocks)


@settings(max_examples=LAWS)
@given(block_lists())
def test_every_window_sees_exactly_what_it_saw_unpacked(blocks):
    laws.law_windows_see_the_same(pack, blocks)


@settings(max_examples=LAWS)
@given(block_lists())
def test_rebased_offsets_and_idx_stay_inside_their_block(blocks):
    laws.law_rebased_inside(pack, blocks)


@settings(max_examples=LAWS)
@given(block_lists())
def test_unpacking_a_per_window_function_equals_applying_it_per_block(blocks):
    laws.law_per_window_function(pack, blocks)


@settings(max_examples=LAWS)
@given(block_lists(max_k=24), st.data())
def test_packing_is_associative(blocks, data):
    laws.law_associative(pack, blocks, data.draw(st.integers(0, len(blocks))))


@settings(max_examples=LAWS)
@given(block_lists(max_k=24), st.integers(0, 8))
def test_padding_then_unpacking_drops_exactly_the_padding(blocks, extra):
    laws.law_padding_dropped(pack, blocks, extra)


def _violates(law, packer, *extra):
    def check(blocks) -> bool:
        try:
            law(packer, blocks, *extra)
        except Exception:  # an assertion, or the broken request blowing up: either way the law caught it
            return True
        return False
    return check


BROKEN = {
    "off-by-one rebase": laws.off_by_one_packer,
    "window runs into the next block": laws.leaky_packer,
}


@pytest.mark.parametrize("broken", BROKEN.values(), ids=BROKEN.keys())
@pytest.mark.parametrize("law", [laws.law_windows_see_the_same, laws.law_rebased_inside,
                                 laws.law_per_window_function], ids=["windows", "inside", "per-window-f"])
def test_negative_control_broken_packer_is_caught(broken, law):
    """Hypothesis must find blocks on which the broken packer violates the law."""
    example = find(block_lists(min_k=2, max_k=8), _violates(law, broken), settings=settings(max_examples=2000,
                                                                                            database=None))
    assert len(example) >= 2  # a violation needs a second block to shift into / leak into


def test_negative_control_roundtrip_catches_the_off_by_one_rebase():
    example = find(block_lists(min_k=2, max_k=8), _violates(laws.law_roundtrip, laws.off_by_one_packer),
                   settings=settings(max_examples=2000, database=None))
    assert len(example) >= 2


def test_laws_hold_for_the_real_packer_on_the_controls_counterexamples():
    """The counterexamples found for the broken packers are fine for the real one (no false alarm)."""
    for broken in BROKEN.values():
        example = find(block_lists(min_k=2, max_k=8), _violates(laws.law_windows_see_the_same, broken),
                       settings=settings(max_examples=2000, database=None))
        laws.law_windows_see_the_same(pack, example)
        laws.law_roundtrip(pack, example)


def test_a_single_block_cannot_reveal_a_rebase_bug():
    """Sanity of the controls: with one block the off-by-one packer is harmless, so k >= 2 is needed."""
    with pytest.raises(NoSuchExample):
        find(block_lists(min_k=1, max_k=1), _violates(laws.law_windows_see_the_same, laws.off_by_one_packer),
             settings=settings(max_examples=300, database=None))
