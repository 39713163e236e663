"""Lane throughput per shape: blocks/s and speedup over the exact lane, from one interleaved run.

    python benchmarks/bench_lanes.py --model full --blocks 64 --shapes 2,4,8 [--ops 0,1,2]

The exact lane and every shape run interleaved over the same corpus (as the nightly does), so
machine drift hits all of them alike; per-OP and whole-pipeline blocks/s and speedups come from
the recorded calls. Also prints the model's cost per block and per window at the exact lane.
"""

from __future__ import annotations

import argparse
import time

from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import Op
from harness.progress import progress_bar
from harness.throughput.timing import summarize_calls
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model
from lanes.running.run_plan import RunPlan
from lanes.running.runner import LaneHooks, run_lanes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="full")
    parser.add_argument("--blocks", type=int, default=64)
    parser.add_argument("--shapes", default="2,4,8")
    parser.add_argument("--ops", default="0,1,2")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    shapes = tuple(int(s) for s in args.shapes.split(","))
    ops = tuple(Op(int(o)) for o in args.ops.split(","))
    model = load_model(args.model, device=args.device)
    backend = InProcessBackend(model, NumericSettings(), args.device)
    corpus = synth_corpus(model.geometry, args.blocks)
    plan = RunPlan(shapes=shapes, ops=ops)
    start = time.perf_counter()
    with progress_bar("lanes", plan.calls(len(corpus))) as tick:
        calls = run_lanes(corpus.blocks, backend, plan, sink=lambda lane, batch: None, hooks=LaneHooks(progress=tick))
    wall = time.perf_counter() - start
    summary = summarize_calls([c.to_dict() for c in calls])
    windows = sum(int((b.valid > 0).sum()) for b in corpus.blocks)
    print(
        f"model {args.model} on {args.device}, {args.blocks} blocks ({windows} audio windows, 8 per call in the "
        f"exact lane), OPs {[int(o) for o in ops]}, threads {NumericSettings().resolved_threads()}, "
        f"total {wall:.0f} s"
    )
    exact = summary["exact"]
    for op, v in exact["ops"].items():
        per_block = v["wall_s"] / v["blocks"]
        print(
            f"exact lane OP {op}: {per_block:.3f} s per block, {per_block / 8:.3f} s per window "
            f"(p50 {v['p50_ms']:.0f} ms per call)"
        )
    print(f"{'lane':>6} {'blocks/s':>9} {'speedup':>8}  per OP: blocks/s (speedup)")
    for key in ["exact", *[str(k) for k in shapes]]:
        s = summary[key]
        per_op = "  ".join(
            f"OP {op}: {v['blocks_per_s']:.3f} ({(v.get('speedup') or 1.0):.2f}x)" for op, v in s["ops"].items()
        )
        print(f"{key:>6} {s['blocks_per_s']:>9.3f} {(s.get('speedup') or 1.0):>7.2f}x  {per_op}")


if __name__ == "__main__":
    main()
