"""The jobs: ``nightly``, ``merge``, ``serve`` and ``demo`` (:mod:`harness.cli.job_cmds`), one function each,
answering with an :class:`~harness.pipeline.answer.Answer`: a night's whole gate (on Ray or here), its shards
merged, the reference model served by Triton, the main job on the embedded default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from golden.locate import refuse_folder_of_goldens
from harness.base.destinations import check_output_dir
from harness.base.errors import HarnessError, clip_list, step
from harness.corpus.synth import iter_synth_blocks
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import write_corpus
from harness.data.schemas.config_file import (
    ConfigFile,
    NightlySection,
    PackerSection,
)
from harness.evidence.kind_registry import loaded
from harness.pipeline.answer import Answer
from harness.pipeline.backends import make_backend, make_packer
from harness.pipeline.commands.lane import check_golden_before_building
from harness.pipeline.distributed import import_ray
from harness.pipeline.nightly import nightly as run_nightly
from harness.pipeline.nightly_job import NightlyJob, check_outputs, outcome_answer, refuse_previous_output
from harness.pipeline.ray_jobs import nightly_ray
from harness.pipeline.record import record_golden
from harness.pipeline.shard_worker import WorkerSpec
from harness.progress import progress_bar

if TYPE_CHECKING:
    from harness.pipeline.nightly_job import NightlyOutcome


def nightly(job: NightlyJob) -> Answer:
    """``harness nightly``: ``job.force`` replaces a previous nightly's output in ``job.out`` (refused otherwise,
    before any work); ``job.no_promote`` leaves the ledger and manifest untouched."""
    return outcome_answer(nightly_outcome(job))


def nightly_outcome(job: NightlyJob) -> NightlyOutcome:
    """The nightly of ``job``, as the job's outcome (:func:`nightly` answers with it)."""
    with loaded(job.config.evidence.kinds):  # a team's kinds of evidence, for this command only
        return _nightly_outcome(job)


def _nightly_outcome(job: NightlyJob) -> NightlyOutcome:
    cfg, knobs = job.config, job.config.packer
    part = job.part
    if job.ray is not None and part is not None:  # the options first, then where they would write
        raise HarnessError("nightly.shard with --ray: Ray cuts the corpus in shards itself (ray.shards = N)")
    refuse_folder_of_goldens(job.golden)  # at once, not after building the model
    check_outputs(
        cfg,
        job.golden,
        job.out,
        job.ledger,
        job.manifest,  # before any work (a Ray nightly's too)
        promotes=part is None and not job.no_promote,
    )
    refuse_previous_output(job.out, job.force)  # after the options are checked, before any work
    if job.ray is not None:
        return nightly_on_ray(job)
    check_golden_before_building(cfg, job.golden)
    be = make_backend(cfg, job.backend)  # its fingerprint is compared first thing (nightly's load_golden)
    packing = make_packer(knobs.cmd, knobs.spec, be.geometry, knobs.digest)
    try:
        return run_nightly(job, be, packing, outputs_checked=True)
    finally:
        packing.close()


def nightly_on_ray(job: NightlyJob) -> NightlyOutcome:
    """``nightly --ray``: Ray is checked first (one line saying how to install it), then the shards."""

    import_ray()
    assert job.ray is not None and job.shard is None  # the caller's tests
    cfg, knobs = job.config, job.config.packer
    spec = WorkerSpec(cfg, job.backend, knobs.cmd, knobs.spec, knobs.digest, knobs.laws_examples)
    return nightly_ray(job, spec)


def demo(cfg: ConfigFile, out: Path, progress: bool) -> Answer:
    """The main job: synthetic corpus, golden, nightly, sign-off report."""
    with loaded(cfg.evidence.kinds):  # a team's kinds of evidence, for this command only
        return _demo(cfg, out, progress)


