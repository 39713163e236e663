"""Triton lane: throughput and p50/p99 latency per shape at concurrency 1 vs 2 (requests in flight).

    python benchmarks/bench_triton_concurrency.py                     # small model, k = 1, 8
    python benchmarks/bench_triton_concurrency.py --instances 2       # two model instances
    python benchmarks/bench_triton_concurrency.py --model full --blocks 8 --ks 1,8 --repeats 1

The engine keeps about two requests in flight per GPU; the harness's default is therefore 2.
One server runs; one backend per concurrency sends the same OP 0 packs of a synthetic corpus
(``harness.packers.packing.pack`` over ``synth_corpus`` blocks) through ``call_many``, interleaved repeat
by repeat. Throughput is blocks per second of the whole pass (median over repeats); latency is
each call's own round trip, p50/p99 over every call of every repeat. Outputs are checked to be
the same bits at every concurrency. On a CPU with one model instance a second request in flight
can only overlap transport and Python work with the first one's compute; on a GPU it also
overlaps the copies. A script, not a timed test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a source checkout

from triton_bench_support import TRANSPORT_SPEC, op0_calls, percentile, request_mb, same_bits, server_options  # noqa: E402

from harness.corpus.synth import synth_corpus  # noqa: E402
from lanes.backends.triton.server import TritonServer  # noqa: E402
from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small", help=f"small, full, or 'transport' ({TRANSPORT_SPEC})")
    parser.add_argument("--ks", default="1,8", help="blocks per call, comma-separated")
    parser.add_argument("--concurrency", default="1,2", help="requests in flight to compare, comma-separated")
    parser.add_argument("--blocks", type=int, default=32, help="corpus blocks (a multiple of every k)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--instances", type=int, default=1, help="model instances on the server")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per model instance")
    parser.add_argument("--shm", action="store_true", help="tensors through system shared memory")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    levels = [int(c) for c in args.concurrency.split(",")]
    spec = TRANSPORT_SPEC if args.model == "transport" else args.model

    started = time.perf_counter()
    with TritonServer(server_options(spec, args.threads, args.instances)) as server:
        startup = time.perf_counter() - started
        policy = CallPolicy(timeout_s=900, max_request_bytes=2**31)
        backends = {c: TritonBackend(server.url, concurrency=c, shm=args.shm, policy=policy) for c in levels}
        try:
            corpus = synth_corpus(backends[levels[0]].geometry, blocks=args.blocks)
            blocks = list(corpus.blocks)
            rows = []
            for k in ks:
                calls = op0_calls(blocks, k)
                reference = backends[levels[0]].call_many(calls)  # warm-up, and the bits to compare with
                for c in levels[1:]:
                    assert same_bits(reference, backends[c].call_many(calls)), f"k={k}: concurrency {c} differs"
                walls: dict[int, list[float]] = {c: [] for c in levels}
                lat: dict[int, list[float]] = {c: [] for c in levels}
                for _ in range(args.repeats):
                    for c in levels:
                        start = time.perf_counter()
                        results = backends[c].call_many(calls)
                        walls[c].append(time.perf_counter() - start)
                        lat[c] += [r.wall_s for r in results]
                        assert same_bits(reference, results), f"k={k}: concurrency {c} differs"
                bps = {c: len(blocks) / statistics.median(walls[c]) for c in levels}
                for c in levels:
                    rows.append(
                        f"| {k} | {request_mb(calls):.2f} | {c} | {bps[c]:.2f} | "
                        f"{bps[c] / bps[levels[0]]:.2f} | {1e3 * percentile(lat[c], 50):.1f} | "
                        f"{1e3 * percentile(lat[c], 99):.1f} | {len(lat[c])} |"
                    )
                    print(rows[-1], file=sys.stderr, flush=True)
        finally:
            for backend in backends.values():
                backend.close()
    print(
        f"model {args.model}, {args.blocks} blocks, OP 0, {args.repeats} repeats, server instances "
        f"{args.instances}, transport {'shm' if args.shm else 'http'}, torch threads {args.threads}, "
        f"{os.cpu_count()} CPUs, server start {startup:.1f} s, load average {os.getloadavg()[0]:.2f}; "
        "outputs bitwise identical at every concurrency"
    )
    print(
        f"| k | MiB/request | concurrency | blocks/s | vs concurrency {levels[0]} | p50 call ms | p99 call ms | calls |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
