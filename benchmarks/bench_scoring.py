"""Scoring OP 0 against the memory bound: row_diff as a fraction of a plain numpy read of both sides.

    python benchmarks/bench_scoring.py [--elements 1e8] [--repeat 5]

The read bound is the fastest plain numpy pass that reads both arrays once: the best of
``a.max(); b.max()`` and ``np.bitwise_or.reduce`` over their int32 views (both vectorised
reductions that do no other work). Scoring cannot be faster than reading its two inputs, so
``read / row_diff`` is the fraction of that bound it reaches (100 % = as fast as a bare read).

Arrays are OP 0 of the full geometry: rows of 589 frames x 7 classes (one window each),
float32 log-probabilities (log-softmax, all <= 0), about ``--elements`` in all. Three cases:

* equal: the run is a bitwise copy of the golden (a healthy model on the same lane);
* few-ULP: every element differs from the golden by 1-3 ULP (another batch shape's kernels);
* slow path: signed values where every row has sign changes and one row in ten a NaN
  (the exact int64 path; rare in real outputs, a failing row anyway).

Each case is timed for the compiled ``row_diff`` (numba), the numpy fallback
``row_diff_numpy``, and the implementation before this change (kept below as the
baseline), interleaved with the read bound in every repetition; medians are reported. The
golden's per-frame decisions (``top_two``, computed once at record time) are timed compiled
and in numpy, and the whole OP 0 score of the few-ULP case is timed as the gate sees it.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from harness.compute.metrics import RowDiff, row_diff, row_diff_numpy, top_two, top_two_numpy, ulp_distance
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import SegmentationOutputs
from harness.judging.judges.segmentation_judge import SegmentationJudge, SegmentationTolerance


def compare_segmentation(golden: SegmentationOutputs, run: SegmentationOutputs, g: Geometry, margin: float):
    """The OP 0 judge's evidence for one batch, as the gate builds it (tolerance mode)."""
    judge = SegmentationJudge()
    limits = judge.limits(SegmentationTolerance(mode="tolerance", near_tie_margin=margin), None)
    evidence = judge.evidence(Op.SEGMENTATION, g, limits, "tolerance")
    evidence.add(golden, run)
    return evidence


# --- the implementation before this change (the baseline) -----------------------------------

_CHUNK_BEFORE = 1 << 18


