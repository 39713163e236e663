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
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--blocks", "64", "--json", str(out), "--seg-ms", "0.25"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["model"] == "lanes.models.null_model:full" and data["shapes"] == [1, 2, 4, 8, 16, 32]
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


def test_network_times_come_from_a_runs_largest_shape_or_a_goldens_exact_lane(recorded_golden, backend, tmp_path):
    """--network-from: a GPU run's own call log sets the network time the overhead is measured against."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        from bench_harness_cost import network_times
    finally:
        sys.path.remove(str(BENCH.parent))
    from tests.pipeline import run_shapes

    run = run_shapes(backend, recorded_golden, tmp_path, (2, 4))
    seg, vp, which = network_times(run.path)
    calls = [c for c in run.calls() if c["lane"] == "fast" and c["shape"] == 4]
    assert which == f"run {run.run_id}, shape k=4"
    want = 1e3 * sum(c["wall_s"] for c in calls if c["op"] == 0) / sum(c["windows"] for c in calls if c["op"] == 0)
    assert math.isclose(seg, want) and vp > 0
    seg, vp, which = network_times(recorded_golden.path)
    assert which.endswith("exact lane") and seg > 0 and vp > 0
