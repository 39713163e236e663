"""One function per command: what the CLI calls, returning the lines it prints.

The CLI only parses options and prints; everything a command does (in which order, what it
checks before long work) is here, so it is testable without a shell and used the same way by
``nightly``, ``demo`` and the benchmarks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from golden.locate import refuse_folder_of_goldens
from harness.data.destinations import check_output_dir, check_output_file, same_file
from harness.data.errors import HarnessError, committed, step
from harness.data.fsio import safe_name
from harness.data.outputset import output_set, pin
from harness.pipeline.backends import BackendChoice, load_model, make_backend, make_packer
from harness.progress import progress_bar
from harness.release_config import ReleaseConfig

if TYPE_CHECKING:
    from golden.store import Golden
    from harness.data.blocks import Block
    from harness.data.geometry import Geometry
    from harness.data.schemas.results import Score
    from harness.pipeline.distributed import RayOptions
    from harness.pipeline.nightly import NightlyJob, NightlyOutcome

Rows = Iterator[tuple["Block", str, dict[str, Any]]]


def _corpus_rows(corpus: Path | None, cfg: ReleaseConfig, geometry: Geometry) -> tuple[Rows, int]:
    from harness.corpus.synth import iter_synth_blocks
    from harness.data.corpus_schema import CorpusReader

    if corpus is not None:
        reader = CorpusReader(corpus, geometry)
        return reader.rows(), len(reader)
    rows = iter_synth_blocks(geometry, cfg.corpus.blocks, seed=cfg.corpus.seed, step=cfg.corpus.step or None)
    return rows, cfg.corpus.blocks


def record(
    cfg: ReleaseConfig,
    corpus: Path | None,
    goldens: Path,
    release: str | None,
    regen: bool,
    backend: BackendChoice | str,
    progress: bool,
    ray: RayOptions | None = None,
) -> list[str]:
    from harness.pipeline.record import record_golden
    from lanes.model_api import describe

    if release is not None:
        safe_name(release, "--release")
    if ray is not None:
        from harness.pipeline.distributed import import_ray

        import_ray()  # before anything is created: without Ray, one line saying how to install it
    check_output_dir(goldens, "golden folder", [("--corpus", corpus), ("--config", cfg.source)])
    if ray is not None:  # the driver builds no backend; a plug-in's name is read from the model on CPU
        name = release if release is not None else release_name(cfg, lambda: describe(load_model(cfg, "cpu")))
        gold, changes = record_on_ray(cfg, corpus, goldens, name, regen, backend, progress, ray)
    else:
        be = make_backend(cfg, backend)
        name = release if release is not None else release_name(cfg, lambda: be.environment()["model"])
        rows, n = _corpus_rows(corpus, cfg, be.geometry)
        with progress_bar(
            f"golden record ({n} blocks, exact lane x2)",
            2 * 3 * n,
            progress,
            announce=f"writing to {goldens}/ (the golden at {goldens / name}/ when done)",
        ) as tick:
            gold, changes = record_golden(goldens, name, rows, be, cfg, regen=regen, progress=tick)
    repro = gold.manifest["reproducibility"]
    floor = (
        "bitwise"
        if repro["bitwise"]
        else "NOT bitwise, noise floor "
        + ", ".join(f"OP {op} max_abs {v['max_abs']:.3g} ({v['max_ulp']} ULP)" for op, v in repro["ops"].items())
    )
    lines = [f"recorded golden {gold.golden_id} at {gold.path} ({gold.blocks} blocks; exact lane reproduced {floor})"]
    lines += recorded_lines(gold, cfg)
    if skipped := (gold.manifest.get("module_floors") or {}).get("skipped"):  # harness.localisation.module_floors
        lines.append(f"module noise floors not recorded: {skipped}; localisation will use one ulp of each scale")
    if changes is not None:
        from harness.pipeline.record import adopt_hint

        lines.append("changes against the previous golden: " + json.dumps(changes))
        lines.append(adopt_hint(gold.path))
    return lines


def recorded_lines(gold: Golden, cfg: ReleaseConfig) -> list[str]:
    """What the golden recorded to judge, per OP, and a warning for an OP with fewer units than the sample-size
    bound of this configuration's tolerances needs (no packed shape could pass it on this corpus)."""
    from harness.data.ops import Op
    from harness.judging.binomial import needed_at_zero
    from harness.pipeline.golden_counts import counts_line, recorded_counts

    m = gold.manifest
    lines = [f"recorded per OP: {counts_line(m['files'], m['corpus'], gold.ops)}"]
    frames = gold.geometry.frames_per_window
    for op, (n, unit) in recorded_counts(m["files"], m["corpus"], gold.ops).items():
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