def row_diff_before(a: np.ndarray, b: np.ndarray) -> RowDiff:
    rows = a.shape[0]
    per_row = int(np.prod(a.shape[1:], dtype=np.int64)) if a.ndim > 1 else 1
    a2 = np.ascontiguousarray(a, dtype=np.float32).reshape(rows, per_row)
    b2 = np.ascontiguousarray(b, dtype=np.float32).reshape(rows, per_row)
    out = RowDiff(
        np.zeros(rows),
        np.zeros(rows),
        np.zeros(rows, np.int64),
        np.zeros(rows, bool),
        np.zeros(rows, np.int64),
        0,
        per_row,
    )
    step = max(1, _CHUNK_BEFORE // max(per_row, 1))
    for s in range(0, rows, step):
        x, y = a2[s : s + step], b2[s : s + step]
        xi, yi = x.view(np.int32), y.view(np.int32)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.subtract(x, y)
            np.abs(d, out=d)
            rmax = d.max(axis=1)
            out.sum_abs[s : s + step] = d.sum(axis=1)
        out.max_abs[s : s + step] = rmax
        u = np.subtract(xi, yi)
        np.abs(u, out=u)
        umax = u.max(axis=1)
        out.max_ulp[s : s + step] = umax
        out.differs[s : s + step] = umax > 0
        count = int(np.count_nonzero(u))
        slow = ~np.isfinite(rmax) | (np.bitwise_xor(xi, yi).min(axis=1) < 0)
        for r in np.flatnonzero(slow):
            count -= int(np.count_nonzero(u[r]))
            count += _exact_row_before(x[r], y[r], out, s + r)
        out.differing += count
    out.max_abs[out.non_finite > 0] = np.nan
    return out


def _exact_row_before(x: np.ndarray, y: np.ndarray, out: RowDiff, r: int) -> int:
    finite = np.isfinite(x) & np.isfinite(y)
    out.non_finite[r] = int((~finite).sum())
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(x[finite] - y[finite])
    out.max_abs[r] = d.max() if d.size else 0.0
    out.sum_abs[r] = d.sum(dtype=np.float64)
    ulp = ulp_distance(x[finite], y[finite])
    out.max_ulp[r] = int(ulp.max()) if ulp.size else 0
    differing = int((x.view(np.int32) != y.view(np.int32)).sum())
    out.differs[r] = differing > 0
    return differing


# --- data -------------------------------------------------------------------------------------


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(np.float32)


def cases(rows: int, per_row: int, classes: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    golden = log_softmax(3 * rng.standard_normal((rows, per_row // classes, classes), dtype=np.float32))
    golden = golden.reshape(rows, per_row)
    few = golden.copy()
    step = rng.integers(1, 4, size=few.shape, dtype=np.int32) * np.where(rng.random(few.shape) < 0.5, -1, 1)
    few.view(np.int32)[...] += step.astype(np.int32)  # all <= 0 and far from 0: stays on its side
    signed = rng.standard_normal((rows, per_row), dtype=np.float32)
    slow = signed + np.float32(0.05) * rng.standard_normal((rows, per_row), dtype=np.float32)
    slow[:, 0] = -signed[:, 0]  # every row changes sign somewhere
    slow[::10, 1] = np.nan
    return {"equal": (golden, golden.copy()), "few-ULP": (golden, few), "slow path": (signed, slow)}


def read_bound(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    ai, bi = a.view(np.int32), b.view(np.int32)
    return {
        "a.max(); b.max()": timed(lambda: (a.max(), b.max())),
        "bitwise_or.reduce (int32 views)": timed(
            lambda: (np.bitwise_or.reduce(ai, axis=None), np.bitwise_or.reduce(bi, axis=None))
        ),
    }


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=float, default=1e8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-before", action="store_true", help="do not time the old implementation")
    args = parser.parse_args()
    g = Geometry()
    per_row = g.frames_per_window * g.classes
    rows = max(1, int(args.elements) // per_row)
    data = cases(rows, per_row, g.classes)
    n = rows * per_row
    impls = {"row_diff (compiled)": row_diff, "row_diff_numpy (fallback)": row_diff_numpy}
    if not args.skip_before:
        impls["before this change"] = row_diff_before
    row_diff(data["equal"][0][:2], data["equal"][1][:2])  # compile (or load the cache) outside the timing
    top_two(np.zeros((1, g.classes), np.float32))

    times: dict[str, list[float]] = defaultdict(list)
    for _ in range(args.repeat):
        for name, (a, b) in data.items():
            for method, seconds in read_bound(a, b).items():
                times[("read", name, method)].append(seconds)
            for label, fn in impls.items():
                times[(label, name)].append(timed(lambda fn=fn, a=a, b=b: fn(a, b)))
    med = {key: float(np.median(v)) for key, v in times.items()}

    print(
        f"elements: {n:.3g} ({rows} rows of {per_row} = one window of OP 0 each), "
        f"medians of {args.repeat} interleaved repetitions"
    )
    for name in data:
        bounds = {k[2]: v for k, v in med.items() if k[0] == "read" and k[1] == name}
        method, bound = min(bounds.items(), key=lambda kv: kv[1])
        print(
            f"\n{name}: read bound {bound * 1e3:.1f} ms ({2 * 4 * n / bound / 1e9:.1f} GB/s, fastest of: "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in bounds.items())
            + ")"
        )
        for label in impls:
            t = med[(label, name)]
            print(f"  {label:28s} {t * 1e3:8.1f} ms  {bound / t:6.1%} of the read bound")

    a, b = data["few-ULP"]
    frames = a.reshape(-1, g.classes)
    compiled = min(timed(lambda: top_two(frames)) for _ in range(3))
    numpy_tt = min(timed(lambda: top_two_numpy(frames)) for _ in range(3))
    print(
        f"\ngolden decisions (top_two over {frames.shape[0]:.3g} frames, once per golden at record time): "
        f"compiled {compiled * 1e3:.1f} ms, numpy {numpy_tt * 1e3:.1f} ms ({numpy_tt / compiled:.0f}x)"
    )

    blocks = rows // g.windows_per_block
    shape = (blocks, g.windows_per_block, g.frames_per_window, g.classes)
    ids = [f"b{i}" for i in range(blocks)]
    valid = np.full((blocks, g.windows_per_block), g.window_samples, np.int32)
    golden = SegmentationOutputs(ids, valid, a[: blocks * g.windows_per_block].reshape(shape))
    run = SegmentationOutputs(ids, valid, b[: blocks * g.windows_per_block].reshape(shape))
    golden.decisions()  # stored with the golden; not part of a score
    bound = min(v for k, v in med.items() if k[0] == "read" and k[1] == "few-ULP")
    full = float(np.median([timed(lambda: compare_segmentation(golden, run, g, 0.1)) for _ in range(3)]))
    totals = compare_segmentation(golden, run, g, 0.1).totals()
    print(
        f"whole OP 0 score, few-ULP case (row_diff + flips + per-block sums): {full * 1e3:.1f} ms, "
        f"{bound / full:.1%} of the read bound; max_ulp {totals['max_ulp']}, "
        f"differing {totals['fraction_differing']:.1%}, flips {totals['argmax_flips_near_tie']} near-tie / "
        f"{totals['argmax_flips_confident']} confident"
    )


if __name__ == "__main__":
    main()
