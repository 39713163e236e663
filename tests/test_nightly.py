"""The nightly job: exit codes with one-line reasons, JUnit read back, shards merged, the GPU script on CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from harness.config import ReleaseConfig
from harness.nightly import EXIT_FAIL, EXIT_PASS, merge, nightly
from harness.numerics import NumericSettings
from harness.shards import Shard
from lanes.backend import InProcessBackend
from lanes.model_api import ModelSpec, load_model

REPO = Path(__file__).resolve().parents[1]


def junit_cases(path) -> list:
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml) if isinstance(xml, JUnitXml) else [xml]
    return [case for suite in suites for case in suite]


def small_config(spec: str = "small", **kw) -> ReleaseConfig:
    return ReleaseConfig(name="night", model=ModelSpec(spec), candidates=(2, 4), **kw)


def test_a_passing_nightly_exits_0_and_promotes(tmp_path, golden_copy, backend):
    outcome = nightly(small_config(), golden_copy, tmp_path / "out", backend, show_progress=False)
    assert outcome.exit_code == EXIT_PASS, outcome.summary
    assert outcome.summary.startswith("PASS") and "k=2,4" in outcome.summary
    cases = {(c.classname, c.name): c for c in junit_cases(outcome.paths["junit"])}
    assert {(f"shape_k{k}", f"op{op}") for k in (2, 4) for op in (0, 1, 2)} | {("golden", "reproduction")} == set(cases)
    assert all(not c.result for c in cases.values())
    assert (outcome.paths["html"]).is_file() and outcome.paths["promoted"].is_file()
    assert (tmp_path / "out" / "summary.txt").read_text().strip() == outcome.summary


def test_a_failing_shape_makes_the_nightly_exit_non_zero_with_its_reason(tmp_path, small_corpus):
    from golden.store import record_golden
    from lanes.runner import RunPlan

    leaky = InProcessBackend(load_model("lanes.controls:leaky"), NumericSettings())
    golden, _ = record_golden(tmp_path / "g", "night", small_corpus, leaky, RunPlan(), {})
    # promote first with an innocent shape list, then fail: the revocation lands in the ledger
    outcome = nightly(small_config("lanes.controls:leaky"), golden.path, tmp_path / "out", leaky,
                      show_progress=False)
    assert outcome.exit_code == EXIT_FAIL
    assert outcome.summary.startswith("FAIL") and "OP 0 max_abs" in outcome.summary and "\n" not in outcome.summary
    failed = {(c.classname, c.name) for c in junit_cases(outcome.paths["junit"])
              if any(isinstance(r, Failure | Error) for r in c.result)}
    assert ("shape_k2", "op0") in failed and ("golden", "reproduction") not in failed
    loc = outcome.score["shapes"]["2"]["localisation"]["0"]
    assert loc["first_diverging_layer"].startswith("segmentation <input")


def test_cli_exit_status_and_reason(tmp_path, golden_copy):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "harness.cli", "nightly", "--golden", str(golden_copy), "--out", str(tmp_path / "o"),
           "--model", "small", "--shapes", "2", "--no-progress"]
    ok = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1].startswith("PASS")
    # the same golden judged bitwise with oneDNN off: the exact lane no longer reproduces it
    bad = subprocess.run([*cmd, "--no-mkldnn"], capture_output=True, text=True, env=env, timeout=600)
    assert bad.returncode == 1, bad.stderr
    assert bad.stdout.strip().splitlines()[-1].startswith("FAIL") and "golden" in bad.stdout.strip().splitlines()[-1]


def test_shards_partition_the_corpus_and_merge_into_one_verdict(tmp_path, golden_copy, backend, small_corpus):
    ids = small_corpus.ids
    parts = [set(Shard(i, 3).select(ids)) for i in (1, 2, 3)]
    assert set().union(*parts) == set(range(len(ids))) and sum(map(len, parts)) == len(ids)
    assert Shard(2, 3).select(ids) == Shard(2, 3).select(list(ids))  # deterministic
    cfg = small_config()
    dirs = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        outcome = nightly(cfg, golden_copy, out, backend, shard=Shard(i, 2), show_progress=False)
        assert outcome.exit_code == EXIT_PASS and f"shard {i}/2" in outcome.summary
        dirs.append(out)
    with pytest.raises(Exception, match="shards do not cover the corpus"):
        merge(cfg, golden_copy, dirs[:1], tmp_path / "m1")
    merged = merge(cfg, golden_copy, dirs, tmp_path / "merged")
    assert merged.exit_code == EXIT_PASS
    assert merged.score["corpus"]["blocks"] == len(ids)
    assert sorted(merged.score["shapes"]) == ["2", "4"]
    assert len(junit_cases(merged.paths["junit"])) == 7


def test_gpu_nightly_script_runs_end_to_end_on_cpu(tmp_path):
    """benchmarks/gpu_nightly.sh: the GPU CI job's one command, run here on the CPU (small model)."""
    if shutil.which("bash") is None:
        pytest.fail("bash is needed to run benchmarks/gpu_nightly.sh")
    env = {**os.environ, "PYTHON": sys.executable, "BLOCKS": "12", "SHAPES": "2", "DEVICE": "cpu"}
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_nightly.sh"), str(tmp_path / "gn")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp_path / "gn" / "summary.md").read_text()
    assert "## release: PASS" in summary and "## speed:" in summary
    assert "equals a CPU build of the same seed: True" in summary
    for profile in ("release", "speed"):
        assert (tmp_path / "gn" / profile / "nightly" / "report" / "report.html").is_file()
        assert (tmp_path / "gn" / profile / "nightly" / "junit.xml").is_file()
    assert not any(isinstance(r, Skipped) for c in junit_cases(tmp_path / "gn" / "release" / "nightly" / "junit.xml")
                   for r in c.result)
