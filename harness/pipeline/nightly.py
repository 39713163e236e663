"""The nightly job: one command for the GPU CI job (CPU too), failing loudly and specifically.

run every candidate shape, interleaved with the exact lane (the golden's reproduction) -> score
(once, while the lanes run: :mod:`harness.pipeline.live_score`; a shard's after them) -> ledger and
promoted-shapes manifest, one transaction (revoke what fails), after the canaries and the localisation of
failures (best effort; a difference at the network's input is no numerics, and the cause says so) ->
sign-off report + JUnit -> exit 0 only when everything holds.

Every output location (the folder, the ledger, the manifest, the ledger's history) is checked before the
first network call (:func:`harness.pipeline.nightly_job.check_outputs`). With ``shard`` it runs a
deterministic part of the corpus and stops after scoring its part; :func:`merge` combines the
shards into one run, one score, one ledger update and one report.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from golden.runs import Run, load_run, merge_runs
from golden.store import Golden, load_golden
from harness.base.errors import EXIT_FAIL, EXIT_PASS, HarnessError, clip_list, committed, step
from harness.base.fsio import atomic_write, is_temporary
from harness.base.jsonio import write_json_atomic
from harness.base.outputset import output_set
from harness.base.overlap import import_meanwhile
from harness.compute.metrics import start_warming
from harness.data.schemas.config_file import ConfigFile
from harness.ledger.committed import committed_by, held_to_ledger
from harness.ledger.ledger_history import read_history
from harness.ledger.ledger_store import beside_golden, read_consistent
from harness.ledger.margins import margins_view
from harness.ledger.promotion import packer_of, release_shapes_of
from harness.ledger.score_check import check_score
from harness.packers.packing import HARNESS_PACKER, Packer
from harness.pipeline.backends import load_model
from harness.pipeline.canaries import blind_line, not_planted, plant, with_canaries
from harness.pipeline.input_findings import with_input_findings
from harness.pipeline.live_score import LiveScore, live_score
from harness.pipeline.load_sweep import Sweep, attach, check_sweep, nightly_sweep
from harness.pipeline.nightly_job import MEMBERS, SET, NightlyJob, NightlyOutcome, NightOutputs, check_outputs
from harness.pipeline.promote import engine_manifest, promote
from harness.pipeline.run import RunOptions, plan_for, run_shapes, scoring_fields
from harness.pipeline.score import score_run, write_score
from harness.progress import progress_bar
from lanes.backends.backend_numerics import under_backend_numerics

if TYPE_CHECKING:
    from harness.data.schemas.results import CanaryRun, Score
    from harness.ledger.margins import MarginsView
    from harness.localisation.first_divergence import Inferring, Localised  # imports torch
    from lanes.backends.backend_api import Backend

FINAL = {
    "score": "score.json",
    "json": "report/report.json",
    "md": "report/report.md",
    "html": "report/report.html",
    "junit": "junit.xml",
    "summary": "summary.txt",
}
NOT_PROMOTED = "not promoted (--no-promote): the ledger was not changed"
NO_BACKEND = "a nightly of merged shards or Ray workers: canaries are planted where a model and backend run"


@under_backend_numerics
def nightly(
    job: NightlyJob,
    backend: Backend,
    packer: Packer = HARNESS_PACKER,
    load_model: Callable[[], Inferring] | None = None,
    outputs_checked: bool = False,
) -> NightlyOutcome:
    """The nightly (module doc) of ``job`` (its Ray options aside: :func:`harness.pipeline.ray_jobs.nightly_ray`)
    on ``backend``, the fast lane packing with ``packer``; the packing laws are judged with the job's
    ``[packer] laws_examples``. ``job.no_promote``: score, report, JUnit and localise, but neither lock, create
    nor change the ledger and manifest (trying an option must not change what the engine obeys); the report
    reads the manifest as the engine does, to say what it still allows. ``outputs_checked``: the caller ran
    :func:`check_outputs` (the command does, before it builds the model)."""
    config, out, shard, no_promote, show_progress = job.config, job.out, job.part, job.no_promote, job.progress
    golden = load_golden(job.golden, expect_fingerprint=backend.fingerprint)
    if outputs_checked:
        ledger_path, manifest_path = beside_golden(golden.path, job.ledger, job.manifest)
    else:
        ledger_path, manifest_path = check_outputs(
            config, golden.path, out, job.ledger, job.manifest, promotes=shard is None and not no_promote
        )
    check_sweep(config, backend, shard)  # [load]: a Triton backend, the whole corpus; before any work
    plan = plan_for(config)
    blocks = golden.blocks if shard is None else sum(1 for b in golden.block_ids() if shard.owns(b))
    where = (
        f"the shard's score at {out / 'score.json'}"
        if shard is not None
        else f"report at {out / 'report' / 'report.html'}"
        + ("" if no_promote else f"; ledger {ledger_path}, manifest {manifest_path}")
    )
    with ExitStack() as stack:
        # scored while the lanes run (harness.pipeline.live_score); a shard keeps post-hoc scoring: its score alone
        live = (
            None
            if shard is not None
            else stack.enter_context(live_score(golden, scoring_fields(plan, config), plan.lanes(), config.tolerances))
        )
        with progress_bar(
            f"nightly {blocks} blocks, shapes {clip_list(plan.shapes)}",
            plan.calls(blocks),
            show_progress,
            announce=f"writing to {out}/ ({where} when done)",
        ) as tick:
            run = run_shapes(
                golden,
                backend,
                plan,
                out / "runs",
                config,
                RunOptions(
                    packer=packer,
                    shard=shard,
                    progress=tick,
                    laws_examples=config.packer.laws_examples,
                    observer=None if live is None else live.sink,
                    on_first_queued=_meanwhile,
                ),
            )
        committed(run.path, "the run")
        if shard is not None:
            with step("score shard"):
                score = score_run(golden, run, config.tolerances)
                with output_set(out, SET, MEMBERS) as stage:  # a shard's set is its score alone
                    write_score(stage / "score.json", score)
                path = out / "score.json"
                committed(path, "the shard's score")
            return NightlyOutcome(
                EXIT_PASS,
                f"shard {shard}: {score.corpus.blocks} blocks run "
                f"({score.verdict} on this shard alone); combine shards with `harness merge`",
                {"run": run.path, "score": path},
                score,
            )
        load = nightly_sweep(config, golden, backend, packer, show_progress)  # None unless [load] concurrency
        loader = load_model if job.localise else None
        if loader is None and job.localise:
            loader = _model_loader(config, backend, run)
        return finalize(
            config,
            golden,
            run,
            NightOutputs(out, ledger_path, manifest_path, no_promote),
            loader,
            NightExtras(load, live, show_progress, lambda score: plant(config, golden, run, score, backend, packer)),
        )


def merge(
    config: ConfigFile,
    golden_path: Path,
    shard_dirs: list[Path],
    out: Path,
    ledger_path: Path | None = None,
    manifest_path: Path | None = None,
    localise: bool = True,
    no_promote: bool = False,
) -> NightlyOutcome:
    golden = load_golden(golden_path)
    ledger_path, manifest_path = check_outputs(
        config,
        golden.path,
        out,
        ledger_path,
        manifest_path,
        promotes=not no_promote,
        what="merge output folder",
        inputs=[("shard folder", d) for d in shard_dirs],
    )
    runs = []
    for d in shard_dirs:
        d = Path(d)
        found = (
            sorted(p for p in (d / "runs").glob("*/manifest.json") if not is_temporary(p.parent.name))
            if (d / "runs").is_dir()
            else []
        )  # a run killed while being written is no shard run
        if (d / "manifest.json").is_file():
            found = [d / "manifest.json"]
        if len(found) != 1:
            raise HarnessError(
                f"{d}: expected one shard run (a sharded nightly's output folder, nightly.shard), found {len(found)}"
            )
        runs.append(load_run(found[0].parent))
    for r in runs:
        if r.golden_id != golden.golden_id:
            raise HarnessError(f"{r.path}: ran against golden {r.golden_id}, not {golden.golden_id}")
    with step("merge shard runs"):
        merged = merge_runs(out / "runs", runs, golden.block_ids())
    committed(merged.path, "the merged run")
    loader = _model_loader(config, None, merged) if localise else None
    return finalize(config, golden, merged, NightOutputs(out, ledger_path, manifest_path, no_promote), loader)


@dataclass(frozen=True)
class NightExtras:
    """What a one-process nightly brings to :func:`finalize` beside its run: the load sweep (None: none), the score
    accumulated while the lanes ran (None: scored from the run's files), progress, and the planting of the
    night's canaries given the real lanes' score (None: no model and backend here, a merge or a Ray nightly)."""

    load: Sweep | None = None
    live: LiveScore | None = None
    progress: bool = False
    canaries: Callable[[Score], CanaryRun] | None = None


def finalize(
    config: ConfigFile,
    golden: Golden,
    run: Run,
    outputs: NightOutputs,
    load_model: Callable[[], Inferring] | None,
    extras: NightExtras = NightExtras(),
) -> NightlyOutcome:
    """Score (once), promote/revoke, localise (best effort), report and JUnit, written where ``outputs`` says.

    The ledger and manifest are their own transaction (:mod:`harness.ledger.ledger_store`); the nightly's own outputs
    (score, localisation, report, JUnit, summary) are one set (:mod:`harness.base.outputset`), written into a fresh
    folder and published in one step after the ledger commit: a reader of ``out`` sees this nightly's set or the
    previous one, never a mix. ``no_promote``: the score is verified as promotion would, but the ledger and
    manifest are neither written, created nor locked (the report reads the manifest, lock-free, as the engine
    does: what it still allows). ``live``: the score accumulated while the
    lanes ran (:mod:`harness.pipeline.live_score`), checked against the run here; None: scored from the run's
    files (a merge, a Ray nightly). ``canaries``: plants the night's canaries (:mod:`harness.pipeline.canaries`)
    given the real lanes' score (None: no model and backend here, a merge or a Ray nightly: recorded as not
    planted); a canary the gate did not refuse fails the night, which then promotes nothing."""
    load, live, progress, canaries = extras.load, extras.live, extras.progress, extras.canaries
    from reports import (  # deferred: imports jinja2, markupsafe (start-up)
        ReportContext,
        evidence_warnings,
        summary_line,
        write_junit,
        write_report,
    )

    out, ledger_path, manifest_path, no_promote = outputs.out, outputs.ledger, outputs.manifest, outputs.no_promote
    # the night's outputs by name (FINAL's, and the NightlyOutcome's paths the CLI and the Ray jobs read by name)
    paths = {"run": run.path, **{key: out / rel for key, rel in FINAL.items()}}
    with output_set(out, SET, MEMBERS) as stage:
        with step("score"):
            score = live.result(run) if live is not None else score_run(golden, run, config.tolerances)
            score = score if load is None else attach(score, load, config)  # the sweep can refuse a shape
        with step("canaries"):
            planted = canaries(score) if canaries is not None else not_planted(NO_BACKEND)
            score = with_canaries(score, planted)
        localisation: dict[str, dict[str, Localised]] = {}  # localisation.json's shapes, as localisation wrote them
        if load_model is not None and any(shape.verdict == "fail" for shape in score.shapes.values()):
            with step("localise"):  # only failing shapes are localised: torch is imported only then
                from harness.pipeline.localise import localise_failures  # deferred: imports torch (start-up)

                localisation = localise_failures(
                    score, golden, run, load_model, config.localise.floor_multiple, spill=stage, progress=progress
                )
            # a difference already at the network's input is no kernel numerics: the cause says so (re-derived)
            score = with_input_findings(score, localisation)
        write_score(stage / "score.json", score)
        if localisation:
            write_json_atomic(
                stage / "localisation.json",
                {"kind": "harness.localisation", "format": 1, "score_digest": score.digest, "shapes": localisation},
            )
            paths["localisation"] = out / "localisation.json"  # an output by its name (FINAL, the outcome's paths)
        score_path = str(paths["score"])  # an output by its name (FINAL)
        blind = not planted.seen  # the gate did not refuse a planted defect: it may promote nothing tonight
        if no_promote or blind:
            with step("verify score"):
                check_score(score, golden.manifest, run.manifest, config.tolerances, score_path)
            transitions = None
        else:
            transitions = promote(score, golden.manifest, run.manifest, config, ledger_path, manifest_path, score_path)
            paths["ledger"], paths["promoted"] = ledger_path, manifest_path  # the outcome's paths, by output name
        with step("report"):
            committed_now = not (no_promote or blind)
            ledger, promoted = read_consistent(ledger_path, manifest_path) if committed_now else (None, None)
            margins = None if not committed_now else _margins(config, score, ledger_path)  # as committed
            # the file the engine reads: as committed; a night that did not promote reads it as the engine does
            engine = engine_manifest(score, manifest_path, promoted)
            write_report(
                stage / "report",
                score,
                ReportContext(
                    ledger=ledger,
                    transitions=transitions,
                    localisation=localisation,
                    promoted=committed_now,
                    margins=margins,
                    engine=engine,
                ),
            )
            write_junit(stage / "junit.xml", score, None, margins)
            summary = summary_line(score, None, localisation)
            if no_promote:  # "PASS: 2 shapes promoted" would be untrue: they passed, nothing was promoted
                summary = summary.replace(" promoted (k=", " passed (k=", 1) + f"; {NOT_PROMOTED}"
            code = EXIT_PASS if score.verdict == "pass" else EXIT_FAIL
            if blind:
                summary, code = blind_line(planted), EXIT_FAIL
            if ledger is not None:  # the ledger as committed, not the score, has the last word
                summary, code = held_to_ledger(
                    summary,
                    code,
                    committed_by(ledger, score.run.id, score.digest, str(ledger_path)),
                    needing_events(score, config),
                    score.verification,
                )
            warnings = evidence_warnings(score) + (margins.warnings if margins is not None else [])
            summary, code = with_warnings(summary, code, warnings, config.history.fail_on_warning)
            atomic_write(stage / "summary.txt", summary + "\n")
    committed(out, "the nightly's score, report, JUnit and summary")
    return NightlyOutcome(code, summary, paths, score, transitions)


def needing_events(score: Score, config: ConfigFile) -> list[int]:
    """The shapes of ``score`` that a commit gives a ledger event (all but the release's own shapes)."""
    release = release_shapes_of(config.release_shapes_json())
    return [int(k) for k in score.shapes if int(k) not in release]


def _meanwhile() -> None:
    """Once the first calls are queued: the score's kernels (live, or a shard's post-hoc) and the report's
    modules, while the device has work."""
    start_warming()
    import_meanwhile("reports")


def _margins(config: ConfigFile, score: Score, ledger_path: Path) -> MarginsView:
    """The margin trends of this score's key (device kind, numerics profile, packer) over the ledger's history,
    read after the ledger commit, so tonight is the last night of every series."""

    return margins_view(
        read_history(ledger_path),
        config.history,
        device_kind=score.device_kind,
        numerics_profile=score.numerics_profile,
        packer_identity=packer_of(score)[0],
    )


def with_warnings(summary: str, code: int, warnings: list[str], fail_on_warning: bool) -> tuple[str, int]:
    """The summary with one ``warning: ...`` line per warning before it (the summary stays the last line): the
    evidence's (a pair beyond the release's floor, within the mode's limits) and the margins'. With
    ``fail_on_warning`` a warning turns a night whose verdicts held into exit 1, its summary line saying so;
    without it the exit status is the verdicts'."""
    if not warnings:
        return summary, code
    n = len(warnings)
    if fail_on_warning and code == EXIT_PASS:
        summary = (
            f"FAIL: the verdicts held ({summary.removeprefix('PASS: ')}) but {n} "
            f"warning{'s' if n != 1 else ''} failed the nightly (history.fail_on_warning = true)"
        )
        code = EXIT_FAIL
    return "\n".join([*(f"warning: {w}" for w in warnings), summary]), code


def _model_loader(config: ConfigFile, backend: Backend | None, run: Run) -> Callable[[], Inferring]:
    """The model to localise with: the in-process backend's own, else the configured model on the
    run's device (localisation must see the kernels the run saw)."""
    model = getattr(backend, "model", None)
    if model is not None:
        return lambda: model

    def load() -> Inferring:

        recorded = run.manifest.environment.model_dump(mode="json")  # "device": an open key some runs record
        return load_model(config, recorded.get("device", config.release.device))  # an open key of the environment

    return load
