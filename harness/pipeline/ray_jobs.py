"""``nightly --ray`` and ``golden record --ray``: the sharded jobs :mod:`harness.pipeline.distributed` runs.

Each is a shard function (runs on a worker, with the backend the worker built once, writes with the
writers every other command uses, returns the directory it wrote in the shared folder) and a merge
on the driver that is the one-process command's own: the nightly's shard runs go through
:func:`harness.pipeline.nightly.merge` (which refuses shards of different device kinds or numerics,
then scores once, promotes, localises and reports, as ``harness merge`` does); a recording's shard
goldens go through :func:`harness.pipeline.golden_merge.merge_goldens`.

Shards are whole groups of the corpus as one process walks it (:func:`harness.corpus.shards.block_ranges`),
so every network call a worker makes is one the one-process job makes: the merged result is that
job's, bit for bit. ``audit --ray`` (production captures) hooks in the same way, in
:mod:`harness.pipeline.ray_audit`: a shard function over whole captured requests, and the
one-process audit's scoring over what the shards re-ran.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from golden.manifest import check_files
from golden.store import Golden, load_golden
from harness.base.destinations import check_output_dir
from harness.base.errors import step
from harness.base.fsio import safe_name
from harness.base.jsonio import write_json_atomic
from harness.corpus.shards import BlockRange, block_ranges
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import CorpusRow, write_corpus
from harness.data.geometry import Geometry
from harness.data.schemas.config_file import ConfigFile
from harness.packers.packing import Packer
from harness.pipeline.backends import IN_PROCESS
from harness.pipeline.distributed import RayOptions, new_job_root, remove_job_root, run_shards
from harness.pipeline.golden_merge import merge_goldens
from harness.pipeline.model_match import check_before_building
from harness.pipeline.nightly import merge
from harness.pipeline.nightly_job import NightlyJob, NightlyOutcome, check_outputs
from harness.pipeline.record import GoldenChanges, golden_changes, golden_target, record_golden
from harness.pipeline.run import RunOptions, plan_for, run_shapes
from harness.pipeline.shard_worker import ShardJob, WorkerSpec

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend

CORPUS = "corpus.parquet"


# ------------------------------------------------------------------------------------ nightly


def nightly_shard(
    backend: Backend,
    packer: Packer,
    config: ConfigFile,
    shard: BlockRange,
    shard_dir: Path,
    golden_path: str,
    laws_examples: int = 100,
) -> Path:
    """On a worker: the exact lane and every candidate shape over the shard's blocks, as a run directory
    (its packer judged on the packing laws first, as every run's is)."""
    golden = load_golden(golden_path, expect_fingerprint=backend.fingerprint)
    return run_shapes(
        golden,
        backend,
        plan_for(config),
        Path(shard_dir) / "runs",
        config,
        RunOptions(
            packer=packer,
            shard=shard,
            corpus_verified=True,  # the driver hashed the corpus once, before any shard
            laws_examples=laws_examples,
        ),
    ).path


def nightly_ray(job: NightlyJob, spec: WorkerSpec) -> NightlyOutcome:
    """The nightly of ``job`` over Ray (``job.ray``; its shard must be None: Ray cuts the corpus itself): shards
    run on the workers ``spec`` describes, then ``merge`` as ``harness merge`` does it. A golden of another
    reference geometry is refused here, before Ray starts; each worker compares its model's fingerprint before
    its packer is judged (:func:`nightly_shard`)."""

    options, config, golden_path, out, no_promote = job.ray, job.config, job.golden, job.out, job.no_promote
    assert options is not None, "a Ray nightly without Ray options"
    golden = load_golden(golden_path)
    check_before_building(golden, config.model.spec, spec.backend.url in IN_PROCESS)
    # --no-promote: the ledger is not even opened
    ledger_path, manifest_path = check_outputs(
        config, golden.path, out, job.ledger, job.manifest, promotes=not no_promote
    )
    ids, group = golden.block_ids(), plan_for(config).group_size()
    with step("hash the golden's corpus"):  # once here, not once per shard on the workers
        check_files(golden.path, golden.manifest.files, hashed=[CORPUS])
    job_root = new_job_root(Path(out) / "shards", "nightly")
    shard_job = ShardJob(
        "nightly", nightly_shard, {"golden_path": str(Path(golden_path).resolve()), "laws_examples": spec.laws_examples}
    )
    results, facts = run_shards(options, spec, shard_job, lambda n: block_ranges(ids, group, n), job_root, job.progress)
    outcome = merge(
        config,
        golden.path,
        [r.written for r in results],
        out,
        ledger_path,
        manifest_path,
        job.localise,
        no_promote=no_promote,
    )
    # the outcome's paths are named by the file they point at (html, junit, score, run, ray ...)
    outcome.paths["ray"] = write_json_atomic(Path(out) / "ray.json", {**facts, "run": str(outcome.paths["run"])})
    remove_job_root(job_root)
    return outcome


# ------------------------------------------------------------------------------------ golden record


def record_shard(
    backend: Backend,
    packer: Packer,
    config: ConfigFile,
    shard: BlockRange,
    shard_dir: Path,
    corpus: str,
    release: str,
) -> Path:
    """On a worker: a golden of the shard's blocks (the exact lane twice, its own noise floor)."""

    rows = (row for row in CorpusReader(corpus, backend.geometry).rows(shard.members) if shard.owns(row[0].id))
    # a folder per attempt: a rerun after a death just past the rename must not find "a golden exists"
    golden, _ = record_golden(
        Path(shard_dir) / f"a{os.getpid()}-{secrets.token_hex(3)}", release, rows, backend, config, whole=False
    )  # one shard: the merged golden is judged whole
    return golden.path


@dataclass(frozen=True)
class RecordTarget:
    """Where ``golden record`` writes: ``goldens/<release>``; with ``regen``, beside the golden already there
    (:func:`harness.pipeline.record.golden_target`)."""

    goldens: Path
    release: str
    regen: bool = False


def record_ray(
    config: ConfigFile,
    corpus_rows: Iterable[CorpusRow],
    target: RecordTarget,
    options: RayOptions,
    spec: WorkerSpec,
    geometry: Geometry,
    show_progress: bool = True,
) -> tuple[Golden, GoldenChanges | None]:
    """``golden record --ray``: the corpus staged (validated) in the shared folder, a shard golden per
    shard on the workers, merged into one golden as a one-process recording writes it."""

    goldens = target.goldens
    name = safe_name(target.release, "--release")
    final, previous = golden_target(goldens, name, target.regen)
    check_output_dir(final.parent, "golden folder")
    job_root = new_job_root(Path(goldens) / f".ray-{name}", "golden record")
    with step("corpus"):
        write_corpus(job_root / CORPUS, corpus_rows, geometry)
        ids = CorpusReader(job_root / CORPUS, geometry).ids()
    # the exact lane calls one block at a time (the release shape): any cut makes the same calls
    group = 1
    job = ShardJob("golden record", record_shard, {"corpus": str((job_root / CORPUS).resolve()), "release": name})
    results, facts = run_shards(options, spec, job, lambda n: block_ranges(ids, group, n), job_root, show_progress)
    with step("merge shard goldens"):
        golden = merge_goldens(final, [load_golden(r.written) for r in results], job_root / CORPUS)
    write_json_atomic(golden.path.with_name(f"{golden.path.name}.ray.json"), {**facts, "golden": str(golden.path)})
    remove_job_root(job_root)
    changes = golden_changes(previous, golden) if previous is not None else None
    return golden, changes
