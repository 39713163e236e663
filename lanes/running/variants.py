"""More packed lanes at a shape: the same blocks in another arrangement, or the same again (a repeat).

A plain shape k sends a group's blocks in consecutive chunks (lane ``k4``). A *variant* of k sends the
same group again, arranged by its :data:`Arranger` (other neighbours, other slots, a block twice in one
request), as one lane per copy index (``k4.a1``; a duplicate variant ``k4.d`` + ``k4.d2``). The runner
(:mod:`lanes.running.runner`) runs the variants after the plain shapes, in every group and OP, and checks
here, before any call, the law an arranger must keep: in every group every lane of a variant receives
every member exactly once, and a chunk holds at most k entries. Otherwise a lane's outputs would be
partial or overwritten, and a verdict on them would stand for blocks it never saw.

A block of copy index >= 1 is sent under another id (:func:`sent_as`, ``id~copy``), so any packer
accepts a request holding the same block twice; its output is collected under the original id. A variant
with a ``fill`` (the neighbour arrangement, :mod:`lanes.running.neighbour_lane`) may also place entries of copy index
``FILLER``: the block sent with its audio replaced by ``fill``, its answer dropped; they are not counted
by the law (a filled block is not answered in any lane).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.base.errors import LaneError, clip_list
from harness.data.blocks import Block
from harness.data.shape import lane_name

# (group members in corpus order, k) -> the chunks of one arrangement: each entry a block and a copy index
Arranger = Callable[[Sequence[Block], int], list[list[tuple[Block, int]]]]
Fill = Callable[
    [Block], Block
]  # a neighbour's stand-in: the block with other audio (lanes.running.neighbour_lane.filler)
FILLER = -1  # an entry's copy index: sent through the variant's fill, answered in no lane

_TAG = re.compile(r"[a-z][a-z0-9]*")
COPY_MARK = "~"  # a copy's id on the wire: f"{id}~{copy}" (copy >= 1)


@dataclass(frozen=True)
class FastVariant:
    """More packed lanes at shape k: the same blocks in another arrangement, or the same again (a repeat).

    ``lanes``: one lane name per copy index, each ``k{k}.{tag}`` (tag ``[a-z][a-z0-9]*``)."""

    k: int
    lanes: tuple[str, ...]  # one lane name per copy index: ("k4.a1",) or ("k4.d", "k4.d2")
    arrange: Arranger
    fill: Fill | None = None  # entries of copy FILLER are sent through it (None: the arranger may place none)
    # requests it sends for a group of n blocks at k, for progress bars (None: every copy once, k to a request)
    requests: Callable[[int, int], int] | None = None

    def request_count(self, n: int) -> int:
        """The requests this variant sends for a group of ``n`` blocks."""
        return self.requests(n, self.k) if self.requests is not None else -(-n * len(self.lanes) // self.k)

    def __post_init__(self) -> None:
        if not self.lanes:
            raise LaneError(f"a variant of k={self.k} names no lane")
        for name in self.lanes:
            prefix, dot, tag = str(name).partition(".")
            if prefix != lane_name(self.k) or not dot or not _TAG.fullmatch(tag):
                raise LaneError(
                    f"variant lane {name!r}: expected 'k{self.k}.<tag>', tag [a-z][a-z0-9]* (e.g. k4.a1, k4.d2)"
                )
        if len(set(self.lanes)) != len(self.lanes):
            raise LaneError(f"variant lanes {list(self.lanes)}: a lane named twice")


Entry = tuple[Block, int]


def check_variants(variants: Sequence[FastVariant], shapes: Sequence[int]) -> None:
    """Every variant's k is a plain shape of the plan (warmed up, checked to fit, packing whole groups),
    and no lane is named twice across the plan."""
    names: list[str] = []
    for v in variants:
        if v.k not in shapes:
            raise LaneError(
                f"variant lanes {list(v.lanes)}: k={v.k} is not a shape of the plan "
                f"(shapes {clip_list(shapes)}); a variant re-arranges a shape that runs"
            )
        names += v.lanes
    twice = sorted(n for n, c in Counter(names).items() if c > 1)
    if twice:
        raise LaneError(f"variant lane {twice[0]!r} is named by two variants")


def arrangement(variant: FastVariant, members: Sequence[Block]) -> list[list[Entry]]:
    """The variant's chunks of one group, checked against the law (LaneError naming what broke it)."""
    where = f"variant lanes {list(variant.lanes)} (k={variant.k})"
    try:
        chunks = [list(chunk) for chunk in variant.arrange(members, variant.k)]
    except LaneError:
        raise
    except Exception as exc:  # an arranger is a plug-in: name it
        raise LaneError(f"{where}: the arranger raised {type(exc).__name__}: {exc}") from exc
    ids = [b.id for b in members]
    known = {b.id: b for b in members}
    seen: list[Counter[str]] = [Counter() for _ in variant.lanes]
    for i, chunk in enumerate(chunks):
        if not chunk or len(chunk) > variant.k:
            raise LaneError(f"{where}: chunk {i} holds {len(chunk)} entries, allowed 1..{variant.k}")
        for j, (block, copy) in enumerate(chunk):
            block_id = getattr(block, "id", None)
            filled = copy == FILLER and variant.fill is not None
            if not isinstance(copy, int) or not (filled or 0 <= copy < len(variant.lanes)):
                raise LaneError(
                    f"{where}: chunk {i} gives block {block_id!r} copy index {copy!r}, allowed "
                    f"0..{len(variant.lanes) - 1} (one per lane)"
                )
            if block_id not in known:
                raise LaneError(
                    f"{where}: chunk {i} holds block {block_id!r}, not a member of this group "
                    f"(members {ids[0]!r}..{ids[-1]!r})"
                )
            chunk[j] = (known[block_id], copy)  # the member itself: what the plain lanes send
            if not filled:
                seen[copy][block_id] += 1
    for copy, counts in enumerate(seen):
        wrong = [(b, counts[b]) for b in ids if counts[b] != 1]
        if wrong:
            b, n = wrong[0]
            raise LaneError(
                f"{where}: lane {variant.lanes[copy]!r} receives block {b!r} {n} times, expected "
                f"exactly once ({len(wrong)} of {len(ids)} members wrong); an arranger must give "
                "every lane every member of the group exactly once"
            )
    return chunks


def sent_as(block: Block, copy: int, fill: Fill | None = None) -> Block:
    """The block as a request carries it: copy 0 itself, copy c >= 1 renamed ``id~c``, a ``FILLER`` entry
    through the variant's ``fill``."""
    if copy == FILLER:
        if fill is None:
            raise LaneError(f"block {block.id!r}: a filled entry in a variant without a fill")
        return fill(block)
    return block if copy == 0 else dataclasses.replace(block, id=f"{block.id}{COPY_MARK}{copy}")


def consecutive(members: Sequence[Block], k: int) -> list[list[Entry]]:
    """Today's arrangement (the plain lane's): consecutive chunks of k, every block copy 0 (a repeat's)."""
    return [[(b, 0) for b in members[i : i + k]] for i in range(0, len(members), k)]
