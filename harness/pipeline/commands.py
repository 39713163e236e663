"""One function per command that builds the model or runs the lanes (``golden record``, ``golden verify``,
``run``, ``nightly``, ``demo``, ``audit``, ``serve``): what the CLI calls, answering with an
:class:`~harness.pipeline.answer.Answer` (harness.pipeline.answer: how every command enters the pipeline). The
commands that only judge, promote and render files live in :mod:`harness.pipeline.gate_commands`, those that
show in :mod:`harness.pipeline.view_commands`, those that write a command's inputs in
:mod:`harness.pipeline.input_commands`.

The CLI only parses options and prints; everything a command does (in which order, what it
checks before long work) is here, so it is testable without a shell and used the same way by
``nightly``, ``demo`` and the benchmarks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from golden.locate import refuse_folder_of_goldens
from golden.store import load_golden
from harness.base.destinations import check_output_dir
from harness.base.errors import HarnessError, clip_list, step
from harness.base.fsio import safe_name
from harness.corpus.synth import iter_synth_blocks
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import write_corpus
from harness.data.ops import Op
from harness.data.schemas.config_file import (
    ConfigFile,
    NightlySection,
    PackerSection,
    ReleaseSection,
)
from harness.evidence.kind_registry import loaded
from harness.judging.binomial import needed_at_zero
from harness.pipeline.adopt import check_regeneration
from harness.pipeline.answer import Answer
from harness.pipeline.backends import IN_PROCESS, BackendChoice, load_model, make_backend, make_packer, model_geometry
from harness.pipeline.distributed import import_ray
from harness.pipeline.golden_counts import counts_line, golden_counts
from harness.pipeline.model_match import check_before_building, check_fingerprint, check_geometry
from harness.pipeline.nightly import nightly as run_nightly
from harness.pipeline.nightly_job import NightlyJob, check_outputs, outcome_answer, refuse_previous_output
from harness.pipeline.ray_jobs import RecordTarget, nightly_ray, record_ray
from harness.pipeline.record import adopt_hint, model_release_name, record_golden, verify_golden
from harness.pipeline.run import RunOptions, plan_for, run_shapes
from harness.pipeline.shard_worker import WorkerSpec
from harness.progress import progress_bar
from lanes.models.diar_nn_g.config import CONFIGS
from lanes.models.model_api import describe

if TYPE_CHECKING:
    from golden.store import Golden
    from harness.data.blocks import Block
    from harness.data.geometry import Geometry
    from harness.pipeline.distributed import RayOptions
    from harness.pipeline.nightly_job import NightlyOutcome

Rows = Iterator[tuple["Block", str, dict[str, Any]]]


def _corpus_rows(corpus: Path | None, cfg: ConfigFile, geometry: Geometry) -> tuple[Rows, int]:

    if corpus is not None:
        reader = CorpusReader(corpus, geometry)
        return reader.rows(), len(reader)
    rows = iter_synth_blocks(geometry, cfg.corpus.blocks, seed=cfg.corpus.seed, step=cfg.corpus.step or None)
    return rows, cfg.corpus.blocks


def record(
    cfg: ConfigFile,
    corpus: Path | None,
    goldens: Path,
    release: str | None,
    regen: bool,
    backend: BackendChoice | str,
    progress: bool,
    ray: RayOptions | None = None,
) -> Answer:

    if release is not None:
        safe_name(release, "--release")
    if ray is not None:
        import_ray()  # before anything is created: without Ray, one line saying how to install it
    check_output_dir(goldens, "golden folder", [("--corpus", corpus), ("--config", cfg.source)])
    if ray is not None:  # the driver builds no backend; a plug-in's name is read from the model on CPU
        name = release if release is not None else release_name(cfg, lambda: describe(load_model(cfg, "cpu")))
        if regen:
            check_regeneration(goldens / name, model_geometry(cfg))  # before any work: what adopt would refuse
        gold, changes = record_on_ray(cfg, corpus, goldens, name, regen, backend, progress, ray)
    else:
        be = make_backend(cfg, backend)
        name = release if release is not None else release_name(cfg, lambda: be.environment()["model"])
        if regen:
            check_regeneration(goldens / name, be.geometry)  # before any work: what adopt would refuse
        rows, n = _corpus_rows(corpus, cfg, be.geometry)
        with progress_bar(
            f"golden record ({n} blocks, exact lane x2)",
            2 * 3 * n,
            progress,
            announce=f"writing to {goldens}/ (the golden at {goldens / name}/ when done)",
        ) as tick:
            gold, changes = record_golden(goldens, name, rows, be, cfg, regen=regen, progress=tick)
    repro = gold.manifest.reproducibility
    floor = (
        "bitwise"
        if repro.bitwise
        else "NOT bitwise, noise floor "
        + ", ".join(f"OP {op} max_abs {v.max_abs:.3g} ({v.max_ulp} ULP)" for op, v in repro.ops.items())
    )
    lines = [f"recorded golden {gold.golden_id} at {gold.path} ({gold.blocks} blocks; exact lane reproduced {floor})"]
    lines += recorded_lines(gold, cfg)
    module_floors = gold.manifest.module_floors  # harness.localisation.module_floors
    if skipped := module_floors.skipped if module_floors is not None else None:
        lines.append(f"module noise floors not recorded: {skipped}; localisation will use one ulp of each scale")
    if serial := module_floors.serial if module_floors is not None else None:
        lines.append(f"module noise floors measured one pass after another (the same figures, slower): {serial}")
    if changes is not None:
        lines.append("changes against the previous golden: " + json.dumps(changes))
        if changes.get("fingerprint_changed"):
            lines.append(
                f"the model changed ({gold.manifest.model.name}, fingerprint {gold.fingerprint[:16]}...): once "
                "adopted, the new model starts unpromoted and the old model's promotions stay with it in the ledger"
            )
        lines.append(adopt_hint(gold.path))
    return Answer.of(lines)


def recorded_lines(gold: Golden, cfg: ConfigFile) -> list[str]:
    """What the golden recorded to judge, per OP, and a warning for an OP with fewer units than the sample-size
    bound of this configuration's tolerances needs (no packed shape could pass it on this corpus)."""

    counts = golden_counts(gold)
    lines = [f"recorded per OP: {counts_line(counts)}"]
    frames = gold.geometry.frames_per_window
    for op, (n, unit) in counts.items():
        if op is Op.SEGMENTATION:
            rate, key = cfg.tolerances.op0.max_flip_rate, "max_flip_rate"
            have, what = n * frames, "audio frames (at most)"
        else:
            rate, key = (
                (cfg.tolerances.op1 if op is Op.VOICEPRINT else cfg.tolerances.op2).max_failed_row_rate,
                "max_failed_row_rate",
            )
            have, what = n, unit
        need = needed_at_zero(float(rate))
        if need is not None and have < need:
            lines.append(
                f"warning: OP {int(op)}: {have:,} {what}, fewer than the {need:,} the sample-size bound needs "
                f"([tolerances.op{int(op)}] {key} = {rate}): no packed shape can pass OP {int(op)} on this "
                "corpus; record more blocks"
            )
    return lines


