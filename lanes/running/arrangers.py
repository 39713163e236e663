"""The arrangements of a packed shape: the same blocks, other neighbours, other slots, twice.

Today each block of a shape k always shares its request with the same neighbours at the same slot
(consecutive chunks: lane ``k4``). The engine packs whatever arrives, so a block must give the same
answer wherever it sits. ``--arrangements N`` (``[evidence] arrangements``) adds, per shape k >= 2,
N - 1 more arrangements of every lane group (the runner's group: the arrangement shuffles within a
group, never across, so memory stays bounded by a group):

- arrangements 1 .. N-2, lanes ``k4.a1`` ..: **shuffled** (:func:`shuffled`). Within a full group
  (its size a multiple of k, every group but perhaps the corpus's last), the blocks that sit in
  slot s of the consecutive chunks move to slot ``(s + d_j) mod k`` with ``d_j`` = -1, +1, -2, +2, ..
  (so the first slot's blocks sit last in arrangement 1, the last slot's sit first in arrangement
  2), each slot's blocks dealt to the chunks in a seeded order (other neighbours). The law: over
  arrangements 0 .. N-2 a block of a full group sits in min(N - 1, k) distinct slots (every slot when
  N - 1 >= k). A group's short tail (its last n mod k blocks: the plain lane's short request) stays
  one short request in a seeded order, so every block is sent in a request of the size the plain lane
  sent it in (a model's answer may depend on the request's size: that is the tolerances' business,
  not the slot's).
- arrangement N-1, lanes ``k4.d`` + ``k4.d2``: **duplicates** (:func:`duplicated`): every request holds
  k // 2 blocks, each twice, side by side (slots 2i and 2i+1), in a seeded order: the two copies must
  give the same answer. An odd k sends k - 1 entries per request (one slot short: a block "next to
  padding", padded to k under ``pad_to_fixed``).

A shuffle is a sort by ``sha256(seed | arrangement | block id)``: deterministic from the seed, the
arrangement and the group's members, the same under numpy 1.x and 2.x, in every process of a sharded
or Ray job (a Ray shard is whole lane groups). k = 1 gets no arrangement: one slot, no neighbours.
``--repeats N`` adds lanes ``k4.r2`` .. ``k4.rN``: the plain arrangement again. ``[evidence] neighbours``
(default on) adds lane ``k4.n`` per shape k >= 2: every block at its own slot, beside neighbours of other
audio (:mod:`lanes.running.neighbour_lane`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Final, Literal, Protocol, TypeVar

from lanes.running import neighbour_lane as neighbours
from lanes.running.variants import Arranger, FastVariant, consecutive

VariantKind = Literal["arrangement", "duplicate", "repeat", "neighbours"]
_LANE = re.compile(r"k([1-9][0-9]*)\.(a[1-9][0-9]*|d|d2|r[2-9]|r[1-9][0-9]+|n)")
DUPLICATE_TAGS: Final = ("d", "d2")


class _Named(Protocol):
    @property
    def id(self) -> str: ...


M = TypeVar("M", bound=_Named)


def slot_offset(index: int) -> int:
    """How far arrangement ``index`` (>= 1) moves a full group's slots: -1, +1, -2, +2, .."""
    step = (index + 1) // 2
    return -step if index % 2 else step


def _dealt(members: Sequence[M], seed: int, index: int) -> list[M]:
    """``members`` in the seeded order of arrangement ``index`` (a sort by a digest of each id)."""
    return sorted(members, key=lambda m: hashlib.sha256(f"{seed}|{index}|{m.id}".encode()).digest())