def release_name(cfg: ReleaseConfig, model: Callable[[], dict[str, Any]]) -> str:
    """The configured release name; for a plug-in left at the default name, the model's own name
    (a plug-in's golden is not the reference model's), from ``model()`` (its description), called
    only then."""
    import re

    from harness.data.schemas.config_file import ReleaseSection
    from lanes.diar_nn_g.config import CONFIGS

    if cfg.name != ReleaseSection().name or cfg.model.spec in CONFIGS:
        return cfg.name
    from harness.pipeline.record import model_release_name

    name = model_release_name(model())  # a TorchScript file's stem: goldens/tiny, not goldens/tiny.pt
    return safe_name(re.sub(r"[^A-Za-z0-9._+-]+", "-", name).strip("-.") or "model", "release name")


def record_on_ray(
    cfg: ReleaseConfig,
    corpus: Path | None,
    goldens: Path,
    name: str,
    regen: bool,
    backend: BackendChoice | str,
    progress: bool,
    ray: RayOptions,
) -> tuple[Golden, dict[str, Any] | None]:
    """``golden record --ray``: the workers build the model; this process only needs its geometry."""
    from harness.pipeline.backends import model_geometry
    from harness.pipeline.distributed import WorkerSpec
    from harness.pipeline.ray_jobs import RecordTarget, record_ray

    choice = BackendChoice(backend) if isinstance(backend, str) else backend
    geometry = model_geometry(cfg)
    rows, _ = _corpus_rows(corpus, cfg, geometry)
    return record_ray(cfg, rows, RecordTarget(goldens, name, regen), ray, WorkerSpec(cfg, choice), geometry, progress)


def verify(cfg: ReleaseConfig, golden_path: Path, backend: BackendChoice | str, progress: bool) -> tuple[str, bool]:
    from golden.store import load_golden
    from harness.pipeline.backends import IN_PROCESS
    from harness.pipeline.model_match import check_before_building, check_fingerprint, check_geometry
    from harness.pipeline.record import verify_golden

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
    return result.summary, result.passed


def run(
    cfg: ReleaseConfig, golden_path: Path, runs: Path, progress: bool, pad_to_fixed: bool | None = None
) -> list[str]:
    """``harness run``: the backend and packer are the configuration's (``[backend]``, ``[packer]``, command-line
    overrides merged in and validated with the file); ``pad_to_fixed`` overrides the plan's padding only."""
    from golden.store import load_golden
    from harness.pipeline.run import RunOptions, plan_for, run_shapes

    knobs, laws_examples = cfg.packer, cfg.packer.laws_examples
    check_output_dir(runs, "runs folder", [("--golden", golden_path), ("--config", cfg.source)])
    check_golden_before_building(cfg, golden_path)
    be = make_backend(cfg, BackendChoice.of(cfg))
    gold = load_golden(golden_path, expect_fingerprint=be.fingerprint)  # before the laws, the warm-up, any block
    plan = plan_for(cfg, pad_to_fixed=pad_to_fixed)
    packing = make_packer(knobs.cmd, knobs.spec, be.geometry, knobs.digest)
    try:
        with progress_bar(
            f"run shapes {list(plan.shapes)}",
            plan.calls(gold.blocks),
            progress,
            announce=f"writing to {runs}/ (a new run folder inside when done)",
        ) as tick:
            result = run_shapes(
                gold, be, plan, runs, cfg, RunOptions(packer=packing, progress=tick, laws_examples=laws_examples)
            )
    finally:
        packing.close()
    return [f"wrote run {result.run_id} at {result.path}"]


