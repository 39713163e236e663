"""``--ray``: the nightly and the golden recording fanned out on a local Ray cluster (2 CPU workers).

Bitwise the one-process job (every lane file's sha256, every verdict), a worker SIGKILLed mid-shard
retried by Ray with the same bits (and, with no retries left, the job failing in one line), a shard
with bad input failing the job once with its line, and the line that says how to install Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from golden.runs import load_run
from golden.store import load_golden
from harness.base.errors import EXIT_PASS, GoldenError, HarnessError, step
from harness.cli.app import ray_options
from harness.corpus.shards import block_ranges
from harness.data.numeric_settings import NumericSettings
from harness.data.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, ModelSection, NightlySection
from harness.judging.reproduction import floor_scorer, merge_noise_floors, noise_floor
from harness.pipeline.commands import golden as golden_commands
from harness.pipeline.commands import job as job_commands
from harness.pipeline.distributed import RAY_INSTALL, RayOptions
from harness.pipeline.golden_merge import merge_goldens
from harness.pipeline.nightly import nightly
from harness.pipeline.nightly_job import NightlyJob
from harness.pipeline.ray_jobs import RecordTarget, nightly_ray, record_ray
from harness.pipeline.record import record_golden
from harness.pipeline.shard_worker import WorkerSpec, check_shared, describe_bug
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend

# The 'ray' extra: without it (pip install -e '.[test]'), this module skips whole, saying why.
ray = pytest.importorskip("ray", reason="the --ray tests need the 'ray' extra (pip install -e '.[ray]')")

REPO = Path(__file__).resolve().parents[1]
NUMERICS = NumericSettings(threads=1)  # two workers on two cores: no spin-waiting threads
# one arrangement (CI time): the subject is Ray's fan-out, bitwise the one-process nightly's
CONFIG = release_config(
    name="ray-rel",
    model=ModelSection(spec="small"),
    candidates=(2, 4),
    numerics=NumericSettings(threads=1),
    evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False),
)


def night(
    config: ConfigFile,
    golden: Path,
    out: Path,
    ray: RayOptions | None = None,
    ledger: Path | None = None,
    manifest: Path | None = None,
) -> NightlyJob:
    """A nightly job (no localisation, no progress) writing its ledger and manifest where given ([nightly])."""
    paths = NightlySection(
        ledger=None if ledger is None else str(ledger), manifest=None if manifest is None else str(manifest)
    )
    return NightlyJob(config.with_overrides(nightly=paths), golden, out, ray, localise=False, progress=False)


def lane_files(run_path: Path) -> dict[str, str]:
    """sha256 of every lane file of a run (the call log holds timings: it differs by nature)."""
    manifest = load_run(run_path).manifest
    return {name: entry.sha256 for name, entry in manifest.files.items() if name != "calls.parquet"}


def verdicts(score_path: Path) -> dict:
    score = json.loads(Path(score_path).read_text())
    return {
        "verdict": score["verdict"],
        "shapes": score["shapes"],
        "verification": score["verification"],
        "corpus": score["corpus"],
    }


@pytest.fixture(scope="module")
def golden(tmp_path_factory, small_model, small_corpus) -> Path:
    root = tmp_path_factory.mktemp("ray-goldens")
    gold, _ = record_golden(root, "ray-rel", small_corpus.rows(), InProcessBackend(small_model, NUMERICS), CONFIG)
    return gold.path


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, golden, small_model) -> dict:
    """The plain one-process nightly over the same golden: what every Ray run must equal bit for bit."""
    out = tmp_path_factory.mktemp("one-process")
    outcome = nightly(
        night(CONFIG, golden, out, ledger=out / "l.json", manifest=out / "p.json"),
        InProcessBackend(small_model, NUMERICS),
    )
    assert outcome.exit_code == EXIT_PASS, outcome.summary
    return {"files": lane_files(outcome.paths["run"]), "verdicts": verdicts(outcome.paths["score"])}


def test_cli_ray_local_with_two_workers_is_bitwise_the_one_process_nightly(tmp_path, golden, baseline):
    """`harness nightly --ray local --set ray.workers=2` (its own local Ray instance) against the plain nightly."""
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "nightly",
        "--golden",
        str(golden),
        "--model",
        "small",
        "--set",
        "numerics.threads=1",
        "--shapes",
        "2,4",
        "--arrangements",
        "1",
        "--set",
        "evidence.neighbours=false",
        "--set",
        "evidence.canaries=false",
        "--no-localise",
    ]
    env = {**os.environ, "HARNESS_PROGRESS_SECONDS": "3600"}

    def paths(ledger: Path, manifest: Path) -> list[str]:
        return ["--set", f"nightly.ledger='{ledger}'", "--set", f"nightly.manifest='{manifest}'"]

    one = subprocess.run(
        [*cmd, "--out", str(tmp_path / "one"), *paths(tmp_path / "l1.json", tmp_path / "p1.json"), "--no-progress"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert one.returncode == 0, one.stderr
    out = tmp_path / "ray"
    on_ray = subprocess.run(
        [
            *cmd,
            "--out",
            str(out),
            *paths(tmp_path / "l2.json", tmp_path / "p2.json"),
            "--ray",
            "local",
            "--set",
            "ray.workers=2",
            "--set",
            "ray.shards=3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert on_ray.returncode == 0, on_ray.stderr
    assert on_ray.stdout.strip().splitlines()[-1] == one.stdout.strip().splitlines()[-1]
    assert "nightly on Ray: 3 shards, 2 workers: 3 shards, done" in on_ray.stderr  # progress: shards done / total
    facts = json.loads((out / "ray.json").read_text())
    assert facts["workers"] == 2 and [s["shard"] for s in facts["shards"]] == ["1/3", "2/3", "3/3"]
    assert sum(s["blocks"] for s in facts["shards"]) == 12
    assert all(len(s["attempts"]) == 1 for s in facts["shards"])
    assert len({s["pid"] for s in facts["shards"]}) == 2  # both workers took shards
    merged = Path(facts["run"])
    assert load_run(merged).manifest.merged_from and not (out / "shards").exists()
    one_run = next((tmp_path / "one" / "runs").iterdir())
    assert lane_files(merged) == lane_files(one_run) == baseline["files"]
    assert verdicts(out / "score.json") == verdicts(tmp_path / "one" / "score.json") == baseline["verdicts"]
    assert (out / "junit.xml").is_file() and (out / "report" / "report.html").is_file()


@contextlib.contextmanager
def local_cluster(hold: Path) -> Iterator[Path]:
    """A local Ray cluster of 2 CPU workers, started by the test; its workers import this repository's
    tests package and see the hold folder of tests/ray_hold.py."""
    saved = {k: os.environ.get(k) for k in ("HARNESS_TEST_HOLD", "PYTHONPATH")}
    os.environ["HARNESS_TEST_HOLD"] = str(hold)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), saved["PYTHONPATH"]) if p)
    # address="local": always a new instance, never a cluster some earlier (killed) process left running
    # and named in /tmp/ray/ray_current_cluster, which a bare ray.init() would join
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield hold
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(tmp_path_factory.mktemp("hold")) as hold:
        yield hold


def kill_the_held_worker(hold: Path, killed: list[int], timeout: float = 300.0) -> threading.Thread:
    """Arm the hold; SIGKILL the worker that takes it, mid-shard (inside its packer)."""
    (hold / "armed").write_text("")

    def watch() -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            held = list(hold.glob("held-*"))
            if held:
                pid = int(held[0].name.split("-")[1])
                held[0].unlink()
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_worker_killed_mid_shard_is_retried_and_the_result_is_bitwise_the_same(tmp_path, cluster, golden, baseline):
    killed: list[int] = []
    watcher = kill_the_held_worker(cluster, killed)
    out = tmp_path / "out"
    outcome = nightly_ray(
        night(
            CONFIG,
            golden,
            out,
            RayOptions("local", workers=2, shards=3, retries=2),
            tmp_path / "l.json",
            tmp_path / "p.json",
        ),
        WorkerSpec(CONFIG, packer="tests.ray_hold:pack"),
    )
    watcher.join(timeout=5)
    assert len(killed) == 1, "no worker took the hold"
    assert outcome.exit_code == EXIT_PASS, outcome.summary
    facts = json.loads(outcome.paths["ray"].read_text())
    retried = [s for s in facts["shards"] if len(s["attempts"]) > 1]
    # started by the killed worker (attempt files sort by pid, and pids wrap: not necessarily the first)...
    assert len(retried) == 1 and killed[0] in [a["pid"] for a in retried[0]["attempts"]]
    assert retried[0]["pid"] != killed[0]  # ...and finished by the one Ray restarted
    assert all(len(s["attempts"]) == 1 for s in facts["shards"] if s is not retried[0])
    assert lane_files(outcome.paths["run"]) == baseline["files"]
    assert verdicts(outcome.paths["score"]) == baseline["verdicts"]


def test_a_worker_killed_with_no_retries_left_fails_the_job_in_one_line(tmp_path, cluster, golden):
    """The control of the test above: without Ray's restart the same kill is a failed job, not a result."""
    killed: list[int] = []
    watcher = kill_the_held_worker(cluster, killed)
    with pytest.raises(HarnessError) as failure:
        nightly_ray(
            night(
                CONFIG,
                golden,
                tmp_path / "out",
                RayOptions("local", workers=2, shards=3, retries=0),
                tmp_path / "l.json",
                tmp_path / "p.json",
            ),
            WorkerSpec(CONFIG, packer="tests.ray_hold:pack"),
        )
    watcher.join(timeout=5)
    assert len(killed) == 1
    message = str(failure.value)
    assert "\n" not in message and "its Ray worker died and was not brought back after 0 restart(s)" in message
    assert not (tmp_path / "out" / "runs").exists() and not (tmp_path / "l.json").exists()


