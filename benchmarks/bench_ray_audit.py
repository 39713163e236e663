"""Wall time of ``harness audit`` in one process and with ``--ray local``, same capture, same golden model.

    python benchmarks/bench_ray_audit.py --model small --blocks 96 --workers 2 [--threads 1] [--repeats 2]

Captures ``--blocks`` synthetic blocks served by the model (the simulated engine, 4 blocks a request,
every OP), then runs the CLI as a user would: ``harness audit`` and ``harness audit --ray local
--set ray.workers=N``; prints both wall times (Ray's start-up and the workers' model loading included:
that is what a job pays) and checks the two audit files agree but for their time of making. Order
alternates with ``--repeats`` so drift hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.pipeline.capture import serve_and_capture
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model


def audit_content(out: Path) -> str:
    result = json.loads((out / "audit.json").read_text())
    return json.dumps({k: v for k, v in result.items() if k not in ("created", "digest")}, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small")
    parser.add_argument("--blocks", type=int, default=96)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-audit-"))
    backend = InProcessBackend(load_model(args.model), NumericSettings(threads=args.threads))
    capture = tmp / "capture.parquet"
    requests = serve_and_capture(capture, synth_corpus(backend.geometry, args.blocks).blocks, backend, 4)
    base = [
        sys.executable,
        "-m",
        "harness.cli",
        "audit",
        str(capture),
        "--golden-model",
        args.model,
        "--set",
        f"numerics.threads={args.threads}",
        "--no-progress",
    ]
    variants = {
        "one process": [],
        f"--ray local, {args.workers} workers": ["--ray", "local", "--set", f"ray.workers={args.workers}"],
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    contents: set[str] = set()
    for r in range(args.repeats):
        for name, extra in list(variants.items()) if r % 2 == 0 else list(reversed(variants.items())):
            out = tmp / f"{len(times[name])}-{name.split()[0].strip('-')}"
            start = time.perf_counter()
            done = subprocess.run([*base, "--out", str(out), *extra], capture_output=True, text=True)
            times[name].append(time.perf_counter() - start)
            if done.returncode != 0:
                sys.exit(f"{name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            contents.add(audit_content(out))
            if extra:
                facts = json.loads((out / "ray.json").read_text())
                print(f"  {name}: {len(facts['shards'])} shards, Ray part {facts['wall_s']:.1f} s", flush=True)
    print(
        f"model {args.model}, {args.blocks} blocks ({requests} requests, every OP), threads {args.threads}, "
        f"{args.repeats} repeat(s), CPUs {len(os.sched_getaffinity(0))}, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    for name, ts in times.items():
        print(
            f"  {name:>24}: {statistics.median(ts):7.1f} s wall (median of {len(ts)}: "
            f"{', '.join(f'{t:.1f}' for t in ts)})"
        )
    one, fanned = (statistics.median(ts) for ts in times.values())
    print(f"  ratio one-process / ray: {one / fanned:.2f}; audit.json the same but for its time: {len(contents) == 1}")


if __name__ == "__main__":
    main()
