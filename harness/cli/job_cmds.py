"""``harness nightly | merge | serve | demo``: whole jobs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated

import typer

from harness.base.errors import HarnessError
from harness.cli.app import (
    ArrangementsOpt,
    BackendOpt,
    ConfigOpt,
    DeviceOpt,
    ModelOpt,
    ProgressOpt,
    RayOpt,
    RepeatsOpt,
    SetOpt,
    ShapesOpt,
    ToleranceOpt,
    answer,
    app,
    ray_of,
    resolve_config,
    say,
)
from harness.data.limits import MAX_SERVE_INSTANCES

LocaliseOpt = Annotated[
    bool,
    typer.Option(
        "--localise/--no-localise",
        help="Name the first diverging layer of each failing shape (after the verdict is written; best effort).",
    ),
]
NoPromoteOpt = Annotated[
    bool,
    typer.Option(
        "--no-promote",
        help="Score, report, JUnit and localise only: the ledger "
        "and promoted-shapes manifest are not touched (not even created). The "
        "exit status is still the verdict.",
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force", help="Replace the previous output in --out (refused without it; the set is replaced as one unit)."
    ),
]


@app.command("nightly")
def nightly_cmd(
    golden: Annotated[Path, typer.Option(help="Golden directory (recorded on the same device kind).")],
    out: Annotated[
        Path, typer.Option(help="Output folder: runs/, score.json, report/, junit.xml, summary.txt.")
    ] = Path("nightly"),
    config: ConfigOpt = None,
    shapes: ShapesOpt = None,
    model: ModelOpt = None,
    backend: BackendOpt = None,
    device: DeviceOpt = None,
    tolerance: ToleranceOpt = None,
    ray: RayOpt = None,
    sets: SetOpt = None,
    localise: LocaliseOpt = True,
    no_promote: NoPromoteOpt = False,
    force: ForceOpt = False,
    progress: ProgressOpt = True,
    arrangements: ArrangementsOpt = None,
    repeats: RepeatsOpt = None,
) -> None:
    """The nightly CI job: run the candidate shapes interleaved with the exact lane, score, promote or
    revoke, localise failures, write the sign-off report and JUnit.

    Works on a GPU (--device cuda:0) or the CPU. With --ray the corpus is cut in shards run by Ray
    workers (one per GPU), then merged as `harness merge` does. Exit 0 only when everything holds; 1
    with a one-line reason (the last line) otherwise; 2 when the job could not run. Rarely used
    settings (a shard, the ledger's path, the packer, Triton and Ray details) are configuration keys:
    --set TABLE.KEY=VALUE (docs/configuration.md).
    """
    from harness.pipeline.commands import job as job_commands  # deferred: its imports are heavy (start-up)
    from harness.pipeline.nightly_job import NightlyJob  # deferred: imports numpy, pyarrow, pydantic (start-up)

    cfg = resolve_config(
        config,
        model,
        device,
        tolerance,
        shapes,
        sets,
        backend=backend,
        ray=ray,
        arrangements=arrangements,
        repeats=repeats,
        command="nightly",
    )
    if cfg.load.concurrency and cfg.ray.address is not None:
        raise HarnessError(
            "[load] concurrency with --ray: the load sweep runs in a one-process nightly on a Triton backend"
        )
    job = NightlyJob(
        cfg, golden, out, ray_of(cfg), localise=localise, progress=progress, no_promote=no_promote, force=force
    )
    answer(job_commands.nightly(job))


@app.command("merge")
def merge_cmd(
    shards: Annotated[list[Path], typer.Argument(help="Output folders of `harness nightly --set nightly.shard=i/n`.")],
    golden: Annotated[Path, typer.Option(help="The golden the shards ran against.")],
    out: Annotated[Path, typer.Option(help="Output folder for the merged run, score, report, JUnit.")] = Path(
        "nightly-merged"
    ),
    localise: LocaliseOpt = True,
    tolerance: ToleranceOpt = None,
    config: ConfigOpt = None,
    model: ModelOpt = None,
    sets: SetOpt = None,
    no_promote: NoPromoteOpt = False,
    force: ForceOpt = False,
) -> None:
    """Combine shard results into one run, one score, one ledger update and one report.

    Shards must share everything that could change the outputs (golden, shapes, model, device kind,
    library versions, numeric settings, padding, voiceprint inputs, packer): a mismatch is named.
    """
    from harness.pipeline.commands import job as job_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, model, tolerance=tolerance, sets=sets, command="merge")
    job = job_commands.MergeJob(golden, list(shards), out, force, localise, no_promote)
    answer(job_commands.merge(cfg, job))


@app.command("serve")
def serve_cmd(
    config: ConfigOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = None,
    sets: SetOpt = None,
    instances: Annotated[
        int, typer.Option(min=1, max=MAX_SERVE_INSTANCES, help="Model instances (instance_group count).")
    ] = 1,
    model_repository: Annotated[
        Path | None,
        typer.Option(
            "--model-repository",
            help="Serve this model repository "
            "as it is (copied unchanged; the model options above do "
            "not apply), e.g. a team's own diar_nn_g.",
        ),
    ] = None,
) -> None:
    """Serve diar_nn_g on a real Triton server on loopback; stop with Ctrl-C / SIGTERM.

    A signal is serving's normal end: the server is stopped and cleaned up, one line says which
    signal stopped it, and the exit status is 0.

    Uses the tritonserver binary of the nvidia-pytriton wheel (Python backend; install the 'triton'
    extra) and prints the URL to give other commands as --backend.
    """
    from harness.pipeline.commands import job as job_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, model, device=device, sets=sets, command="serve")
    # Ctrl-C / SIGTERM is how serving ends: one line saying so, exit 0 (README, "Exit status")
    answer(job_commands.serve(cfg, instances, model_repository, say))


@app.command("demo")
def demo_cmd(
    out: Annotated[Path | None, typer.Option(help="Output folder (default: harness-out/demo-<time>).")] = None,
    blocks: Annotated[int | None, typer.Option(help="Synthetic corpus size (default: [corpus] blocks).")] = None,
    shapes: ShapesOpt = None,
    model: ModelOpt = None,
    config: ConfigOpt = None,
    progress: ProgressOpt = True,
    sets: SetOpt = None,
) -> None:
    """The main job on the embedded default: corpus, golden, nightly, sign-off report.

    Synthetic corpus, reference model on the CPU: golden record, then the nightly (candidate shapes
    interleaved with the exact lane, score, promote), then the report. Prints where the report is.
    """
    from harness.pipeline.commands import job as job_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, model, shapes=shapes, sets=sets, blocks=blocks, command="demo")
    out = out or Path("harness-out") / f"demo-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    answer(job_commands.demo(cfg, out, progress))