def test_a_shard_with_bad_input_fails_the_job_once_with_its_line(tmp_path, cluster, golden):
    out = tmp_path / "out"
    with pytest.raises(HarnessError) as failure:
        nightly_ray(
            night(
                CONFIG,
                golden,
                out,
                RayOptions("local", workers=2, shards=3, retries=3),
                tmp_path / "l.json",
                tmp_path / "p.json",
            ),
            WorkerSpec(CONFIG, packer="tests.ray_hold:refuse"),
        )
    message = str(failure.value)
    assert message.startswith("shard 3/3 (4 blocks) on ") and "\n" not in message
    assert "tests.ray_hold:refuse" in message and "synth-s0-r003-b001" in message and "not packable" in message
    attempts = list((out / "shards").glob("*/0003-of-0003/attempt-*.json"))
    assert len(attempts) == 1  # run once: a harness error is not a worker's death
    assert not (out / "runs").exists() and not (tmp_path / "l.json").exists()
    # (no bound on the wall time: the one attempt above says it was not retried; 126 s on a loaded 2-core machine)


def test_golden_record_on_ray_is_the_one_process_golden(tmp_path, cluster, golden, small_corpus):
    one = load_golden(golden)
    gold, changes = record_ray(
        CONFIG,
        small_corpus.rows(),
        RecordTarget(tmp_path / "goldens", "ray-rel"),
        RayOptions("local", workers=2, shards=2),
        WorkerSpec(CONFIG),
        one.geometry,
        show_progress=False,
    )
    assert changes is None and gold.blocks == one.blocks == 12
    files = {n: e.sha256 for n, e in gold.manifest.files.items() if n != "calls.parquet"}
    assert files == {n: e.sha256 for n, e in one.manifest.files.items() if n != "calls.parquet"}
    assert gold.manifest.reproducibility == one.manifest.reproducibility
    assert gold.manifest.corpus == one.manifest.corpus
    facts = json.loads((tmp_path / "goldens" / "ray-rel.ray.json").read_text())
    assert [(s["shard"], s["blocks"]) for s in facts["shards"]] == [("1/2", 6), ("2/2", 6)]
    assert len({s["pid"] for s in facts["shards"]}) == 2
    assert not list((tmp_path / "goldens").glob(".ray-*"))


