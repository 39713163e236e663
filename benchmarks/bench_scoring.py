"""Scoring cost vs a bare numpy max-abs-difference pass, on 10^8 float32 elements (OP 0 layout).

    python benchmarks/bench_scoring.py [--elements 1e8] [--repeat 3]

Prints the time of ``np.max(np.abs(a - b))`` and of the harness's full OP 0 score of the same
arrays (max/mean abs, max ULP, bits differing, NaN/Inf count, argmax and mask flips classed
near-tie/confident, per window and per block), and their ratio, measured in the same run.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from harness.geometry import Geometry
from harness.outputs import SegmentationOutputs
from harness.scoring import compare_segmentation


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=float, default=1e8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    g = Geometry()
    per_block = g.windows_per_block * g.frames_per_window * g.classes
    blocks = max(1, int(args.elements) // per_block)
    rng = np.random.default_rng(0)
    shape = (blocks, g.windows_per_block, g.frames_per_window, g.classes)
    golden = rng.standard_normal(shape, dtype=np.float32)
    run = golden.copy()
    noisy = rng.random(shape) < 0.9  # a realistic case: most elements differ by a few ULP
    run[noisy] += np.float32(1e-6) * rng.standard_normal(int(noisy.sum()), dtype=np.float32)
    valid = np.full((blocks, g.windows_per_block), g.window_samples, np.int32)
    ids = [f"b{i}" for i in range(blocks)]
    a, b = SegmentationOutputs(ids, valid, golden), SegmentationOutputs(ids, valid, run)
    n = golden.size
    bare = best_of(lambda: np.max(np.abs(golden - run)), args.repeat)
    start = time.perf_counter()
    a.decisions()  # the golden's per-frame argmax/margin: computed at record time, stored in op0.parquet
    cold = time.perf_counter() - start
    full = best_of(lambda: compare_segmentation(a, b, g, 0.1), args.repeat)
    score = compare_segmentation(a, b, g, 0.1).totals()
    print(f"elements: {n:.3g} ({blocks} blocks of {per_block}), best of {args.repeat}")
    print(f"bare numpy max(abs(a - b)):   {bare:8.3f} s  ({n / bare / 1e9:.2f} G elements/s)")
    print(f"golden decisions (once, at record time): {cold:.3f} s (stored with the golden, not redone when scoring)")
    print(f"harness OP 0 score:           {full:8.3f} s  ({n / full / 1e9:.2f} G elements/s)")
    print(f"ratio harness / bare:         {full / bare:8.2f}x  (target < 2x)")
    print(f"score: max_abs {score['max_abs']:.3g}, max_ulp {score['max_ulp']}, "
          f"differing {score['fraction_differing']:.1%}, flips {score['argmax_flips_near_tie']} near-tie / "
          f"{score['argmax_flips_confident']} confident")


if __name__ == "__main__":
    main()
