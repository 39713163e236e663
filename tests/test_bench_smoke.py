"""The harness cost benchmark runs (N = 64, full geometry, the null network): a smoke run, no timing asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_harness_cost.py"
STEPS = ["record", "run", "score", "promote", "report"]


def test_the_cost_benchmark_runs_every_step_and_reports_each(tmp_path):
    out = tmp_path / "cost.json"
    proc = subprocess.run([sys.executable, str(BENCH), "--blocks", "64", "--json", str(out), "--seg-ms", "0.25"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["model"] == "lanes.null_model:full" and data["shapes"] == [1, 2, 4, 8, 16, 32]
    assert data["gpu"]["source"] == "assumed" and data["gpu"]["block_ms"] == 8 * (0.25 + 2 * 1.0)
    rows = {r["step"]: r for r in data["rows"]}
    assert list(rows) == STEPS
    for step, r in rows.items():
        assert r["blocks"] == 64 and r["wall_s"] > 0 and r["peak_rss_mb"] > 0, step
        for key in ("harness_ms_per_block", "harness_ms_per_block_lane", "overhead_fraction"):
            assert math.isfinite(r[key]), (step, key)
    assert rows["record"]["lanes"] == 2 and rows["run"]["lanes"] == rows["score"]["lanes"] == 7
    assert rows["record"]["network_s"] > 0 and rows["score"]["network_s"] == 0
    # the null network is batch-invariant: every shape passes, is promoted, and the golden reproduced bitwise
    assert rows["record"]["bitwise"] is True
    assert rows["score"]["verdict"] == "pass" and set(rows["score"]["shapes"].values()) == {"pass"}
    assert rows["promote"]["promoted"] == [2, 4, 8, 16, 32]  # k = 1 is the release's own shape: never recorded
    table = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] == ["64"]]
    assert [cells[1] for cells in table] == STEPS
    assert "GPU network time per block and lane: 18.00 ms (assumed" in proc.stdout