def test_a_golden_whose_corpus_was_modified_is_refused_before_any_shard_starts(tmp_path, golden):
    """The driver hashes the golden's corpus once (the shards do not hash it again): one flipped byte is
    refused before Ray starts, with nothing written."""
    copy = tmp_path / "g"
    shutil.copytree(golden, copy)
    data = bytearray((copy / "corpus.parquet").read_bytes())
    data[len(data) // 2] ^= 1
    (copy / "corpus.parquet").write_bytes(bytes(data))
    with pytest.raises(GoldenError, match=r"corpus.parquet: sha256 .* does not match the manifest's .*modified"):
        nightly_ray(
            night(
                CONFIG,
                copy,
                tmp_path / "out",
                RayOptions("local", workers=2, shards=2),
                tmp_path / "l.json",
                tmp_path / "p.json",
            ),
            WorkerSpec(CONFIG),
        )
    assert not (tmp_path / "out" / "shards").exists() and not (tmp_path / "l.json").exists()


def test_a_golden_of_another_reference_geometry_is_refused_before_ray_starts(tmp_path, golden):
    """--model full against a small golden: the driver knows the full model's geometry from its spec, so the
    refusal comes before Ray starts and any worker builds a model, with nothing written."""
    full = CONFIG.with_overrides(model=ModelSection(spec="full"))
    with pytest.raises(GoldenError, match=r"golden of another model geometry: .*frames_per_window 56 vs 589"):
        nightly_ray(
            night(
                full,
                golden,
                tmp_path / "out",
                RayOptions("local", workers=2, shards=2),
                tmp_path / "l.json",
                tmp_path / "p.json",
            ),
            WorkerSpec(full),
        )
    assert not (tmp_path / "out").exists() and not (tmp_path / "l.json").exists()


def test_a_plug_in_golden_is_named_after_its_model_on_ray_as_in_one_process(tmp_path, cluster):
    """A plug-in left at the default release name records under the model's own name, with or without Ray."""
    cfg = release_config(model=ModelSection(spec="lanes.models.null_model:small"), numerics=NUMERICS)
    assert cfg.release.name == "diar_nn_g-reference"
    one = golden_commands.record(cfg, None, tmp_path / "one", None, False, "in-process", False)
    on_ray = golden_commands.record(
        cfg, None, tmp_path / "ray", None, False, "in-process", False, ray=RayOptions("local", workers=2, shards=2)
    )
    named = {p.name for p in (tmp_path / "one").iterdir() if p.is_dir()}
    assert named == {p.name for p in (tmp_path / "ray").iterdir() if p.is_dir()} != {cfg.release.name}
    assert one.lines[0].split(" at ")[0].split("@")[0] == on_ray.lines[0].split(" at ")[0].split("@")[0]


def test_shard_goldens_of_different_numerics_are_not_merged(tmp_path, small_model, small_corpus):
    rows = list(small_corpus.rows())
    halves = []
    for i, threads in enumerate((1, 2)):
        numerics = NumericSettings(threads=threads)
        cfg = release_config(name="r", model=ModelSection(spec="small"), numerics=numerics)
        gold, _ = record_golden(
            tmp_path / f"s{i}", "r", rows[6 * i : 6 * i + 6], InProcessBackend(small_model, numerics), cfg
        )
        halves.append(gold)
    from harness.data.corpus_schema import write_corpus

    write_corpus(tmp_path / "c.parquet", rows, small_model.geometry)
    with pytest.raises(GoldenError, match=r"cannot merge shard golden .*: (config|backend|numerics).* differs"):
        merge_goldens(tmp_path / "merged", halves, tmp_path / "c.parquet")
    assert not (tmp_path / "merged").exists()
    with pytest.raises(GoldenError, match=r"do not cover the corpus .*\(6 of 12 blocks; first 'synth-s0-r002-b000'"):
        merge_goldens(tmp_path / "merged", halves[:1], tmp_path / "c.parquet")


def test_a_folder_the_workers_cannot_see_is_named(tmp_path):
    with pytest.raises(HarnessError, match=r"not visible on Ray node node-7: --out .* every node .* mounts"):
        check_shared(tmp_path, "node-7")
    (tmp_path / "job.json").write_text("{}")
    check_shared(tmp_path, "node-7")  # the job file is there: the folder is shared


@pytest.mark.parametrize(
    "command",
    [
        ["nightly", "--golden", "nowhere", "--model", "small"],
        ["golden", "record", "--model", "small"],
        ["audit", "nowhere.parquet", "--golden-model", "small"],
    ],
)
def test_ray_without_ray_installed_says_how_to_install_it(tmp_path, command):
    blocked = "import sys; sys.modules['ray'] = None; from harness.cli import main; main()"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run(
        [sys.executable, "-c", blocked, *command, "--ray", "local"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )  # this checkout
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: --ray: Ray is not installed here")
    assert lines[0].endswith(RAY_INSTALL) and not list(tmp_path.iterdir())


def test_ray_options_are_checked_before_any_work():
    for bad, match in (
        ({"workers": 0}, "ray.workers 0"),
        ({"shards": 0}, "ray.shards 0"),
        ({"retries": -1}, "ray.retries -1"),
    ):
        with pytest.raises(HarnessError, match=match):
            RayOptions("local", **bad)
    with pytest.raises(HarnessError, match="expected 'local', 'auto' or a Ray cluster address"):
        RayOptions(" ")
    with pytest.raises(HarnessError, match="ray.accelerator: expected a GPU kind"):
        RayOptions("auto", accelerator="")
    with pytest.raises(HarnessError, match="ray.workers: applies with --ray only"):
        ray_options(None, 2, None, 3)
    with pytest.raises(HarnessError, match="nightly.shard with --ray: Ray cuts the corpus in shards itself"):
        sharded = CONFIG.with_overrides(nightly=NightlySection(shard="1/2"))
        job_commands.nightly(
            NightlyJob(sharded, Path("nowhere"), Path("nowhere"), RayOptions("local"), localise=False, progress=False)
        )


@given(n=st.integers(1, 200), group=st.integers(1, 20), count=st.integers(1, 50))
def test_block_ranges_cut_the_corpus_in_whole_groups_in_order(n, group, count):
    """The law that makes a Ray run bitwise the one-process run: every shard is whole consecutive groups
    of the corpus walk (so it makes the same calls), the shards cover the corpus once, in order."""
    ids = [f"b{i:04d}" for i in range(n)]
    shards = block_ranges(ids, group, count)
    assert [b for s in shards for b in s.ids] == ids
    assert len(shards) == min(count, -(-n // group)) and all(s.ids for s in shards)
    assert [(s.index, s.count) for s in shards] == [(i + 1, len(shards)) for i in range(len(shards))]
    start = 0
    for s in shards:
        assert start % group == 0  # starts on a group boundary
        assert all(s.owns(b) for b in s.ids) and not any(s.owns(b) for b in ids if b not in s.ids)
        start += len(s.ids)
    sizes = [-(-len(s.ids) // group) for s in shards]
    assert max(sizes) - min(sizes) <= 1  # as even as whole groups allow


def perturbed(outputs: LaneOutputs, rng: np.random.Generator, scale: float) -> LaneOutputs:
    """A second exact run that differs from the first in some blocks (by ``scale``)."""
    hit = {outputs.block_ids[0]} | {b for b in outputs.block_ids if rng.random() < 0.5}
    seg = outputs.segmentation
    moved = np.array([b in hit for b in seg.block_ids])[:, None, None, None]
    logprobs = (seg.logprobs + moved * scale * rng.standard_normal(seg.logprobs.shape)).astype(np.float32)
    vps = {}
    for op, vp in outputs.voiceprint.items():
        rows = np.array([b in hit for b in vp.block_ids])[:, None]
        emb = (vp.embedding + rows * scale * rng.standard_normal(vp.embedding.shape)).astype(np.float32)
        vps[op] = VoiceprintOutputs(op, vp.block_ids, vp.row, vp.window, vp.speaker, vp.weights, emb)
    return LaneOutputs(SegmentationOutputs(list(seg.block_ids), seg.valid, logprobs), vps)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), cut=st.integers(1, 11), scale=st.sampled_from([0.0, 1e-6, 1e-3, 3.0]))
def test_shard_noise_floors_merge_into_the_whole_corpus_floor(recorded_golden, seed, cut, scale):
    """The law golden record --ray stands on: the floor of a corpus recorded in shards, merged, is the floor
    recorded over the whole corpus at once (maxima, minima, counts and all-ofs merge exactly)."""
    ids = recorded_golden.block_ids()
    first = recorded_golden.outputs().select(ids)
    second = perturbed(first, np.random.default_rng(seed), scale)

    def floor(part: list[str]) -> dict:
        scorer = floor_scorer(recorded_golden.ops, recorded_golden.geometry, "isolated")
        scorer.add(first.select(part), second.select(part))
        return noise_floor(scorer.verdicts())

    whole = floor(ids)
    assert merge_noise_floors([floor(ids[:cut]), floor(ids[cut:])]) == whole
    assert whole["bitwise"] == (scale == 0.0)  # the control: a perturbed second run is seen


class FakeCluster:
    """What worker_count asks of Ray: the cluster's resources and nodes."""

    def __init__(self, nodes: list[dict]) -> None:
        self._nodes = nodes

    def cluster_resources(self) -> dict:
        total: dict = {}
        for n in self._nodes:
            for k, v in n["Resources"].items():
                total[k] = total.get(k, 0) + v
        return total

    def nodes(self) -> list[dict]:
        return self._nodes


def test_workers_are_one_per_gpu_of_the_asked_kind_or_per_threads_cpus():
    from harness.pipeline.distributed import worker_count

    h100 = {"Alive": True, "Resources": {"CPU": 64, "GPU": 8, "accelerator_type:H100": 1}}
    a100 = {"Alive": True, "Resources": {"CPU": 32, "GPU": 4, "accelerator_type:A100": 1}}
    cpu_only = {"Alive": True, "Resources": {"CPU": 16}}
    gpu = WorkerSpec(CONFIG.with_overrides(device="cuda"))
    cluster = FakeCluster([h100, a100, cpu_only])
    assert worker_count(cluster, RayOptions("auto"), gpu) == (12, None)
    assert worker_count(cluster, RayOptions("auto", accelerator="A100"), gpu) == (4, None)
    assert worker_count(cluster, RayOptions("auto", accelerator="H100", workers=6), gpu) == (6, None)
    count, note = worker_count(cluster, RayOptions("auto", accelerator="H100", workers=10), gpu)
    assert count == 10 and "holds 8 H100 GPUs now" in note
    cpu = WorkerSpec(CONFIG.with_overrides(numerics=NumericSettings(threads=4)))
    assert worker_count(cluster, RayOptions("auto"), cpu) == ((64 + 32 + 16) // 4, None)
    with pytest.raises(HarnessError, match=r"no room for a worker: it needs a GPU per worker"):
        worker_count(FakeCluster([cpu_only]), RayOptions("auto"), gpu)
    with pytest.raises(HarnessError, match=r"ray.accelerator H100: applies to GPU workers"):
        worker_count(cluster, RayOptions("auto", accelerator="H100"), cpu)


def test_a_bug_on_a_worker_is_located_as_the_command_line_locates_one():
    """A shard's bug names the pipeline step it left (as `harness: internal error ... at step` does), on one line."""
    with pytest.raises(ZeroDivisionError) as info, step("nightly shard 1/2"):
        _ = 1 / 0
    assert describe_bug(info.value) == "at step 'nightly shard 1/2': ZeroDivisionError: division by zero"
    with pytest.raises(ValueError) as info:
        raise ValueError("two\nlines   apart")
    assert describe_bug(info.value).endswith(": ValueError: two lines apart")
