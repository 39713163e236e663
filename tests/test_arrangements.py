"""The arrangers of ``--arrangements N`` (lanes.running.arrangers): the laws they keep, as properties."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanes.running.arrangers import (
    duplicate_chunks,
    lane_kind,
    shuffle_chunks,
    slot_offset,
    variant_table,
    variants_for,
)
from lanes.running.variants import arrangement, consecutive


@dataclass(frozen=True)
class Member:
    id: str


def group(n: int) -> list[Member]:
    return [Member(f"b{i:03d}") for i in range(n)]


shapes = st.integers(min_value=2, max_value=9)
sizes = st.integers(min_value=1, max_value=40)
seeds = st.integers(min_value=0, max_value=2**32 - 1)


@settings(max_examples=60, deadline=None)
@given(k=shapes, n=sizes, seed=seeds, index=st.integers(min_value=1, max_value=8))
def test_a_shuffle_gives_every_member_once_in_chunks_of_at_most_k(k, n, seed, index):
    members = group(n)
    chunks = shuffle_chunks(members, k, seed, index)
    assert all(1 <= len(c) <= k for c in chunks)
    assert len(chunks) == len(consecutive(members, k))  # the same number of requests as the plain lane
    assert sorted(m.id for c in chunks for m, copy in c) == [m.id for m in members]
    assert all(copy == 0 for c in chunks for _, copy in c)
    assert shuffle_chunks(members, k, seed, index) == chunks  # deterministic
    size = {m.id: len(c) for c in consecutive(members, k) for m, _ in c}
    assert all(len(c) == size[m.id] for c in chunks for m, _ in c)  # each block's request keeps its plain size
    variant = variants_for([k], 3, 1, seed)[0]
    assert arrangement(variant, members)  # the runner's own law check accepts it


@settings(max_examples=60, deadline=None)
@given(k=shapes, groups=st.integers(min_value=1, max_value=5), seed=seeds, n_arr=st.integers(min_value=2, max_value=10))
def test_in_a_full_group_a_block_visits_min_n_k_distinct_slots(k, groups, seed, n_arr):
    """Over arrangements 0 .. N-2 (the plain one and the shuffles) a block of a full group sits in
    min(N - 1, k) distinct slots; the plain first slot sits last in arrangement 1, the plain last first in 2."""
    members = group(k * groups)
    slots: dict[str, list[int]] = {m.id: [i % k] for i, m in enumerate(members)}
    for index in range(1, n_arr - 1):
        for chunk in shuffle_chunks(members, k, seed, index):
            assert len(chunk) == k
            for s, (m, _) in enumerate(chunk):
                slots[m.id].append(s)
    for i, m in enumerate(members):
        seen = slots[m.id]
        assert len(set(seen)) == min(len(seen), k), (m.id, seen)
        if len(seen) > 1 and i % k == 0:
            assert seen[1] == k - 1
        if len(seen) > 2 and i % k == k - 1:
            assert seen[2] == 0


def test_the_shuffle_changes_neighbours_and_the_slot_offsets_alternate():
    assert [slot_offset(j) for j in range(1, 6)] == [-1, 1, -2, 2, -3]
    members = group(32)
    plain = {frozenset(m.id for m, _ in c) for c in consecutive(members, 4)}
    moved = {frozenset(m.id for m, _ in c) for c in shuffle_chunks(members, 4, 0, 1)}
    assert not plain & moved  # no request of arrangement 1 is a request of the plain lane (this seed)
    assert shuffle_chunks(members, 4, 1, 1) != shuffle_chunks(members, 4, 0, 1)  # the seed matters


@settings(max_examples=60, deadline=None)
@given(k=shapes, n=sizes, seed=seeds)
def test_duplicates_sit_side_by_side_in_one_request(k, n, seed):
    members = group(n)
    chunks = duplicate_chunks(members, k, seed, 2)
    assert all(2 <= len(c) <= k and len(c) % 2 == 0 for c in chunks)
    for chunk in chunks:
        for i in range(0, len(chunk), 2):
            (a, ca), (b, cb) = chunk[i], chunk[i + 1]
            assert a is b and (ca, cb) == (0, 1)
    counts = Counter((m.id, c) for chunk in chunks for m, c in chunk)
    assert set(counts.values()) == {1} and len(counts) == 2 * n
    variant = variants_for([k], 3, 1, seed)[-1]
    assert variant.lanes == (f"k{k}.d", f"k{k}.d2") and arrangement(variant, members)


def test_variants_for_names_the_lanes_and_their_kinds():
    variants = variants_for([1, 2, 4], 4, 3, 0)
    names = [name for v in variants for name in v.lanes]
    assert names == [
        "k2.a1",
        "k2.a2",
        "k2.d",
        "k2.d2",
        "k4.a1",
        "k4.a2",
        "k4.d",
        "k4.d2",
        "k1.r2",
        "k1.r3",
        "k2.r2",
        "k2.r3",
        "k4.r2",
        "k4.r3",
    ]  # k=1: no arrangement, one slot
    assert variants_for([2, 4], 1, 1, 0) == ()  # today's run: no variant at all
    assert [n for v in variants_for([4], 2, 1, 0) for n in v.lanes] == ["k4.d", "k4.d2"]
    table = variant_table(variants)
    assert table["k4.a2"] == {"k": 4, "kind": "arrangement", "index": 2}
    assert table["k4.d2"] == {"k": 4, "kind": "duplicate", "index": 1}
    assert table["k1.r3"] == {"k": 1, "kind": "repeat", "index": 3}
    assert lane_kind("k4") is None and lane_kind("exact") is None and lane_kind("k4.r1") is None
    with pytest.raises(ValueError):
        variants_for([2], 0, 1, 0)


def test_the_flags_and_the_file_set_the_evidence_section_and_the_plan_follows(tmp_path):
    from harness.base.errors import ConfigError
    from harness.cli.app import resolve_config
    from harness.pipeline.run import plan_for
    from harness.release_config import load_config

    assert load_config(None).evidence.arrangements == 3 and load_config(None).evidence.repeats == 1
    cfg = resolve_config(None, shapes="2,4", arrangements=1, repeats=2)
    assert (cfg.evidence.arrangements, cfg.evidence.repeats) == (1, 2)
    assert [n for v in plan_for(cfg).variants for n in v.lanes] == ["k2.n", "k4.n", "k2.r2", "k4.r2"]
    path = tmp_path / "harness.toml"
    path.write_text("[evidence]\narrangements = 2\nseed = 7\n")
    cfg = load_config(path)
    assert [n for v in plan_for(cfg).variants for n in v.lanes] == ["k2.n", "k4.n", "k2.d", "k2.d2", "k4.d", "k4.d2"]
    path.write_text("[evidence]\narrangements = 2\nneighbours = false\n")  # the neighbour lane is its own switch
    cfg = load_config(path)
    assert [n for v in plan_for(cfg).variants for n in v.lanes] == ["k2.d", "k2.d2", "k4.d", "k4.d2"]
    with pytest.raises(ConfigError, match=r"--arrangements 0: evidence.arrangements: Input should be greater"):
        resolve_config(None, arrangements=0)
