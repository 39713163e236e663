"""The registry of the laws: each one's name, statement, check, generated and boundary examples.

A law is judged on its boundary examples (:mod:`harness.laws.boundary`: the largest candidate k,
``pad_to`` at its maximum, the ends of spans) and then on ``examples`` generated ones; both take
``max_blocks``, the largest list the caller's engine packs (64 unless told).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import strategies as st

from harness.data.blocks import Block
from harness.laws import boundary
from harness.laws.boundary import DEFAULT_MAX_BLOCKS, Example
from harness.laws.laws import (
    law_associative,
    law_own_samples,
    law_padding_dropped,
    law_per_window_function,
    law_ragged_index,
    law_rebased_inside,
    law_round_trip,
    law_well_formed,
)
from harness.laws.strategies import block_lists
from harness.packers.packing import Packer

MAX_PADDING = 8  # padding blocks of a generated example (the boundary examples pad up to max_blocks)


@dataclass(frozen=True)
class Law:
    """One law: its name, what it states, its check and the examples it is judged on.

    ``examples(max_blocks)`` (or ``examples()``) is the hypothesis strategy of (blocks, params);
    ``boundary(max_blocks)`` the fixed examples judged first, always (none for a law without it).
    """

    name: str
    statement: str
    check: Callable[..., str | None]  # raises LawBroken; may return a note for the report
    examples: Callable[..., st.SearchStrategy]  # -> (blocks, params)
    note: Callable[[Packer], str] = field(default=lambda packer: "")  # what the report must say up front
    boundary: Callable[[int], list[Example]] | None = None

    def __call__(self, packer: Packer, blocks: list[Block], **params: object) -> str | None:
        return self.check(packer, blocks, **params)


def _plain(max_blocks: int = DEFAULT_MAX_BLOCKS) -> st.SearchStrategy:
    return block_lists(max_k=max_blocks).map(lambda blocks: (blocks, {}))


@st.composite
def _padded_examples(draw: st.DrawFn, max_blocks: int = DEFAULT_MAX_BLOCKS) -> Example:
    blocks = draw(block_lists(max_k=max_blocks))
    extra = draw(st.one_of(st.none(), st.integers(0, MAX_PADDING)), label="padding")
    return blocks, {"pad_to": None if extra is None else len(blocks) + extra}


@st.composite
def _cut_examples(draw: st.DrawFn, max_blocks: int = DEFAULT_MAX_BLOCKS) -> Example:
    blocks = draw(block_lists(min_k=2, max_k=max(2, max_blocks)))
    return blocks, {"cut": draw(st.integers(1, len(blocks) - 1), label="cut")}


@st.composite
def _padding_examples(draw: st.DrawFn, max_blocks: int = DEFAULT_MAX_BLOCKS) -> Example:
    blocks = draw(block_lists(max_k=max_blocks))
    return blocks, {"extra": draw(st.integers(0, MAX_PADDING), label="padding blocks")}


def _associative_note(packer: Packer) -> str:
    if getattr(packer, "accepts_packs", False):
        return "concatenation and nested forms"
    return (
        "concatenation form only: the nested form pack([pack(a..b), pack(c..d)]) needs a packer that takes "
        "packs, and this one takes blocks"
    )


LAWS: tuple[Law, ...] = (
    Law(
        "well-formed",
        "the packer answers every valid request with a request that meets the contract "
        "(names, dtypes, OFFSETS + VALID inside SPAN, IDX in range) and a consistent layout",
        law_well_formed,
        _padded_examples,
        boundary=boundary.padded,
    ),
    Law(
        "round-trip",
        "split by its layout, the request gives back every block exactly (SPAN, OFFSETS, VALID, "
        "WEIGHTS, IDX, speakers), and unpack returns each block's own outputs",
        law_round_trip,
        _plain,
        boundary=boundary.plain,
    ),
    Law(
        "own-samples",
        "every window sees exactly the samples it sees when its block is sent alone (zeros past "
        "VALID, never another block's audio)",
        law_own_samples,
        _plain,
        boundary=boundary.plain,
    ),
    Law(
        "rebased-inside",
        "each block's OFFSETS + VALID stay inside its own part of SPAN and its IDX inside its own windows",
        law_rebased_inside,
        _plain,
        boundary=boundary.plain,
    ),
    Law(
        "per-window-function",
        "a per-window (OP 0) / per-row (OP 1/2) function of the packed request, "
        "unpacked, equals the function of each block alone",
        law_per_window_function,
        _plain,
        boundary=boundary.plain,
    ),
    Law(
        "associative",
        "pack(a..b) ++ pack(c..d) == pack(a..d), ++ being the contract's rebasing concatenation",
        law_associative,
        _cut_examples,
        _associative_note,
        boundary=boundary.cuts,
    ),
    Law(
        "padding-dropped",
        "padded to k with empty blocks, the request holds k blocks and unpack returns exactly "
        "the real ones, with their own outputs",
        law_padding_dropped,
        _padding_examples,
        boundary=boundary.padding,
    ),
    Law(
        "ragged-index",
        "Triton's batch-input index tensors (element counts, accumulated counts with and without "
        "zero, max element count as shape, item shapes) are exactly those of the packer's layout, one item per "
        "segment, a padding block an item of 0 samples, in one integer dtype, and locate every block's span in SPAN",
        law_ragged_index,
        _padded_examples,
        boundary=boundary.padded,
    ),
)
LAWS_BY_NAME: dict[str, Law] = {law.name: law for law in LAWS}
