"""Deterministic corpus shards, so a CI matrix can spread a corpus over machines.

A block belongs to shard ``i`` of ``n`` (1-based, as CI matrices count) by the sha256 of its
id, not its position: the same block lands in the same shard whatever order the corpus
file lists it in, and shards never overlap.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from harness.base.errors import HarnessError
from harness.data.shard_text import parse_shard, shard_refusal


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``i/n`` (the one rule of :mod:`harness.data.shard_text`, which the configuration's validator applies)."""
        why = shard_refusal(text)
        if why is not None:
            raise HarnessError(why)
        return cls(*parse_shard(text))

    def owns(self, block_id: str) -> bool:
        digest = hashlib.sha256(block_id.encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def select(self, block_ids: list[str]) -> list[int]:
        return [j for j, b in enumerate(block_ids) if self.owns(b)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class BlockRange:
    """Shard ``index`` of ``count``: whole consecutive groups of the corpus as one process walks it.

    Why not :class:`Shard` (hashed ids): a packed call holds consecutive blocks of one group, so a
    shard made of whole groups makes exactly the calls a one-process run makes for its blocks, and
    the merged result is bitwise that run's on any device, even one whose kernels would answer a
    window differently next to other neighbours. Used where the harness itself splits the work
    (``--ray``), so a shard's blocks are known when it is handed out."""

    index: int  # 1..count
    count: int
    ids: tuple[str, ...]

    def owns(self, block_id: str) -> bool:
        return block_id in self.members

    @cached_property
    def members(self) -> frozenset[str]:
        return frozenset(self.ids)

    @property
    def blocks(self) -> int:
        return len(self.ids)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class RequestRange:
    """Shard ``index`` of ``count`` of a production capture: its requests ``first`` .. ``stop - 1`` (file rows).

    Why whole requests: a worker reads its shard straight from the capture, row group by row group,
    and each captured block is re-run alone (the exact lane), so any cut makes the same calls; whole
    consecutive requests keep the driver's walk over the capture (scoring in file order) and the
    shards' results in the same order. ``blocks``: the real blocks the shard holds (what it costs)."""

    index: int  # 1..count
    count: int
    first: int
    stop: int
    blocks: int

    @property
    def rows(self) -> range:
        return range(self.first, self.stop)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def request_ranges(blocks_per_request: Sequence[int], count: int) -> list[RequestRange]:
    """The capture's requests (in file order, with their real block counts) cut into at most ``count``
    consecutive shards of whole requests, as even in blocks as whole requests allow; never an empty
    shard (fewer shards when there are fewer requests)."""
    sizes = [int(n) for n in blocks_per_request]
    if count < 1:
        raise HarnessError(f"request ranges need a shard count >= 1 (got {count})")
    if not sizes:
        raise HarnessError("nothing to shard: the capture holds no request")
    count = min(count, len(sizes))
    cumulative = list(itertools.accumulate(sizes))
    total = cumulative[-1]
    bounds = [0]
    for j in range(1, count):
        # the first request past j/count of the blocks (of the requests, when none holds a block)
        cut = bisect.bisect_left(cumulative, j * total / count) + 1 if total else j * len(sizes) // count
        bounds.append(min(max(cut, bounds[-1] + 1), len(sizes) - (count - j)))
    bounds.append(len(sizes))
    return [
        RequestRange(j + 1, count, bounds[j], bounds[j + 1], sum(sizes[bounds[j] : bounds[j + 1]]))
        for j in range(count)
    ]


def block_ranges(block_ids: list[str], group: int, count: int) -> list[BlockRange]:
    """``block_ids`` (in corpus order) cut into at most ``count`` shards of whole ``group``-block groups,
    as even as whole groups allow; never an empty shard (fewer shards when there are fewer groups)."""
    if group < 1 or count < 1:
        raise HarnessError(f"block ranges need a group size and a shard count >= 1 (got {group}, {count})")
    groups = [block_ids[i : i + group] for i in range(0, len(block_ids), group)]
    if not groups:
        raise HarnessError("nothing to shard: the corpus holds no block")
    count = min(count, len(groups))
    bounds = [j * len(groups) // count for j in range(count + 1)]
    return [
        BlockRange(j + 1, count, tuple(b for g in groups[bounds[j] : bounds[j + 1]] for b in g)) for j in range(count)
    ]
