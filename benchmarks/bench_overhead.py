"""Harness overhead per shape, and the speedup the harness reports vs the raw forward speedup.

    python benchmarks/bench_overhead.py [--model small|full] [--blocks 16] [--shapes 2,4,8]

For each shape k (and the exact lane, k = 1), in one process:

- *network*: the time of the model calls as the lanes record them;
- *overhead*: everything else the harness adds to get a scored, stored result: packing and
  unpacking, mask derivation, output collection (lanes wall time minus network time), writing
  the lane's Parquet files, and scoring it against the exact lane; printed as a fraction of
  the network time;
- *raw forward*: the same requests (packed beforehand) sent straight to ``model.infer``, timed
  alone; the harness-reported speedup over the exact lane is printed next to the raw one.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from golden.tables import write_lane
from harness.corpus.synth import synth_corpus
from harness.masks import voiceprint_rows
from harness.numerics import NumericSettings
from harness.ops import Op
from harness.packing import pack
from harness.scoring import compare_segmentation, compare_voiceprint
from harness.timing import summarize_calls
from lanes.backend import InProcessBackend
from lanes.model_api import load_model
from lanes.runner import RunPlan, run_lanes


def raw_forward(model, requests: list[dict], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for r in requests:
            model.infer(r)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small")
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--shapes", default="2,4,8")
    args = parser.parse_args()
    shapes = tuple(int(s) for s in args.shapes.split(","))
    model = load_model(args.model)
    backend = InProcessBackend(model, NumericSettings())
    g = model.geometry
    corpus = synth_corpus(g, args.blocks)

    # one untimed pass over every shape: lazy initialisation is not the harness's overhead
    run_lanes(corpus.blocks[: max(shapes)], backend, RunPlan(shapes=shapes))
    write_lane(Path(tempfile.mkdtemp()), run_lanes(corpus.blocks[:1], backend, RunPlan()).exact[0], g)
    start = time.perf_counter()
    exact_result = run_lanes(corpus.blocks, backend, RunPlan(shapes=(), warmup=False))
    exact_wall = time.perf_counter() - start
    exact = exact_result.exact[0]
    inputs = {op: v.inputs() for op, v in exact.voiceprint.items()}
    calls = list(exact_result.calls)
    rows = []
    tmp = Path(tempfile.mkdtemp())
    for k in (1, *shapes):
        if k == 1:
            lane, wall, lane_calls = exact, exact_wall, exact_result.calls
        else:
            start = time.perf_counter()
            result = run_lanes(corpus.blocks, backend, RunPlan(shapes=(k,), include_exact=False, warmup=False),
                               voiceprint_inputs=inputs)
            wall = time.perf_counter() - start
            lane, lane_calls = result.fast[k], result.calls
            calls += lane_calls
        network = sum(c.wall_s for c in lane_calls)
        start = time.perf_counter()
        write_lane(tmp / f"k{k}", lane, g)
        parquet = time.perf_counter() - start
        start = time.perf_counter()
        compare_segmentation(exact.segmentation, lane.segmentation, g, 0.1)
        for op, vp in exact.voiceprint.items():
            compare_voiceprint(vp, lane.voiceprint[op], g)
        scoring = time.perf_counter() - start
        # raw forward: the same requests, packed outside the timing
        requests = []
        for i in range(0, len(corpus.blocks), k):
            chunk = corpus.blocks[i : i + k]
            requests.append(pack(chunk).tensors())
            for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
                vps = []
                for b in chunk:
                    r = inputs[op].get(b.id) or voiceprint_rows(exact.segmentation.block(b.id), b.valid, op, g)
                    vps.append(b.with_voiceprint(op, r.weights, r.idx, r.speakers, g))
                if sum(v.rows for v in vps):
                    requests.append(pack(vps).tensors())
        raw = raw_forward(model, requests, repeat=2)
        rows.append({"k": k, "network": network, "lanes": wall - network, "parquet": parquet, "scoring": scoring,
                     "raw": raw})
    summary = summarize_calls([c.to_dict() for c in calls])
    base_raw = rows[0]["raw"]
    print(f"model {args.model}, {args.blocks} blocks, torch threads {NumericSettings().resolved_threads()}")
    print(f"{'k':>3} {'network s':>10} {'lanes s':>8} {'parquet s':>9} {'score s':>8} {'overhead':>9} "
          f"{'raw s':>8} {'harness speedup':>16} {'raw speedup':>12}")
    for r in rows:
        overhead = (r["lanes"] + r["parquet"] + r["scoring"]) / r["network"]
        reported = summary["exact" if r["k"] == 1 else str(r["k"])].get("speedup") or 1.0
        print(f"{r['k']:>3} {r['network']:>10.3f} {r['lanes']:>8.3f} {r['parquet']:>9.3f} {r['scoring']:>8.3f} "
              f"{overhead:>8.1%} {r['raw']:>8.3f} {reported:>16.2f} {base_raw / r['raw']:>12.2f}")


if __name__ == "__main__":
    main()