def check_golden_before_building(cfg: ReleaseConfig, golden_path: Path) -> None:
    """What ``run`` and ``nightly`` can refuse before the model is built: a folder of goldens, a golden whose
    manifest or files do not hold, a golden of another reference model's geometry. The fingerprint is compared
    as soon as the model is built."""
    from golden.store import load_golden
    from harness.pipeline.backends import IN_PROCESS
    from harness.pipeline.model_match import check_before_building

    refuse_folder_of_goldens(golden_path)  # at once, listing the goldens inside
    check_before_building(load_golden(golden_path), cfg.model.spec, cfg.backend.url in IN_PROCESS)


def score(cfg: ReleaseConfig, golden_path: Path, run_path: Path, out: Path) -> tuple[list[str], bool]:
    from golden.runs import load_run
    from golden.store import load_golden
    from harness.pipeline.score import score_run, write_score

    check_output_file(
        out, "score file", inputs=[("--golden", golden_path), ("--run", run_path), ("--config", cfg.source)]
    )
    gold, r = load_golden(golden_path), load_run(run_path)
    result = score_run(gold, r, cfg.tolerances)
    write_score(out, result)
    return score_lines(result) + [f"wrote {out}"], result.verdict == "pass"


def score_lines(result: Score) -> list[str]:
    """The golden's reproduction first when it failed (then every verdict is in doubt), then one
    line per shape."""
    lines = []
    v = result.verification
    if not v.passed:
        lines.append(
            f"GOLDEN NOT REPRODUCED: {v.summary}; the shape verdicts below were judged against a golden "
            "this environment does not reproduce"
        )
    for k, s in sorted(result.shapes.items(), key=lambda kv: int(kv[0])):
        if s.cause is not None:  # the refusal's cause first, with the evidence that decided it
            lines.append(f"shape k={k}: FAIL, {s.cause.text(k)}")
        else:
            lines.append(f"shape k={k}: {s.verdict.upper()}" + (f" ({s.reasons[0]})" if s.reasons else ""))
    lines += [
        f"warning: {w.line}" for _, s in sorted(result.shapes.items(), key=lambda kv: int(kv[0])) for w in s.warnings
    ]
    return lines


def promote(
    cfg: ReleaseConfig, score_path: Path, ledger: Path, manifest: Path, golden: Path | None, run_path: Path | None
) -> list[str]:
    from harness.ledger.store import check_paths
    from harness.pipeline.promote import describe_transition, promote_file

    check_paths(
        ledger, manifest, [("--score", score_path), ("--golden", golden), ("--run", run_path), ("--config", cfg.source)]
    )
    result, transitions = promote_file(score_path, cfg, ledger, manifest, golden, run_path)
    lines = score_lines(result)  # a golden that did not reproduce is said first: it is why nothing was promoted
    lines += [describe_transition(t) for t in transitions]
    return lines + [f"wrote {ledger} and {manifest}"]


def report(
    score_path: Path,
    out: Path,
    ledger: Path | None,
    manifest: Path | None,
    junit: Path | None,
    localisation: Path | None,
) -> list[str]:
    from harness.data.jsonio import read_json
    from harness.data.schemas import LocalisationFile, validate
    from harness.ledger.score_check import check_self_consistent, read_score
    from harness.ledger.store import read_consistent
    from harness.pipeline.promote import engine_manifest
    from reports import ReportContext, write_junit, write_report

    inputs = [("--score", score_path), ("--ledger", ledger), ("--manifest", manifest), ("--localisation", localisation)]
    check_output_dir(out, "report folder", inputs)
    if junit is not None:
        check_output_file(junit, "JUnit file", inputs=inputs)
    # a nightly's score and localisation are read from one generation of its outputs, whatever is published meanwhile
    score_file, loc_file = pin([score_path, localisation or score_path])
    result = read_score(score_file)
    check_self_consistent(result, str(score_path))
    book, engine_reads = read_consistent(ledger, manifest) if ledger is not None else (None, None)
    loc = None
    if localisation is not None:
        data = validate(LocalisationFile, read_json(loc_file, "localisation file"), str(localisation))
        if data.score_digest != result.digest:
            raise HarnessError(
                f"{localisation}: localises another score (digest {data.score_digest[:12]}...), not {score_path}"
            )
        loc = {
            k: {op: v.model_dump(mode="json", exclude_unset=True) for op, v in ops.items()}  # as written
            for k, ops in data.shapes.items()
        }
    # the pages (and a JUnit file beside them) are one set, published in one step (harness.data.outputset)
    beside = junit if junit is not None and same_file(junit.parent, out) else None
    members = [*REPORT_PAGES, *([beside.name] if beside is not None else [])]
    with output_set(out, "report", members) as stage:
        write_report(
            stage,
            result,
            ReportContext(
                ledger=book,
                localisation=loc,
                engine=engine_manifest(result, manifest, engine_reads) if manifest is not None else None,
            ),
        )
        if beside is not None:
            write_junit(stage / beside.name, result, None)
    committed(out, "the report's pages" + (f" and {beside.name}" if beside is not None else ""))
    if junit is not None and beside is None:  # elsewhere: its own file, after the pages
        write_junit(junit, result, None)
        committed(junit, "the JUnit file")
    return [f"report: {out / 'report.html'}"]