def _demo(cfg: ConfigFile, out: Path, progress: bool) -> Answer:
    import time

    start = time.perf_counter()
    check_output_dir(out, "demo output folder", [("--config", cfg.source)])
    be = make_backend(cfg)
    lines = [
        f"main job: model {cfg.model.spec} on {cfg.release.device}, {cfg.corpus.blocks} synthetic blocks, candidate "
        f"shapes {clip_list(cfg.shapes.candidates)}, output in {out}"
    ]
    with step("corpus"):
        write_corpus(
            out / "corpus.parquet",
            iter_synth_blocks(be.geometry, cfg.corpus.blocks, seed=cfg.corpus.seed, step=cfg.corpus.step or None),
            be.geometry,
        )
    n = cfg.corpus.blocks
    with progress_bar(
        f"golden record ({n} blocks, exact lane x2)",
        2 * 3 * n,
        progress,
        announce=f"writing to {out}/ (report at {out / 'nightly/report/report.html'} when done)",
    ) as tick:
        gold, _ = record_golden(
            out / "goldens",
            cfg.release.name,
            CorpusReader(out / "corpus.parquet", be.geometry).rows(),
            be,
            cfg,
            progress=tick,
        )
    lines.append(
        f"golden {gold.golden_id}: exact lane "
        f"{'reproduced bitwise' if gold.manifest.reproducibility.bitwise else 'NOT bitwise'}"
    )
    # the demo's nightly: the harness's packer (laws judged at the default count), the whole corpus, the ledger
    # beside its golden: the configuration's [packer] and [nightly] are the real nightly's, not the demo's
    job = NightlyJob(
        cfg.with_overrides(packer=PackerSection(), nightly=NightlySection()),
        gold.path,
        out / "nightly",
        progress=progress,
    )
    outcome = run_nightly(job, be)
    lines.append(f"main job took {time.perf_counter() - start:.0f} s")
    # the nightly's written files by their name (its outcome's paths; None where no report was written)
    lines.append(f"sign-off report: {outcome.paths.get('html')}")
    night = outcome_answer(outcome)
    return Answer([*lines, *night.lines], night.status)


def serve(cfg: ConfigFile, instances: int, repository: Path | None, say: Callable[[str], None]) -> Answer:
    """``harness serve``: the model served on a real Triton server on loopback until a signal stops it (serving's
    normal end: ``say`` tells when it is ready and what stopped it)."""
    from lanes.backends.triton.server import ServerOptions, serve_forever  # deferred: imports pydantic (start-up)

    options = ServerOptions(
        model_spec=cfg.model.spec,
        seed=cfg.model.seed,
        device=cfg.release.device,
        numerics=cfg.numerics,
        instances=instances,
        repository=repository,
        verbatim=repository is not None,
    )
    what = f"model repository {repository}" if repository is not None else "diar_nn_g"
    serve_forever(
        options,
        on_ready=lambda url: say(f"{what} served at {url} (Ctrl-C to stop)"),
        on_stop=lambda name: say(f"{what}: stopped by {name} (the server is stopped and cleaned up)"),
    )
    return Answer.of([])


@dataclass(frozen=True)
class MergeJob:
    """``harness merge``: the shards' runs (or their folders) and where the merged nightly writes."""

    golden: Path
    shards: Sequence[Path]
    out: Path
    force: bool = False
    localise: bool = True
    no_promote: bool = False


def merge(cfg: ConfigFile, job: MergeJob) -> Answer:
    """The shards of one nightly merged into one run, then scored, promoted and reported as one nightly."""
    with loaded(cfg.evidence.kinds):  # a team's kinds of evidence, for this command only
        return _merge(cfg, job)


def _merge(cfg: ConfigFile, job: MergeJob) -> Answer:
    from harness.pipeline.nightly import merge as merge_shards  # deferred: imports numpy, pyarrow (start-up)
    from harness.pipeline.nightly_job import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        outcome_answer,
        refuse_previous_output,
    )

    refuse_previous_output(job.out, job.force)
    ledger, manifest = (None if p is None else Path(p) for p in (cfg.nightly.ledger, cfg.nightly.manifest))
    outcome = merge_shards(cfg, job.golden, list(job.shards), job.out, ledger, manifest, job.localise, job.no_promote)
    return outcome_answer(outcome)
