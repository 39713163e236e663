"""benchmarks/gpu_lease_plan.py (the long part of a lease sized to the time left, from a calibration golden) and
benchmarks/gpu_summary.py's sections that the CPU run of gpu_lease.sh in CI does not reach."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def gpu_lease_plan():
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_lease_plan
    finally:
        sys.path.remove(str(BENCH))
    return gpu_lease_plan


def test_lanes_per_shape_count_the_duplicate_lanes_second_copy_and_the_repeats(gpu_lease_plan):
    # a run's lanes at 3 arrangements and 2 repeats: k, k.a1, k.d (each block twice), k.r2
    assert gpu_lease_plan.units_per_shape(3, 2) == 7  # the neighbour lane (default on): two requests per plain one
    assert gpu_lease_plan.units_per_shape(1, 1) == 3
    assert gpu_lease_plan.units_per_shape(3, 2, neighbours=False) == 5
    assert gpu_lease_plan.units_per_shape(1, 1, neighbours=False) == 1
    assert gpu_lease_plan.units_per_shape(2, 1, neighbours=False) == 2


def test_blocks_are_the_largest_multiple_of_32_that_fits_and_shrink_as_the_device_slows(gpu_lease_plan):
    plans = [gpu_lease_plan.plan(t, 365, 5, 3, 2, 192) for t in (0.01, 0.06, 0.1, 0.2, 0.5)]
    blocks = [p["blocks"] for p in plans]
    assert blocks == sorted(blocks, reverse=True) and blocks[0] > 32 and blocks[-1] == 16
    for p in plans:
        assert p["blocks"] == 16 or p["blocks"] % 32 == 0
        est = p["estimates_s"]
        fits = sum(est.values()) + gpu_lease_plan.SUMMARY_S <= p["left_s"]
        assert fits or p["blocks"] == 16, p["why"]  # only the last resort may overrun (the deadline then cuts)
        assert p["budgets_s"]["release"] == round(est["release"] * 2) and p["budgets_s"]["diff"] == round(
            est["diff"] * gpu_lease_plan.SLACK_OTHER
        )
    # the informative phases give way first: busy, then overlap; cost only in time left over
    assert "cost" in plans[0]["dropped"] and "busy" in plans[-1]["dropped"] and "overlap" in plans[-1]["dropped"]
    assert "cost" not in gpu_lease_plan.plan(0.05, 3000, 5, 3, 2, 192)["dropped"]
    assert gpu_lease_plan.plan(0.05, 3000, 5, 3, 2, 192)["blocks"] == 192


def test_given_blocks_are_kept_and_the_plan_prints_shell_assignments(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    golden = tmp_path / "golden"  # a calibration golden's call log: 2 blocks x 2 replicas x 3 OPs, 0.01 s a call
    golden.mkdir()
    calls = [
        {"lane": "exact", "op": op, "wall_s": 0.01, "replica": rep, "block_ids": [b]}
        for rep in (0, 1)
        for b in ("b0", "b1")
        for op in (0, 1, 2)
    ]
    pq.write_table(pa.Table.from_pylist(calls), golden / "calls.parquet")
    out = tmp_path / "plan.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "gpu_lease_plan.py"),
            str(golden),
            "--left",
            "300",
            "--record-wall",
            "10",
            "--shapes",
            "2,4",
            "--blocks",
            "12",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assigned = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert assigned["BLOCKS"] == "12"
    assert set(assigned) >= {
        "T_RELEASE",
        "T_SPEED",
        "T_DIFF",
        "T_OVERLAP",
        "T_BUSY",
        "T_COST",
        "COPY_BLOCKS_PLAN",
        "BUSY_BLOCKS_PLAN",
        "COST_BLOCKS_PLAN",
    }
    assert int(assigned["T_RELEASE"]) > 0
    plan = json.loads(out.read_text())
    assert plan["t_exact_s"] == pytest.approx(0.03)  # every OP of one block
    assert plan["process_s"] == pytest.approx(10 - 0.12 - 2 * 2 * 0.03)  # the wall less the calls and host work
    assert "12 blocks, as given (BLOCKS)" in proc.stderr and "calibration:" in proc.stderr


@pytest.fixture(scope="module")
def gpu_summary():
    sys.path.insert(0, str(BENCH))
    try:
        import gpu_summary
    finally:
        sys.path.remove(str(BENCH))
    return gpu_summary


def test_the_summary_carries_copy_overlap_phases_plan_and_smoke(gpu_summary, tmp_path):
    """The sections a CPU run of gpu_lease.sh in CI leaves out (the overlap is CUDA's), from files as written."""
    out, smoke = tmp_path / "long", tmp_path / "smoke"
    out.mkdir()
    smoke.mkdir()
    staged = {"h2d_copy_ms": 10.0, "h2d_overlapped_ms": 8.0, "device_busy_ms": 50.0, "wall_ms": 60.0}
    unstaged = {"h2d_copy_ms": 10.0, "h2d_overlapped_ms": 0.0, "device_busy_ms": 48.0, "wall_ms": 70.0}
    (out / "copy_overlap.json").write_text(
        json.dumps(
            {
                "args": {"device": "cuda:0", "model": "full", "blocks": "32", "shape": "8"},
                "rows": {
                    "unstaged": {**unstaged, "digest": "x"},
                    "staged": {**staged, "overlapped_share": 0.8, "digest": "x"},
                },
                "ratios": {k: staged[k] / unstaged[k] for k in staged if unstaged[k]},
                "bitwise_equal": True,
            }
        )
    )
    (out / "phases.tsv").write_text("import\t7\t-\t0\t\nrelease\t100\t200\t0\tlong\nlong\t120\t300\t0\t\n")
    (out / "plan.json").write_text(json.dumps({"blocks": 64, "why": ["64 blocks because"]}))
    (smoke / "release" / "nightly").mkdir(parents=True)
    (smoke / "release" / "nightly" / "score.json").write_text(
        json.dumps({"verdict": "pass", "verification": {"status": "bitwise"}})
    )
    (smoke / "release" / "score_bitwise.json").write_text(json.dumps({"verdict": "fail"}))
    gpu_summary.main(out, smoke)
    text = (out / "summary.md").read_text()
    data = json.loads((out / "summary.json").read_text())
    assert "## copy overlap" in text and "| staged | 10 | 8 | 50 | 60 | 0.8 |" in text
    assert "| long / release | 100 | 200 | 0 |" in text and "| total | 127 | | |" in text  # a part is not added twice
    assert "- 64 blocks because" in text and data["plan"]["blocks"] == 64
    assert "smoke (small model): release pass (bitwise mode fail, golden bitwise)" in text
    assert data["copy_overlap"]["bitwise_equal"] is True and data["smoke"]["profiles"]["release"]["verdict"] == "pass"
    assert "## release: no score" in text  # no nightly in this folder: said, not raised
