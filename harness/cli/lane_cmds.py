"""``harness run | score | promote | report``: the nightly's steps, one at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import (
    ArrangementsOpt,
    BackendOpt,
    ConfigOpt,
    DeviceOpt,
    ModelOpt,
    ProgressOpt,
    RepeatsOpt,
    SetOpt,
    ShapesOpt,
    ToleranceOpt,
    answer,
    app,
    resolve_config,
)
from harness.data.limits import MAX_LAWS_EXAMPLES


@app.command("run")
def run_cmd(
    golden: Annotated[
        Path, typer.Option(help="Golden to run against (its corpus; its WEIGHTS/IDX for isolated voiceprint inputs).")
    ],
    runs: Annotated[Path, typer.Option(help="Folder for run directories.")] = Path("runs"),
    shapes: ShapesOpt = None,
    pad_to_fixed: Annotated[
        bool | None,
        typer.Option(
            "--pad-to-fixed/--no-pad",
            help="Pad every pack to exactly k "
            "blocks with empty blocks (a fixed compiled batch). Overrides "
            "[shapes] pad_to_fixed.",
        ),
    ] = None,
    config: ConfigOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = None,
    backend: BackendOpt = None,
    sets: SetOpt = None,
    progress: ProgressOpt = True,
    arrangements: ArrangementsOpt = None,
    repeats: RepeatsOpt = None,
) -> None:
    """Run the packed shapes over a golden's corpus, interleaved block group by group with the exact lane.

    Writes a run directory: the exact lane (the golden's reproduction, fair timing) and every shape.
    The packer and Triton details are configuration keys: --set packer.cmd=... (docs/configuration.md).
    """
    from harness.pipeline.commands import lane as lane_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(
        config,
        model,
        device,
        shapes=shapes,
        sets=sets,
        backend=backend,
        arrangements=arrangements,
        repeats=repeats,
        command="run",
    )
    # --pad-to-fixed is the plan's, not the file's: the run's manifest records the configuration as it was
    answer(lane_commands.run(cfg, golden, runs, progress, pad_to_fixed))


@app.command("score")
def score_cmd(
    golden: Annotated[Path, typer.Option(help="Golden directory the run ran against.")],
    run: Annotated[Path, typer.Option(help="Run directory (harness run / nightly).")],
    out: Annotated[Path, typer.Option(help="Score file to write (score.json).")] = Path("score.json"),
    tolerance: ToleranceOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
) -> None:
    """Judge a run against its golden, per OP and shape, with the configured tolerances.

    Exit 1 when a shape fails or the run's exact lane did not reproduce the golden. Localise a
    failure with `harness nightly` (it names the first diverging layer).
    """
    from harness.pipeline.commands import lane as lane_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, tolerance=tolerance, sets=sets, command="score")
    answer(lane_commands.score(cfg, golden, run, out))


@app.command("promote")
def promote_cmd(
    score: Annotated[Path, typer.Option(help="Score file (harness score / nightly).")],
    ledger: Annotated[Path, typer.Option(help="Ledger of every shape's history (created if missing).")] = Path(
        "ledger.json"
    ),
    manifest: Annotated[
        Path,
        typer.Option(
            help="Promoted-shapes manifest the engine reads (derived from the ledger, rewritten on every promotion)."
        ),
    ] = Path("promoted-shapes.json"),
    golden: Annotated[Path | None, typer.Option(help="The golden the score judged, if it moved since.")] = None,
    run: Annotated[Path | None, typer.Option(help="The run the score judged, if it moved since.")] = None,
    tolerance: ToleranceOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
) -> None:
    """Promote the shapes a score passed; revoke promoted shapes it failed.

    The score is checked first: every verdict re-derived from its checks and limits, its tolerances
    the configuration's, its run and golden the ones on disk, its run not already (or more recently)
    in the ledger. Ledger and manifest are written as one locked, journaled transaction.
    """
    from harness.pipeline.commands import lane as lane_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, tolerance=tolerance, sets=sets, command="promote")
    answer(lane_commands.promote(cfg, score, ledger, manifest, golden, run))


@app.command("report")
def report_cmd(
    score: Annotated[Path, typer.Option(help="Score file.")],
    out: Annotated[Path, typer.Option(help="Folder for report.html, report.md, report.json.")] = Path("report"),
    ledger: Annotated[
        Path | None, typer.Option(help="Ledger, to show promoted and revoked shapes (must exist).")
    ] = None,
    manifest: Annotated[Path | None, typer.Option(help="Promoted-shapes manifest, checked against the ledger.")] = None,
    localisation: Annotated[Path | None, typer.Option(help="localisation.json of the same score (nightly).")] = None,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
) -> None:
    """Write the release sign-off report (self-contained HTML, Markdown, JSON) from a score."""
    from harness.pipeline.commands import lane as lane_commands  # deferred: its imports are heavy (start-up)

    answer(lane_commands.report(score, out, ledger, manifest, junit, localisation))


@app.command("laws")
def laws_cmd(
    packer_cmd: Annotated[
        str | None,
        typer.Option(
            "--packer-cmd",
            help="An external packer: a command speaking the "
            "wire protocol on stdin/stdout (docs/packer-protocol.md), e.g. "
            '"python examples/packer_engine_example.py".',
        ),
    ] = None,
    packer: Annotated[
        str | None,
        typer.Option(
            "--packer",
            help="A Python packer: 'package.module:function' (or an "
            "object with pack/unpack). Default: the harness's own packer.",
        ),
    ] = None,
    examples: Annotated[int, typer.Option(help="Examples per law (hypothesis).", min=1, max=MAX_LAWS_EXAMPLES)] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the example search (same seed, same verdict).")] = 0,
    timeout: Annotated[
        float,
        typer.Option(
            help="Seconds an external packer may take per request (its start-up, "
            "up to the handshake, may take at least 20 s)."
        ),
    ] = 30.0,
    packer_digest: Annotated[
        str | None,
        typer.Option(
            "--packer-digest",
            help="sha256 of the --packer-cmd program (e.g. its release binary): its identity takes it in "
            "place of hashing the program's file (docs/packer-protocol.md, Identity).",
        ),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Also write the verdict as JSON here, for a CI: every law's status, counts and minimal "
            "counterexample, the findings, the packer's identity (docs/schemas.md, LawsReportFile).",
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(help="Also write JUnit XML here: one test case per law, a broken one failed with its finding."),
    ] = None,
    export_vectors: Annotated[
        Path | None,
        typer.Option(
            "--export-vectors",
            help="Instead of judging a packer: "
            "write the packing test vectors (JSON requests and the "
            "harness packer's answers, index.json) into this new or "
            "empty folder, for an engine's own tests.",
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="With --export-vectors: replace an existing vectors folder (one that holds exported vectors "
            "and nothing else) in one step; it is never left half written.",
        ),
    ] = False,
) -> None:
    """Judge a packer (the engine's, over the wire) on the packing laws.

    Prints the packer's identity (the key of its promotions in the ledger), one line per law (broken: on how many of
    how many examples, and its minimal counterexample), then each finding once: the minimal block set, the request
    the packer produced and what differed. Exit 0 when every law holds; 1 when one is broken (or not judged on
    every example); 2 when the packer cannot be run (it does not start, fails the hello handshake, ...).
    With --export-vectors: write the test vectors (docs/packer-protocol.md, "Test vectors") and exit 0.
    """
    from harness.pipeline.commands import lane as lane_commands  # deferred: its imports are heavy (start-up)

    outputs = lane_commands.LawsOutputs(json_out, junit, export_vectors, replace)
    answer(lane_commands.laws(packer_cmd, packer, examples, seed, timeout, packer_digest, outputs))
