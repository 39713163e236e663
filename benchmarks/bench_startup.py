"""Start-up cost of the commands a person types most: --help, shapes, ledger, promote, report.

    python benchmarks/bench_startup.py [--repeats 5]

Each command runs in a fresh interpreter (as a user runs it), on a tiny promoted setup made first
(small model, 6 blocks); the median wall time of ``--repeats`` runs is printed, with whether torch
was imported (it must not be, for these commands: only a running model needs it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness.cli", *args], cwd=cwd, capture_output=True, text=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cwd = Path(d)
        (cwd / "h.toml").write_text(
            "[model]\nspec = 'small'\n[numerics]\nthreads = 1\n[tolerances.op0]\n"
            "max_flip_rate = 0.01\n[tolerances.op1]\nmax_failed_row_rate = 0.5\n"
            "[tolerances.op2]\nmax_failed_row_rate = 0.5\n"
        )
        for step in (
            ["corpus", "synth", "c.parquet", "--blocks", "6", "--config", "h.toml"],
            ["golden", "record", "--corpus", "c.parquet", "--config", "h.toml", "--release", "r", "--no-progress"],
            ["run", "--golden", "goldens/r", "--shapes", "2", "--config", "h.toml", "--no-progress"],
        ):
            assert harness(*step, cwd=cwd).returncode == 0, step
        run = next((cwd / "runs").iterdir())
        assert harness(
            "score", "--golden", "goldens/r", "--run", str(run), "--config", "h.toml", cwd=cwd
        ).returncode in (0, 1)
        commands = {
            "--help": ["--help"],
            "promote": ["promote", "--score", "score.json", "--config", "h.toml"],
            "shapes": ["shapes", "--ledger", "l0.json", "--manifest", "m0.json"],
            "ledger": ["ledger", "--ledger", "l0.json"],
            "report": ["report", "--score", "score.json", "--ledger", "l0.json", "--out", "report"],
        }
        print(
            f"{'command':>10} {'median s':>9} {'torch imported':>15}   ({args.repeats} runs, load "
            f"{os.getloadavg()[0]:.2f})"
        )
        for name, argv in commands.items():
            times, torch = [], False
            for i in range(args.repeats):
                if name == "promote":  # a score is applied once: each run promotes into a fresh ledger
                    argv = [*commands["promote"], "--ledger", f"l{i}.json", "--manifest", f"m{i}.json"]
                start = time.perf_counter()
                done = harness(*argv, cwd=cwd)
                times.append(time.perf_counter() - start)
                assert done.returncode == 0, done.stderr[-2000:]
                torch = torch or any(line.rstrip().endswith("| torch") for line in done.stderr.splitlines())
            print(f"{name:>10} {statistics.median(times):>9.2f} {'yes' if torch else 'no':>15}")


if __name__ == "__main__":
    main()
