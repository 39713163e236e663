"""Wall time of the nightly in one process and fanned out on Ray (``--ray local``), same corpus, same golden.

    python benchmarks/bench_ray.py --model small --blocks 96 --workers 2 [--shapes 2,4] [--threads 1]

Records one golden (in this process), then runs the CLI twice, as a user would: ``harness nightly``
and ``harness nightly --ray local --set ray.workers=N``; prints both wall times (Ray's start-up and the
workers' model loading included: that is what a job pays) and checks the two merged runs' lane files
are the same bits. Order alternates with ``--repeats`` so drift hits both alike.
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

from golden.runs import load_run
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import ModelSection
from harness.pipeline.record import record_golden
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model


def lane_files(out: Path) -> dict[str, str]:
    run = next(p for p in (out / "runs").iterdir() if not p.name.startswith("."))
    return {n: e.sha256 for n, e in load_run(run).manifest.files.items() if n != "calls.parquet"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small")
    parser.add_argument("--blocks", type=int, default=96)
    parser.add_argument("--shapes", default="2,4")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    numerics = NumericSettings(threads=args.threads)
    cfg = release_config(
        name="bench",
        model=ModelSection(spec=args.model),
        numerics=numerics,
        candidates=tuple(int(k) for k in args.shapes.split(",")),
    )
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    model = load_model(args.model)
    golden, _ = record_golden(
        tmp / "goldens",
        "bench",
        synth_corpus(model.geometry, args.blocks).rows(),
        InProcessBackend(model, numerics),
        cfg,
    )
    base = [
        sys.executable,
        "-m",
        "harness.cli",
        "nightly",
        "--golden",
        str(golden.path),
        "--model",
        args.model,
        "--set",
        f"numerics.threads={args.threads}",
        "--shapes",
        args.shapes,
        "--no-localise",
        "--no-progress",
    ]
    variants = {
        "one process": [],
        f"--ray local, {args.workers} workers": ["--ray", "local", "--set", f"ray.workers={args.workers}"],
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    files: dict[str, dict] = {}
    for r in range(args.repeats):
        for name, extra in list(variants.items()) if r % 2 == 0 else list(reversed(variants.items())):
            out = tmp / f"{len(times[name])}-{name.split()[0].strip('-')}"
            cmd = [
                *base,
                "--out",
                str(out),
                "--set",
                f"nightly.ledger='{out}-ledger.json'",
                "--set",
                f"nightly.manifest='{out}-promoted.json'",
                *extra,
            ]
            start = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True)
            times[name].append(time.perf_counter() - start)
            if done.returncode != 0:
                sys.exit(f"{name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
            files[name] = lane_files(out)
            if extra:
                facts = json.loads((out / "ray.json").read_text())
                print(f"  {name}: {len(facts['shards'])} shards, Ray part {facts['wall_s']:.1f} s", flush=True)
    same = len({json.dumps(f, sort_keys=True) for f in files.values()}) == 1
    print(
        f"model {args.model}, {args.blocks} blocks, shapes {args.shapes}, threads {args.threads}, "
        f"{args.repeats} repeat(s), CPUs {len(os.sched_getaffinity(0))}"
    )
    for name, ts in times.items():
        print(
            f"  {name:>24}: {statistics.median(ts):7.1f} s wall (median of {len(ts)}: "
            f"{', '.join(f'{t:.1f}' for t in ts)})"
        )
    one, fanned = (statistics.median(ts) for ts in times.values())
    print(f"  ratio one-process / ray: {one / fanned:.2f}; lane files bitwise the same: {same}")


if __name__ == "__main__":
    main()
