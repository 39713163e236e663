"""The README's first command, measured phase by phase: wall, CPU (user, system), peak memory, network share.

    python benchmarks/bench_demo.py OUT_DIR [--model full] [--blocks 4] [--neighbours 2] [--passive]

Runs ``harness demo`` (a fresh process, the embedded default: the full reference networks on 4 synthetic
blocks) with ``HARNESS_PHASES`` set, so every pipeline step reports its wall, user and system CPU and
peak resident memory (``harness.base.phases``), and prints one row per step and the whole job's. The
network's own time is the calls' ``wall_s`` in the golden's and the run's call logs (every lane, the
warm-ups excluded); what is left of the job's wall is the harness's own work (module floors, warm-ups,
localisation, reading, writing, scoring, reports), printed as a share.

``--neighbours N`` starts N CPU-bound processes beside it (a busy CI runner) for the whole run;
``--passive`` sets ``OMP_WAIT_POLICY=PASSIVE`` in the demo's environment itself (the harness sets it
unless the user did: run once with and once without to see the command beside busy neighbours is not
slower than with the variable set). Writes OUT_DIR/bench_demo.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
TOP_STEPS = (
    "corpus",
    "exact lane x2",
    "module floors",
    "packing laws",
    "lanes",
    "write run",
    "live score",
    "score",
    "verify score",
    "commit ledger and manifest",
    "localise",
    "report",
)


def _spin(stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x = (x * 31 + i) % 1_000_003


def network_seconds(out: Path) -> float:
    """Every logged call's wall (golden and run): the network's own time."""
    total = 0.0
    for calls in [*out.glob("goldens/*/calls.parquet"), *out.glob("nightly/runs/*/calls.parquet")]:
        total += float(sum(pq.read_table(calls, columns=["wall_s"]).column("wall_s").to_pylist()))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="full")
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--neighbours", type=int, default=0)
    parser.add_argument("--passive", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    phases = args.out / "phases.jsonl"
    phases.unlink(missing_ok=True)
    demo = args.out / "demo"
    env = {**os.environ, "HARNESS_PHASES": str(phases), "PYTHONUNBUFFERED": "1"}
    if args.passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    stop = multiprocessing.Event()
    neighbours = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True) for _ in range(args.neighbours)]
    for p in neighbours:
        p.start()
    start = time.perf_counter()
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "demo",
        "--out",
        str(demo),
        "--model",
        args.model,
        "--blocks",
        str(args.blocks),
        "--no-progress",
    ]
    pid = os.posix_spawn(sys.executable, cmd, env)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    stop.set()
    for p in neighbours:
        p.join()
    code = os.waitstatus_to_exitcode(status)
    rows = [json.loads(line) for line in phases.read_text().splitlines()] if phases.exists() else []
    network = network_seconds(demo)
    # Each step resets the kernel's high-water mark to measure its own peak, and the figure wait4 reports is the
    # mark since the last reset: the job's peak is the highest of the steps' and wait4's.
    peak_mib = max([usage.ru_maxrss / 1024, *(r["peak_rss_mib"] for r in rows)])
    result = {
        "model": args.model,
        "blocks": args.blocks,
        "neighbours": args.neighbours,
        "passive": args.passive,
        "exit": code,
        "wall_s": wall,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "peak_rss_mib": peak_mib,
        "network_s": network,
        "outside_network_share": max(0.0, wall - network) / wall if wall else None,
        "phases": rows,
    }
    (args.out / "bench_demo.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"harness demo ({args.model}, {args.blocks} blocks, {args.neighbours} busy neighbours"
        f"{', OMP_WAIT_POLICY=PASSIVE given' if args.passive else ''}): exit {code}"
    )
    print(f"{'step':58} {'wall s':>8} {'user s':>8} {'sys s':>8} {'peak MiB':>9}")
    for r in rows:
        if r["step"].split(" > ")[-1] in TOP_STEPS or r["step"].startswith("localise"):
            print(
                f"{r['step'][:58]:58} {r['wall_s']:8.1f} {r['user_s']:8.1f} {r['sys_s']:8.1f} {r['peak_rss_mib']:9.0f}"
            )
    print(f"{'whole job':58} {wall:8.1f} {usage.ru_utime:8.1f} {usage.ru_stime:8.1f} {peak_mib:9.0f}")
    print(
        f"network calls (the calls' own wall, every lane): {network:.1f} s; outside them: {wall - network:.1f} s "
        f"({100 * (wall - network) / wall:.0f} % of the job's wall)"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
