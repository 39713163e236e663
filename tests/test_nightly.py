"""The nightly job: exit codes with one-line reasons, JUnit read back, the revocation landing in the ledger,
a failing shape ending revoked even when localisation cannot run, shards merged (and refused when they
cannot be one run), the GPU script on CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from harness.base.errors import EXIT_FAIL, EXIT_PASS, GoldenError
from harness.corpus.shards import Shard
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, ModelSection, NightlySection
from harness.data.tolerances import SegmentationTolerance, Tolerances
from harness.ledger.ledger_store import read_consistent
from harness.pipeline.nightly import merge, nightly
from harness.pipeline.nightly_job import NightlyJob
from harness.pipeline.record import record_golden
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model

REPO = Path(__file__).resolve().parents[1]


def junit_cases(path) -> list:
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml) if isinstance(xml, JUnitXml) else [xml]
    return [case for suite in suites for case in suite]


def small_config(spec: str = "small", **kw) -> ConfigFile:
    # one arrangement (CI time): these tests are about the nightly's flow, exits, shards and ledger; the
    # arrangements' own evidence is tested in tests/test_arrangement_score.py and tests/test_arrangements.py
    kw.setdefault("evidence", EvidenceSection(arrangements=1, neighbours=False, canaries=False))
    return release_config(name="night", model=ModelSection(spec=spec), candidates=(2, 4), **kw)


def night(config: ConfigFile, golden: Path, out: Path, shard: Shard | None = None, **switches) -> NightlyJob:
    """The nightly job of ``config`` without progress; ``shard``: its [nightly] shard."""
    if shard is not None:
        config = config.with_overrides(nightly=NightlySection(shard=str(shard)))
    return NightlyJob(config, golden, out, progress=False, **switches)


def promoted(manifest: Path, k: int) -> bool:
    m = json.loads(manifest.read_text())
    return any(
        k in ks
        for model in m["models"].values()
        for d in model["devices"].values()
        for p in d["profiles"].values()
        for pk in p["packers"].values()
        for ks in pk["ops"].values()
    )


def test_a_passing_nightly_exits_0_and_promotes(tmp_path, golden_copy, backend):
    outcome = nightly(night(small_config(), golden_copy, tmp_path / "out"), backend)
    assert outcome.exit_code == EXIT_PASS, outcome.summary
    last = outcome.summary.splitlines()[-1]  # after any warning line (the small networks drift from the golden)
    assert last.startswith("PASS") and "k=2,4" in last
    cases = {(c.classname, c.name): c for c in junit_cases(outcome.paths["junit"])}
    assert {(f"shape_k{k}", f"op{op}") for k in (2, 4) for op in (0, 1, 2)} | {("golden", "reproduction")} == set(cases)
    assert all(not c.result for c in cases.values())
    assert outcome.paths["html"].is_file() and promoted(outcome.paths["promoted"], 2)
    assert (tmp_path / "out" / "summary.txt").read_text().strip() == outcome.summary


def test_promote_then_fail_lands_the_revocation_in_the_ledger(tmp_path, small_corpus):
    """The same golden, first judged with a tolerance its packed shapes meet, then with the defaults they
    fail (the leak control): the second nightly revokes, naming its run, and the engine's manifest drops it."""
    leaky = InProcessBackend(load_model("lanes.controls:leaky"), NumericSettings())
    cfg = small_config("lanes.controls:leaky")
    golden, _ = record_golden(tmp_path / "g", "night", small_corpus.rows(), leaky, cfg)
    lenient = Tolerances(
        op0=SegmentationTolerance(max_abs=1e9, max_confident_flips=10**9, max_flip_rate=1.0),
        op1=Tolerances().op1.model_copy(
            update={"min_cosine": -1.0, "max_abs": 1e9, "max_rel_l2": 1e9, "max_failed_row_rate": 1.0}
        ),
        op2=Tolerances().op2.model_copy(
            update={"min_cosine": -1.0, "max_abs": 1e9, "max_rel_l2": 1e9, "max_failed_row_rate": 1.0}
        ),
    )
    # one arrangement: the leak reads its neighbours' audio, which other arrangements refuse whatever the tolerances
    first = nightly(
        night(
            cfg.with_overrides(
                tolerances=lenient, evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False)
            ),
            golden.path,
            tmp_path / "first",
            localise=False,
        ),
        leaky,
    )
    assert first.exit_code == EXIT_PASS, first.summary
    manifest = first.paths["promoted"]
    assert promoted(manifest, 2) and promoted(manifest, 4)
    second = nightly(night(cfg, golden.path, tmp_path / "second"), leaky)
    assert second.exit_code == EXIT_FAIL
    # localised before the ledger commit: the leak's windows differ before any layer runs, so the cause is not
    # numerics (and the report's localisation, the summary and the ledger say the same)
    assert second.summary.startswith("FAIL") and "\n" not in second.summary
    assert "the network's input already differs packed vs alone" in second.summary, second.summary
    assert {s.cause.kind for s in second.score.shapes.values() if s.cause} == {
        "depends on slot / neighbours / duplicates"
    }
    ledger, m = read_consistent(second.paths["ledger"], manifest)
    run_id = second.score.run.id
    for entry in ledger.entries.values():
        assert entry.state == "revoked" and entry.revoked_by == run_id
        assert [e.state for e in entry.history] == ["promoted", "revoked"]
    assert not promoted(manifest, 2) and not promoted(manifest, 4)
    failed = {
        (c.classname, c.name)
        for c in junit_cases(second.paths["junit"])
        if any(isinstance(r, Failure | Error) for r in c.result)
    }
    assert ("shape_k2", "op0") in failed and ("golden", "reproduction") not in failed
    loc = json.loads((tmp_path / "second" / "localisation.json").read_text())["shapes"]["2"]["0"]
    assert loc["first_diverging_layer"].startswith("segmentation <input")
    facts = json.loads((tmp_path / "second" / "report" / "report.json").read_text())
    assert facts["shapes"]["2"]["ledger_state"] == "revoked" and facts["shapes"]["2"]["revoked_by"] == run_id


