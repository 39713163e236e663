"""Triton lane vs in-process lane: throughput at k = 1 and k = 8 blocks per call, from one run.

    python benchmarks/bench_triton.py                      # small model, 16 blocks
    python benchmarks/bench_triton.py --model full --blocks 8

Both backends run the same lanes over the same corpus, interleaved repeat by repeat (so machine
drift hits both alike), with the same numeric settings; the table reports the median over the
repeats and the ratio Triton / in-process from the same run. Throughput is blocks per second
of the whole lane (every OP asked for, packing and unpacking included); the per-call p50 is
the backend's own ``wall_s`` (for Triton: the HTTP round trip). A script, not a timed test: its
numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a source checkout

from harness.corpus.synth import synth_corpus  # noqa: E402
from harness.data.numeric_settings import NumericSettings  # noqa: E402
from harness.data.ops import Op  # noqa: E402
from lanes.backends.backend import InProcessBackend  # noqa: E402
from lanes.backends.triton.server import ServerOptions, TritonServer  # noqa: E402
from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend  # noqa: E402
from lanes.models.model_api import load_model  # noqa: E402
from lanes.running.run_plan import RunPlan  # noqa: E402
from lanes.running.runner import run_lanes  # noqa: E402


@dataclass
class Sample:
    blocks_per_s: float
    call_p50_ms: float


def measure(backend, blocks, k: int, voiceprint_inputs, ops: tuple[Op, ...]) -> Sample:
    # This script warms up itself (below); a runner's own warm-up calls would be timed here.
    plan = RunPlan(shapes=(k,), include_exact=False, ops=ops, warmup=False)
    start = time.perf_counter()
    calls = run_lanes(blocks, backend, plan, sink=lambda lane, batch: None, golden_inputs=lambda ids: voiceprint_inputs)
    wall = time.perf_counter() - start
    return Sample(len(blocks) / wall, 1e3 * statistics.median(c.wall_s for c in calls))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small", help="model spec (small, full, pkg.mod:factory, file.pt)")
    parser.add_argument("--blocks", type=int, default=16, help="corpus blocks (a multiple of 8 packs whole calls)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ks", default="1,8", help="packed shapes to compare, comma-separated")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads on both sides (0: one per CPU; see docs/triton.md before "
        "using it on a machine shared with other jobs)",
    )
    parser.add_argument(
        "--ops",
        default="0,1,2",
        help="OPs to run (OP 0 always runs); '0' for a quick full-model run: its voiceprint takes ~1 s a window",
    )
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    ops = tuple(sorted({Op.SEGMENTATION, *(Op.parse(o) for o in args.ops.split(","))}))
    numerics = NumericSettings(threads=args.threads)

    local = InProcessBackend(load_model(args.model), numerics)
    corpus = synth_corpus(local.geometry, blocks=args.blocks)
    exact = []
    run_lanes(
        corpus.blocks,
        local,
        RunPlan(shapes=(), include_exact=True, ops=ops),
        sink=lambda lane, batch: exact.append(batch),
    )
    voiceprint_inputs = {
        op: {b: rows for batch in exact for b, rows in batch.voiceprint[op].inputs().items()}
        for op in ops
        if op.is_voiceprint
    }

    started = time.perf_counter()
    options = ServerOptions(model_spec=args.model, numerics=numerics, startup_timeout_s=600)
    with TritonServer(options) as server:
        startup = time.perf_counter() - started
        with TritonBackend(server.url, policy=CallPolicy(timeout_s=600)) as remote:
            assert remote.fingerprint == local.fingerprint, "server and in-process models differ"
            samples: dict[tuple[str, int], list[Sample]] = {}
            for k in ks:  # warm-up: first calls pay for allocations and lazy initialisation
                for backend in (local, remote):
                    measure(backend, corpus.blocks[:k], k, voiceprint_inputs, ops)
            for _ in range(args.repeats):
                for k in ks:
                    for name, backend in (("in-process", local), ("triton", remote)):
                        sample = measure(backend, corpus.blocks, k, voiceprint_inputs, ops)
                        samples.setdefault((name, k), []).append(sample)
    print(
        f"model {args.model}, {args.blocks} blocks x OPs {[int(o) for o in ops]}, "
        f"{args.repeats} repeats (median), "
        f"torch threads {numerics.resolved_threads()}, {os.cpu_count()} CPUs, "
        f"server start {startup:.1f} s, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'k':>3} | {'in-process blocks/s':>19} | {'triton blocks/s':>15} | {'triton/in-process':>17} | "
        f"{'p50 call in-proc':>16} | {'p50 call triton':>15}"
    )
    print("-" * 102)
    for k in ks:
        lo, tr = samples[("in-process", k)], samples[("triton", k)]
        lo_bps = statistics.median(s.blocks_per_s for s in lo)
        tr_bps = statistics.median(s.blocks_per_s for s in tr)
        print(
            f"{k:>3} | {lo_bps:>19.2f} | {tr_bps:>15.2f} | {tr_bps / lo_bps:>17.3f} | "
            f"{statistics.median(s.call_p50_ms for s in lo):>13.1f} ms | "
            f"{statistics.median(s.call_p50_ms for s in tr):>12.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
