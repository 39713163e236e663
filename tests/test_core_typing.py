"""Behaviour the typing of the core data layer touched: what changed, and what must not."""

from __future__ import annotations

import hashlib

import numpy as np

from harness.data.outputs import LaneOutputs, SegmentationOutputs
from harness.data.parquet import HashingFile


def test_hashing_file_counts_bytes_of_any_buffer(tmp_path):
    """The manifest's byte count of a file is its size in bytes, also for a buffer of 4-byte items
    (``len`` of such a memoryview counts items: 4 where the file holds 16 bytes)."""
    data = np.arange(4, dtype=np.float32)
    path = tmp_path / "f.bin"
    f = HashingFile(path)
    f.write(memoryview(data))
    f.close()
    assert path.stat().st_size == 16
    assert f.size == 16, f"HashingFile.size {f.size} != the 16 bytes written"
    assert f.sha256.hexdigest() == hashlib.sha256(data.tobytes()).hexdigest()


def _seg(ids: list[str], value: float) -> SegmentationOutputs:
    return SegmentationOutputs(ids, np.ones((len(ids), 2), np.int32), np.full((len(ids), 2, 3, 4), value, np.float32))


def test_decisions_cache_follows_select_and_concat():
    """The per-frame decisions (cached on first use) are carried by select and concat, and a concat
    of parts of which one has none computes them afresh instead of keeping a partial cache."""
    a, b = _seg(["a"], 0.0), _seg(["b", "c"], 1.0)
    argmax, margin = a.decisions()
    assert argmax.shape == (6,) and margin.shape == (6,)
    only_a = LaneOutputs.concat([LaneOutputs(a, {}), LaneOutputs(b, {})]).segmentation
    assert only_a._decisions is None  # b had none: nothing partial kept
    b.decisions()
    both = LaneOutputs.concat([LaneOutputs(a, {}), LaneOutputs(b, {})]).segmentation
    assert both._decisions is not None and both._decisions[0].shape == (18,)
    picked = both.select(["c"])
    assert picked._decisions is not None
    np.testing.assert_array_equal(picked.decisions()[0], b.decisions()[0][6:])
