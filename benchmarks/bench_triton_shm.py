"""Triton lane: tensors in the HTTP body vs system shared memory (--shm), at k = 1, 8, 32 blocks per call.

    python benchmarks/bench_triton_shm.py                          # transport-only model + small model
    python benchmarks/bench_triton_shm.py --models full --ks 1,8 --blocks 8 --repeats 1

Models: ``transport`` answers zeros at the full model's geometry (a block's request is ~1.7 MB of
audio, as in production) without computing: it shows what the transport costs. ``small`` and
``full`` are the reference networks: the transport difference as a share of a real call.

For each model one server runs; two backends (HTTP, shm) send the same OP 0 packs of a synthetic
corpus, interleaved repeat by repeat (machine drift hits both alike). Throughput is blocks per
second of the whole pass (``call_many`` at ``--concurrency``); the ratio shm / HTTP is from the
same run. Outputs are checked to be the same bits on both transports. A script, not a timed
test: its numbers depend on the machine and on what else runs on it.
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
from lanes.backends.triton import shm  # noqa: E402
from lanes.backends.triton.server import TritonServer  # noqa: E402
from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend  # noqa: E402

SPECS = {"transport": TRANSPORT_SPEC, "small": "small", "full": "full"}


def bench_model(name: str, args: argparse.Namespace, ks: list[int]) -> list[str]:
    rows = []
    started = time.perf_counter()
    with TritonServer(server_options(SPECS[name], args.threads)) as server:
        startup = time.perf_counter() - started
        policy = CallPolicy(timeout_s=900, max_request_bytes=2**31)
        with (
            TritonBackend(server.url, concurrency=args.concurrency, policy=policy) as http,
            TritonBackend(server.url, concurrency=args.concurrency, shm=True, policy=policy) as via_shm,
        ):
            corpus = synth_corpus(http.geometry, blocks=args.blocks)
            blocks = list(corpus.blocks)
            print(
                f"# {name}: server start {startup:.1f} s, geometry window {http.geometry.window_samples} samples",
                file=sys.stderr,
                flush=True,
            )
            for k in ks:
                calls = op0_calls(blocks, k)
                first = {t: b.call_many(calls[:1]) for t, b in (("http", http), ("shm", via_shm))}  # warm-up
                assert same_bits(first["http"], first["shm"]), f"{name} k={k}: transports differ"
                walls: dict[str, list[float]] = {"http": [], "shm": []}
                lat: dict[str, list[float]] = {"http": [], "shm": []}
                for _ in range(args.repeats):
                    for transport, backend in (("http", http), ("shm", via_shm)):
                        start = time.perf_counter()
                        results = backend.call_many(calls)
                        walls[transport].append(time.perf_counter() - start)
                        lat[transport] += [r.wall_s for r in results]
                bps = {t: len(blocks) / statistics.median(w) for t, w in walls.items()}
                rows.append(
                    f"| {name} | {k} | {request_mb(calls):.1f} | {bps['http']:.2f} | {bps['shm']:.2f} | "
                    f"**{bps['shm'] / bps['http']:.2f}** | {1e3 * percentile(lat['http'], 50):.1f} | "
                    f"{1e3 * percentile(lat['shm'], 50):.1f} |"
                )
                print(rows[-1], file=sys.stderr, flush=True)
        assert shm.leftovers(via_shm.shm_prefix or shm.PREFIX) == [], "shared memory left behind"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="transport,small", help=f"comma-separated, of {sorted(SPECS)}")
    parser.add_argument("--ks", default="1,8,32", help="blocks per call, comma-separated")
    parser.add_argument("--blocks", type=int, default=32, help="corpus blocks (a multiple of every k)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight (1 isolates the transport)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in the server's model")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    rows = []
    for name in args.models.split(","):
        rows += bench_model(name.strip(), args, ks)
    print(
        f"{args.blocks} blocks, OP 0, concurrency {args.concurrency}, {args.repeats} repeats (median), "
        f"{os.cpu_count()} CPUs, torch threads {args.threads}, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        "| model | k | MiB/request | HTTP blocks/s | shm blocks/s | shm / HTTP | p50 call HTTP ms | p50 call shm ms |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
