"""Vectorised voiceprint row matching (harness.judging.judges.rowkeys) against the obvious Python reference."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.data.ops import Op
from harness.data.outputs import VoiceprintOutputs
from harness.judging.judges import rowkeys

KEYS = st.tuples(st.sampled_from(["a", "b", "blk-10", "z"]), st.integers(0, 7), st.integers(0, 2))


def rows(keys: list[tuple[str, int, int]]) -> VoiceprintOutputs:
    n = len(keys)
    return VoiceprintOutputs(
        Op.VOICEPRINT,
        np.array([k[0] for k in keys], dtype=object),
        np.arange(n, dtype=np.int32),
        np.array([k[1] for k in keys], dtype=np.int32),
        np.array([k[2] for k in keys], dtype=np.int32),
        np.zeros((n, 3), np.float32),
        np.zeros((n, 2), np.float32),
    )


def reference(golden: list, run: list):
    pos = {k: i for i, k in enumerate(run)}
    gi = [i for i, k in enumerate(golden) if k in pos]
    return (
        gi,
        [pos[golden[i]] for i in gi],
        [i for i, k in enumerate(golden) if k not in pos],
        [i for i, k in enumerate(run) if k not in set(golden)],
    )


def first_repeat(keys: list):
    seen = set()
    return next((k for k in keys if k in seen or seen.add(k)), None)


@given(st.lists(KEYS, unique=True, max_size=30), st.lists(KEYS, unique=True, max_size=30), st.randoms())
def test_match_is_the_reference_match(golden, run, rnd):
    run = list(run)
    rnd.shuffle(run)
    m = rowkeys.match(rows(golden), rows(run))
    assert (m.golden.tolist(), m.run.tolist(), m.golden_only.tolist(), m.run_only.tolist()) == reference(golden, run)


@given(st.lists(KEYS, unique=True, max_size=30))
def test_the_same_keys_in_the_same_order_match_as_the_identity(keys):
    m = rowkeys.match(rows(keys), rows(list(keys)))
    assert m.identity and m.golden.tolist() == m.run.tolist() == list(range(len(keys)))


@given(st.lists(KEYS, max_size=30))
def test_first_duplicate_is_the_first_key_seen_twice(keys):
    assert rowkeys.first_duplicate(rows(keys)) == first_repeat(keys)


def test_windows_beyond_the_packed_range_take_the_slow_path():
    golden = [("a", 1 << 30, 0), ("b", 2, 1)]
    run = [("b", 2, 1), ("a", 1 << 30, 0)]
    m = rowkeys.match(rows(golden), rows(run))
    assert (m.golden.tolist(), m.run.tolist()) == ([0, 1], [1, 0])
    assert rowkeys.first_duplicate(rows(golden + golden[:1])) == golden[0]