REPORT_PAGES = ("report.json", "report.md", "report.html")


def nightly(job: NightlyJob) -> NightlyOutcome:
    """``harness nightly``: ``job.force`` replaces a previous nightly's output in ``job.out`` (refused otherwise,
    before any work); ``job.no_promote`` leaves the ledger and manifest untouched."""
    from harness.pipeline.nightly import check_outputs, refuse_previous_output
    from harness.pipeline.nightly import nightly as run_nightly

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
    from harness.pipeline.distributed import WorkerSpec, import_ray
    from harness.pipeline.ray_jobs import nightly_ray

    import_ray()
    assert job.ray is not None and job.shard is None  # the caller's tests
    cfg, knobs = job.config, job.config.packer
    spec = WorkerSpec(cfg, job.backend, knobs.cmd, knobs.spec, knobs.digest, knobs.laws_examples)
    return nightly_ray(job, spec)


def demo(cfg: ReleaseConfig, out: Path, progress: bool) -> tuple[list[str], object]:
    """The main job: synthetic corpus, golden, nightly, sign-off report."""
    import time

    from harness.corpus.synth import iter_synth_blocks
    from harness.data.corpus_schema import CorpusReader, write_corpus
    from harness.data.schemas.config_file import NightlySection, PackerSection
    from harness.pipeline.nightly import NightlyJob
    from harness.pipeline.nightly import nightly as run_nightly
    from harness.pipeline.record import record_golden

    start = time.perf_counter()
    check_output_dir(out, "demo output folder", [("--config", cfg.source)])
    be = make_backend(cfg)
    lines = [
        f"main job: model {cfg.model.spec} on {cfg.device}, {cfg.corpus.blocks} synthetic blocks, candidate "
        f"shapes {list(cfg.candidates)}, output in {out}"
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
            out / "goldens", cfg.name, CorpusReader(out / "corpus.parquet", be.geometry).rows(), be, cfg, progress=tick
        )
    lines.append(
        f"golden {gold.golden_id}: exact lane "
        f"{'reproduced bitwise' if gold.manifest['reproducibility']['bitwise'] else 'NOT bitwise'}"
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
    return lines, outcome


def laws(
    packer_cmd: str | None,
    packer: str | None,
    examples: int,
    seed: int,
    timeout: float,
    packer_digest: str | None = None,
    export_vectors: Path | None = None,
) -> tuple[list[str], bool]:
    """Judge a packer on the packing laws (harness.laws), or (``export_vectors``) write the packing test
    vectors of the harness's own packer, at the law geometry, for an engine's own tests."""
    from harness.laws import LAW_GEOMETRY, check_packer
    from harness.packers import packer_from_options

    if export_vectors is not None:
        from harness.packers.vector_files import export

        if packer_cmd is not None or packer is not None or packer_digest is not None:
            raise HarnessError(
                "--export-vectors: the vectors are the harness's own packer's answers; give no "
                "--packer-cmd, --packer or --packer-digest with it"
            )
        return export(export_vectors, LAW_GEOMETRY), True
    with closing(
        packer_from_options(
            packer_cmd,
            packer,
            LAW_GEOMETRY,
            timeout_s=timeout,  # a crash: exit 2, no restart
            digest=packer_digest,
        )
    ) as judged:
        report = check_packer(judged, examples=examples, seed=seed)
    return [report.render()], report.ok
