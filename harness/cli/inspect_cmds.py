"""``harness shapes | ledger | history``: which shapes the engine may use, each shape's history, and its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import answer, app

LOCATION = (
    "Without --ledger and --manifest: --golden GOLDEN reads the files beside it (GOLDEN/../ledger.json "
    "and promoted-shapes.json, as nightly writes them); with neither, the one ledger among ./ledger.json "
    "(`harness promote`'s default), ./goldens/ledger.json and ./goldens/*/ledger.json, with the manifest "
    "beside it; none or several found: one line naming them (nothing is created)."
)
GoldenOpt = Annotated[
    Path | None,
    typer.Option(
        "--golden",
        help="A golden nightly ran against: read the ledger and manifest beside it (as nightly writes them).",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print the same facts as one JSON document on stdout "
        "(schema in docs/schemas.md); exit statuses unchanged, errors one line on "
        "stderr.",
    ),
]


SHAPES_HELP = (
    "Which k the engine may use, per model, device kind, numerics profile, packer and OP; since when, by "
    "which run.\n\nWith --may, the engine's question for one packer: a yes needs that packer's own "
    "evidence (or a release shape); evidence for another packer never counts.\n\n" + LOCATION
)
LEDGER_HELP = (
    "A shape's history per packer: every run that judged it, its verdict, and the state it left.\n\n" + LOCATION
)


@app.command("shapes", help=SHAPES_HELP)
def shapes_cmd(
    manifest: Annotated[
        Path | None,
        typer.Option(
            help="Promoted-shapes manifest the engine reads: re-derived from the ledger and refused if it differs."
        ),
    ] = None,
    ledger: Annotated[
        Path | None,
        typer.Option(
            help="Its ledger (the truth): an interrupted promotion is finished first, into the files its journal names."
        ),
    ] = None,
    golden: GoldenOpt = None,
    may: Annotated[
        bool,
        typer.Option(
            "--may",
            help="Answer one question instead: may --packer use --k for --op on "
            "--device? Exit 0 yes, 1 no, one line why. Needs a ledger (--ledger, --golden "
            "or the one found).",
        ),
    ] = False,
    packer: Annotated[
        str | None,
        typer.Option(
            help="With --may: the packer identity (its describe()['identity'], e.g. harness/1.2+0123456789ab)."
        ),
    ] = None,
    k: Annotated[int | None, typer.Option("--k", min=1, help="With --may: blocks per call.")] = None,
    op: Annotated[int | None, typer.Option("--op", min=0, max=2, help="With --may: the OP (0, 1 or 2).")] = None,
    device: Annotated[str | None, typer.Option(help="With --may: the device kind ('cpu', 'NVIDIA H200', ...).")] = None,
    fingerprint: Annotated[
        str | None,
        typer.Option(
            help="With --may: the model fingerprint (a prefix is enough; "
            "needed when the manifest holds several models)."
        ),
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="With --may: the numerics profile (needed when several match).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    from harness.pipeline.commands import inspect as inspect_commands  # deferred: its imports are heavy (start-up)

    where = inspect_commands.Where(ledger, manifest, golden)
    question = inspect_commands.MayQuestion(packer, k, op, device, fingerprint, profile) if may else None
    answer(inspect_commands.shapes(where, question, as_json))


@app.command("ledger", help=LEDGER_HELP)
def ledger_cmd(
    ledger: Annotated[Path | None, typer.Option(help="Ledger file (default: see below).")] = None,
    golden: GoldenOpt = None,
    shape: Annotated[int | None, typer.Option(min=1, help="Only this shape (blocks per call).")] = None,
    model: Annotated[str | None, typer.Option(help="Only models whose fingerprint starts with this.")] = None,
    device: Annotated[str | None, typer.Option(help="Only this device kind ('cpu', 'NVIDIA H200', ...).")] = None,
    packer: Annotated[
        str | None, typer.Option(help="Only this packer identity (each packer has its own history).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    from harness.pipeline.commands import inspect as inspect_commands  # deferred: its imports are heavy (start-up)

    only = inspect_commands.LedgerFilter(shape, model, device, packer)
    answer(inspect_commands.ledger(inspect_commands.Where(ledger, None, golden), only, as_json))


HISTORY_HELP = (
    "The figures behind a shape's verdicts, night after night: per committed score (one ledger commit) "
    "and gated metric of --shape and --op, its observed value, the limit allowed, the margin (the "
    "share of the limit used: observed/allowed for '<=' limits, (1-observed)/(1-allowed) for cosine "
    "'>=' limits; 1 = at the limit, undefined where neither applies) and whether it held. Read from "
    "LEDGER.history/ (one Parquet part per commit, written by `harness promote` and nightly in the "
    "ledger's own transaction; DuckDB, pandas or polars read the folder as one table). Parts past "
    "the ledger's commit (a killed promote's) are ignored.\n\n" + LOCATION
)


@app.command("history", help=HISTORY_HELP)
def history_cmd(
    shape: Annotated[int, typer.Option(min=1, help="The shape (blocks per call).")],
    op: Annotated[int, typer.Option("--op", min=0, max=2, help="The OP (0, 1 or 2).")] = 0,
    metric: Annotated[
        str | None, typer.Option(help="Only this metric (max_abs, min_cosine, ...; default: every gated metric).")
    ] = None,
    ledger: Annotated[Path | None, typer.Option(help="Ledger file (default: see below).")] = None,
    golden: GoldenOpt = None,
    device: Annotated[str | None, typer.Option(help="Only this device kind ('cpu', 'NVIDIA H200', ...).")] = None,
    profile: Annotated[str | None, typer.Option(help="Only this numerics profile.")] = None,
    packer: Annotated[str | None, typer.Option(help="Only this packer identity.")] = None,
    as_json: JsonOpt = False,
) -> None:
    from harness.pipeline.commands import inspect as inspect_commands  # deferred: its imports are heavy (start-up)

    only = inspect_commands.SeriesFilter(shape, op, metric, device, profile, packer)
    answer(inspect_commands.history(inspect_commands.Where(ledger, None, golden), only, as_json))
