"""benchmarks/device_gaps.py names every idle gap of a run's timeline by the calls around it. A
synthetic timeline of two groups with known gaps: each lands in its place and group, and they add up to the
idle time that the busy fraction misses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

GAPS = Path(__file__).resolve().parents[1] / "benchmarks" / "device_gaps.py"


@pytest.fixture(scope="module")
def gaps():
    spec = importlib.util.spec_from_file_location("device_gaps", GAPS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calls_of(rows):
    keys = ("lane", "shape", "op", "replica", "variant", "block_ids", "windows")
    return {k: [r[i] for r in rows] for i, k in enumerate(keys)}


def test_each_gap_is_named_by_its_place_and_group(gaps):
    group = [
        ("exact", 1, 0, 0, "", ["a"], 8),
        ("exact", 1, 0, 0, "", ["b"], 8),
        ("fast", 2, 0, 0, "", ["a", "b"], 16),
        ("exact", 1, 1, 0, "", ["a"], 8),
        ("fast", 2, 1, 0, "", ["a", "b"], 16),
    ]
    calls = calls_of(group + [(*r[:5], [i.upper() for i in r[5]], r[6]) for r in group])
    warm = 2
    # gap before entry t (ms): warm-up 10, warm-up -> lanes 20, then within exact 1, lane 2, OP 3, lane 4,
    # group 50, and the second group's within exact 1, lane 2, OP 3, lane 4
    before = [10, 20, 1, 2, 3, 4, 50, 1, 2, 3, 4]
    starts, t = [0.0], 0.0
    for gap in before:
        t += 0.001 + gap / 1e3  # every call lasts 1 ms
        starts.append(t)
    iv = np.array([(s, s + 0.001) for s in starts])
    r = gaps.analyse(iv, calls, top=3)
    assert r["warm_up_calls"] == warm
    ms = {p: round(v["idle_s"] * 1e3, 6) for p, v in r["by_place"].items()}
    assert ms == {
        "warm-up": 10,
        "warm-up -> lanes": 20,
        "within exact": 2,
        "lane boundary": 12,
        "OP boundary": 6,
        "group boundary": 50,
    }
    assert {g: round(v * 1e3, 6) for g, v in r["by_group"].items()} == {"warm-up": 10, "0": 30, "1": 60}
    assert abs(r["idle_s"] - sum(before) / 1e3) < 1e-9 and abs(r["busy"] - (1 - r["idle_s"] / r["span_s"])) < 1e-12
    assert [g["place"] for g in r["top"]] == ["group boundary", "warm-up -> lanes", "warm-up"]
    assert r["top"][0]["before"] == "k=2 OP 1 [a..b]" and r["top"][0]["next"] == "exact OP 0 [A]"


def test_a_timeline_of_fewer_calls_than_the_log_is_refused(gaps):
    calls = calls_of([("exact", 1, 0, 0, "", ["a"], 8)] * 3)
    with pytest.raises(SystemExit, match="not this run's timeline"):
        gaps.analyse(np.zeros((2, 2)), calls)