def shuffle_chunks(members: Sequence[M], k: int, seed: int, index: int) -> list[list[tuple[M, int]]]:
    """Arrangement ``index`` >= 1 of one group at shape k (see the module doc): chunks of (member, copy 0).
    A group's short tail (its last ``n % k`` members, the plain lane's short request) stays one short
    request, in a seeded order: every block is sent in a request of the same size as in the plain lane."""
    full = len(members) - len(members) % k
    chunks: list[list[tuple[M, int] | None]] = [[None] * k for _ in range(full // k)]
    for s in range(k):
        target = (s + slot_offset(index)) % k
        for c, member in enumerate(_dealt(members[s:full:k], seed, index)):
            chunks[c][target] = (member, 0)
    out = [[entry for entry in chunk if entry is not None] for chunk in chunks]
    if full < len(members):
        out.append([(m, 0) for m in _dealt(members[full:], seed, index)])
    return out


def duplicate_chunks(members: Sequence[M], k: int, seed: int, index: int) -> list[list[tuple[M, int]]]:
    """Every member twice, side by side (copy 0 then copy 1), k // 2 members per chunk, in a seeded order."""
    if k < 2:
        raise ValueError("duplicates need k >= 2: a request of one block cannot hold a block twice")
    per = k // 2
    ordered = _dealt(members, seed, index)
    return [[(m, c) for m in ordered[i : i + per] for c in (0, 1)] for i in range(0, len(ordered), per)]


def shuffled(seed: int, index: int) -> Arranger:
    """The runner's arranger of shuffled arrangement ``index``."""
    return lambda members, k: shuffle_chunks(members, k, seed, index)


def duplicated(seed: int, index: int) -> Arranger:
    """The runner's arranger of the duplicate arrangement (its number ``index``, for its shuffle)."""
    return lambda members, k: duplicate_chunks(members, k, seed, index)


def variants_for(
    shapes: Sequence[int], arrangements: int, repeats: int, seed: int, with_neighbours: bool = False
) -> tuple[FastVariant, ...]:
    """Every variant lane of a run: per shape k >= 2 its neighbour lane (``with_neighbours``), arrangements 1 ..
    N-2 shuffled and N-1 the duplicates (none when N == 1), then per shape its repeats 2 .. R (the plain
    arrangement again)."""
    if arrangements < 1 or repeats < 1:
        raise ValueError("arrangements and repeats count today's lane: each is at least 1")
    out: list[FastVariant] = []
    if with_neighbours:
        out += [
            FastVariant(
                k,
                (f"k{k}.{neighbours.NEIGHBOUR_TAG}",),
                neighbours.arranger(),
                neighbours.fill(seed),
                neighbours.request_count,
            )
            for k in shapes
            if k >= 2
        ]
    for k in shapes:
        if k < 2 or arrangements < 2:
            continue
        out += [FastVariant(k, (f"k{k}.a{j}",), shuffled(seed, j)) for j in range(1, arrangements - 1)]
        out.append(FastVariant(k, tuple(f"k{k}.{tag}" for tag in DUPLICATE_TAGS), duplicated(seed, arrangements - 1)))
    out += [FastVariant(k, (f"k{k}.r{j}",), consecutive) for k in shapes for j in range(2, repeats + 1)]
    return tuple(out)


def lane_kind(name: str) -> tuple[int, VariantKind, int] | None:
    """``k4.a2`` -> (4, "arrangement", 2); ``k4.d`` / ``k4.d2`` -> (4, "duplicate", copy 0 / 1); ``k4.r3`` ->
    (4, "repeat", 3); ``k4.n`` -> (4, "neighbours", 0); anything else (a plain lane, the exact lane) -> None."""
    found = _LANE.fullmatch(name)
    if found is None:
        return None
    k, tag = int(found.group(1)), found.group(2)
    if tag == neighbours.NEIGHBOUR_TAG:
        return k, "neighbours", 0
    if tag in DUPLICATE_TAGS:
        return k, "duplicate", DUPLICATE_TAGS.index(tag)
    return k, "arrangement" if tag[0] == "a" else "repeat", int(tag[1:])


def variant_table(variants: Sequence[FastVariant]) -> dict[str, dict[str, int | str]]:
    """The run manifest's ``evidence.variants``: lane -> {k, kind, index}."""
    table: dict[str, dict[str, int | str]] = {}
    for v in variants:
        for name in v.lanes:
            parsed = lane_kind(name)
            if parsed is None:
                raise ValueError(f"variant lane {name!r} is none of k<k>.a<j>, k<k>.d, k<k>.d2, k<k>.r<j>, k<k>.n")
            k, kind, index = parsed
            table[name] = {"k": k, "kind": kind, "index": index}
    return table


def manifest_evidence(
    variants: Sequence[FastVariant], arrangements: int, repeats: int, seed: int
) -> dict[str, object] | None:
    """The run manifest's ``evidence`` (None: a plan without variants, whose run is today's, key absent)."""
    if not variants:
        return None
    return {"arrangements": arrangements, "repeats": repeats, "seed": seed, "variants": variant_table(variants)}