def release_name(cfg: ConfigFile, model: Callable[[], dict[str, Any]]) -> str:
    """The configured release name; for a plug-in left at the default name, the model's own name
    (a plug-in's golden is not the reference model's), from ``model()`` (its description), called
    only then."""
    import re

    if cfg.release.name != ReleaseSection().name or cfg.model.spec in CONFIGS:
        return cfg.release.name

    name = model_release_name(model())  # a TorchScript file's stem: goldens/tiny, not goldens/tiny.pt
    return safe_name(re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-.") or "model", "release name")


def record_on_ray(
    cfg: ConfigFile,
    corpus: Path | None,
    goldens: Path,
    name: str,
    regen: bool,
    backend: BackendChoice | str,
    progress: bool,
    ray: RayOptions,
) -> tuple[Golden, dict[str, Any] | None]:
    """``golden record --ray``: the workers build the model; this process only needs its geometry."""

    choice = BackendChoice(backend) if isinstance(backend, str) else backend
    geometry = model_geometry(cfg)
    rows, _ = _corpus_rows(corpus, cfg, geometry)
    return record_ray(cfg, rows, RecordTarget(goldens, name, regen), ray, WorkerSpec(cfg, choice), geometry, progress)


def verify(cfg: ConfigFile, golden_path: Path, backend: BackendChoice | str, progress: bool) -> Answer:

    gold = load_golden(golden_path)  # instant: a folder of goldens, a tampered manifest, before the model is built
    url = backend if isinstance(backend, str) else backend.url
    in_process = url in IN_PROCESS
    model = f"model {cfg.model.spec!r}" if in_process else f"the model served at {url}"
    check_before_building(gold, cfg.model.spec, in_process)
    be = make_backend(cfg, backend)
    check_geometry(gold, be.geometry, model)  # a plug-in's, a server's: before any block runs
    check_fingerprint(gold, be.fingerprint, model)
    with progress_bar("golden verify", 3 * gold.blocks, progress) as tick:
        result = verify_golden(gold, be, cfg, progress=tick)
    return Answer.of([result.summary], held=result.passed)


def run(cfg: ConfigFile, golden_path: Path, runs: Path, progress: bool, pad_to_fixed: bool | None = None) -> Answer:
    """``harness run``: the backend and packer are the configuration's (``[backend]``, ``[packer]``, command-line
    overrides merged in and validated with the file); ``pad_to_fixed`` overrides the plan's padding only."""
    with loaded(cfg.evidence.kinds):  # a team's kinds of evidence, for this command only
        return _run(cfg, golden_path, runs, progress, pad_to_fixed)


def _run(cfg: ConfigFile, golden_path: Path, runs: Path, progress: bool, pad_to_fixed: bool | None = None) -> Answer:
    knobs, laws_examples = cfg.packer, cfg.packer.laws_examples
    check_output_dir(runs, "runs folder", [("--golden", golden_path), ("--config", cfg.source)])
    check_golden_before_building(cfg, golden_path)
    be = make_backend(cfg, BackendChoice.of(cfg))
    gold = load_golden(golden_path, expect_fingerprint=be.fingerprint)  # before the laws, the warm-up, any block
    plan = plan_for(cfg, pad_to_fixed=pad_to_fixed)
    packing = make_packer(knobs.cmd, knobs.spec, be.geometry, knobs.digest)
    try:
        with progress_bar(
            f"run shapes {clip_list(plan.shapes)}",
            plan.calls(gold.blocks),
            progress,
            announce=f"writing to {runs}/ (a new run folder inside when done)",
        ) as tick:
            result = run_shapes(
                gold, be, plan, runs, cfg, RunOptions(packer=packing, progress=tick, laws_examples=laws_examples)
            )
    finally:
        packing.close()
    return Answer.of([f"wrote run {result.run_id} at {result.path}"])


def check_golden_before_building(cfg: ConfigFile, golden_path: Path) -> None:
    """What ``run`` and ``nightly`` can refuse before the model is built: a folder of goldens, a golden whose
    manifest or files do not hold, a golden of another reference model's geometry. The fingerprint is compared
    as soon as the model is built."""

    refuse_folder_of_goldens(golden_path)  # at once, listing the goldens inside
    check_before_building(load_golden(golden_path), cfg.model.spec, cfg.backend.url in IN_PROCESS)


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
    lines.append(f"sign-off report: {outcome.paths.get('html')}")
    night = outcome_answer(outcome)
    return Answer([*lines, *night.lines], night.status)


def audit(cfg: ConfigFile, capture: Path, out: Path, progress: bool, ray: RayOptions | None = None) -> Answer:
    """``harness audit``: the packing laws on every captured request, then every captured block re-run alone and
    the served outputs judged against it (fails when a law is broken or an OP fails)."""
    from harness.pipeline.audit_command import run_audit  # deferred: imports hypothesis (start-up)

    outcome = run_audit(cfg, capture, out, progress, ray)
    return Answer.of(outcome.lines, held=outcome.passed)


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