def test_a_failing_shape_of_a_torchscript_model_ends_revoked_although_localisation_cannot_hook_it(tmp_path):
    """Localisation needs forward hooks, which ScriptModules refuse: the verdict, ledger, manifest and report
    must be written anyway, and the report must say why there is no first diverging layer."""
    from examples.byo_torchscript import build
    from harness.corpus.synth import synth_corpus

    spec = build(str(tmp_path / "drift.pt"), drift=1e-3)  # every output moves with the call's size
    model = load_model(spec)
    be = InProcessBackend(model, NumericSettings())
    loose = Tolerances(
        op0=SegmentationTolerance(max_abs=1.0, max_flip_rate=1.0, max_confident_flips=10**9),
        op1=Tolerances().op1.model_copy(
            update={"min_cosine": -1.0, "max_abs": 1.0, "max_rel_l2": 1e9, "max_failed_row_rate": 1.0}
        ),
        op2=Tolerances().op2.model_copy(
            update={"min_cosine": -1.0, "max_abs": 1.0, "max_rel_l2": 1e9, "max_failed_row_rate": 1.0}
        ),
    )
    cfg = small_config(spec)
    golden, _ = record_golden(tmp_path / "g", "ts", synth_corpus(model.geometry, 6).rows(), be, cfg)
    first = nightly(night(cfg.with_overrides(tolerances=loose), golden.path, tmp_path / "first"), be)
    assert first.exit_code == EXIT_PASS and promoted(first.paths["promoted"], 2)
    second = nightly(night(cfg, golden.path, tmp_path / "second"), be)
    assert second.exit_code == EXIT_FAIL
    assert not promoted(first.paths["promoted"], 2)
    loc = json.loads((tmp_path / "second" / "localisation.json").read_text())["shapes"]["2"]["0"]
    assert loc["available"] is False and "not supported on ScriptModules" in loc["reason"]
    page = (tmp_path / "second" / "report" / "report.html").read_text()
    assert "not supported on ScriptModules" in page and second.paths["junit"].is_file()


def test_cli_exit_status_and_reason(tmp_path, golden_copy):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "nightly",
        "--golden",
        str(golden_copy),
        "--out",
        str(tmp_path / "o"),
        "--model",
        "small",
        "--shapes",
        "2",
        "--arrangements",
        "1",
        "--no-progress",
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1].startswith("PASS")
    # the same golden with oneDNN off: the exact lane no longer reproduces it, and the golden is the headline
    bad = subprocess.run(
        [*cmd, "--set", "numerics.mkldnn=false", "--out", str(tmp_path / "o2")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert bad.returncode == 1, bad.stderr
    last = bad.stdout.strip().splitlines()[-1]
    assert last.startswith("FAIL: golden") and "numerics.mkldnn: True -> False" in last


def test_shards_partition_the_corpus_and_merge_into_one_verdict(tmp_path, golden_copy, backend, small_corpus):
    ids = small_corpus.ids
    parts = [set(Shard(i, 3).select(ids)) for i in (1, 2, 3)]
    assert set().union(*parts) == set(range(len(ids))) and sum(map(len, parts)) == len(ids)
    assert Shard(2, 3).select(ids) == Shard(2, 3).select(list(ids))  # deterministic
    cfg = small_config()
    dirs = []
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        outcome = nightly(night(cfg, golden_copy, out, Shard(i, 2)), backend)
        assert outcome.exit_code == EXIT_PASS and f"shard {i}/2" in outcome.summary
        dirs.append(out)
    with pytest.raises(Exception, match="shards do not cover the corpus"):
        merge(cfg, golden_copy, dirs[:1], tmp_path / "m1")
    merged = merge(cfg, golden_copy, dirs, tmp_path / "merged")
    assert merged.exit_code == EXIT_PASS
    assert merged.score.corpus.blocks == len(ids)
    assert sorted(merged.score.shapes) == ["2", "4"]
    assert len(junit_cases(merged.paths["junit"])) == 7
    # the merged run holds the blocks in the golden's order
    from golden.runs import load_run

    assert load_run(merged.paths["run"]).block_ids() == ids


def test_shards_of_different_numerics_are_not_merged(tmp_path, golden_copy, small_model):
    cfg = small_config()
    one = InProcessBackend(small_model, NumericSettings(threads=1))
    two = InProcessBackend(small_model, NumericSettings(threads=2))
    nightly(night(cfg, golden_copy, tmp_path / "s1", Shard(1, 2)), one)
    nightly(night(cfg, golden_copy, tmp_path / "s2", Shard(2, 2)), two)
    with pytest.raises(GoldenError, match=r"numerics_profile differs|numerics.threads differs"):
        merge(cfg, golden_copy, [tmp_path / "s1", tmp_path / "s2"], tmp_path / "m")
    assert not (tmp_path / "m" / "score.json").exists()


def test_gpu_lease_script_runs_end_to_end_on_cpu(tmp_path):
    """benchmarks/gpu_lease.sh: the GPU job's one command (import check, calibration, plan, then
    benchmarks/gpu_nightly.sh), run here on the CPU with the small model; at most 8 files come back."""
    if shutil.which("bash") is None or shutil.which("timeout") is None:
        pytest.fail("bash and timeout are needed to run benchmarks/gpu_lease.sh")
    out, work = tmp_path / "out", tmp_path / "work"
    # CI time: no smoke (on the CPU it is the long part's own job again: the small model), 8 blocks of k = 2
    # with 3 arrangements and 2 repeats (the evidence columns), no copy-overlap, busy or cost benchmark (each a
    # process or more; their summary sections: tests/test_gpu_lease_plan.py); a long lease, so that a slow
    # machine cuts nothing (the budgets are the plan's, x2)
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "DEVICE": "cpu",
        "SMOKE": "0",
        "CAL_BLOCKS": "1",
        "BLOCKS": "8",
        "SHAPES": "2",
        "ARRANGEMENTS": "3",
        "REPEATS": "2",
        "COPY_OVERLAP": "0",
        "BUSY_BLOCKS": "",
        "COST_BLOCKS": "",
        "LEASE_S": "3000",
        "WORK": str(work),
    }
    proc = subprocess.run(
        ["bash", str(REPO / "benchmarks" / "gpu_lease.sh"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # what comes back from a lease: at most 8 files, directly in OUT
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu_lease.log",
        "report_release.html",
        "score_release.json",
        "score_speed.json",
        "summary.json",
        "summary.md",
    ]
    assert "gpu_import_check: ok" in (out / "gpu_lease.log").read_text()
    summary = (out / "summary.md").read_text()
    assert "## release: PASS" in summary and "## speed:" in summary
    assert "equals a CPU build of the same seed: True" in summary
    assert "## `harness golden diff`" in summary
    data = json.loads((out / "summary.json").read_text())
    phases = [(p["part_of"], p["phase"]) for p in data["phases"]]
    assert phases == [
        (None, "wheels"),
        (None, "import"),
        (None, "device"),
        (None, "calibrate"),
        (None, "plan"),
        ("long", "release"),
        ("long", "speed"),
        ("long", "diff"),
        (None, "long"),
    ]
    assert all(p["exit"] == "0" for p in data["phases"]), data["phases"]
    assert data["plan"]["blocks"] == 8 and data["plan"]["t_exact_s"] > 0
    release = data["profiles"]["release"]
    assert release["golden_record_reproduction"]["bitwise"] is True and release["golden_reproduction_bitwise"] is True
    assert release["numerics"]["deterministic_algorithms"] is True and "compute_capability" in release["numerics"]
    assert (
        release["host"]["host_ms_per_block_lane"] > 0 and release["host"]["lane_units_per_block"] == 8
    )  # the neighbour lane: two requests per plain one
    rows = {(r["shape"], r["op"]): r for r in release["rows"]}
    assert sorted(rows) == [(2, 0), (2, 1), (2, 2)]
    for r in rows.values():
        assert r["verdict"] == "pass" and r["verdict_bitwise"] in ("pass", "fail")
        assert r["verdict_bitwise"] == ("pass" if r["bitwise"] else "fail")
        assert r["arrangements_passed"] is True and r["repeats_reproducible"] is True
        assert r["duplicates_passed"] is True and r["speedup"] is not None
    assert rows[(2, 1)]["rows_matched"] == rows[(2, 1)]["rows_golden"] > 0
    assert data["golden_diff"]["status"] in ("bitwise", "within-tolerance")
    # the work folder (kept: WORK was given) holds both profiles' reports and JUnit files
    for profile in ("release", "speed"):
        assert (work / "long" / profile / "nightly" / "report" / "report.html").is_file()
        assert (work / "long" / profile / "nightly" / "junit.xml").is_file()
    assert not any(
        isinstance(r, Skipped)
        for c in junit_cases(work / "long" / "release" / "nightly" / "junit.xml")
        for r in c.result
    )


def test_a_nightly_is_one_frozen_job_built_from_the_configuration(tmp_path):
    """The nightly's options travel as one NightlyJob (the validated configuration + paths), not 27
    parameters through four hops; its shard, ledger, manifest and backend are the configuration's keys."""
    import dataclasses

    from harness.base.errors import HarnessError
    from harness.pipeline.commands import job as job_commands
    from harness.pipeline.nightly_job import NightlyJob
    from harness.release_config import load_config, parse_set

    cfg = load_config(
        None,
        [
            parse_set("nightly.ledger='l.json'"),
            parse_set("nightly.shard='1/2'"),
            parse_set("backend.url='http://h:8000'"),
            parse_set("backend.concurrency=3"),
        ],
    )
    job = NightlyJob(cfg, tmp_path / "g", tmp_path / "out")
    assert job.ledger == Path("l.json") and job.manifest is None and job.shard == "1/2" and job.ray is None
    assert (job.backend.url, job.backend.concurrency) == ("http://h:8000", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.force = True  # type: ignore[misc]
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "score.json").write_text('{"created": "yesterday"}')
    with pytest.raises(HarnessError, match="already holds a nightly's output .*pass --force"):
        job_commands.nightly(job)  # refused before any work: no golden, no backend was needed
    with pytest.raises(HarnessError, match="shard '5/4'"):  # the configuration's one rule, before any job exists
        load_config(None, [parse_set("nightly.shard='5/4'")])
