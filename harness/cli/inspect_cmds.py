"""``harness shapes | ledger | history``: which shapes the engine may use, each shape's history, and its figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.app import app, say
from harness.data.errors import HarnessError

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
    from harness.ledger.ledger_store import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        load_manifest,
        read_consistent,
    )
    from harness.ledger.promoted_manifest import (  # deferred: imports numpy, pydantic (start-up)
        derive_manifest,
        may_use,
    )
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        describe_shapes,
        locate_ledger,
        shapes_document,
    )

    if may:
        missing = [f"--{n}" for n, v in (("packer", packer), ("k", k), ("op", op), ("device", device)) if v is None]
        if missing:
            raise HarnessError(
                f"shapes --may: needs {', '.join(missing)} (the answer comes from the ledger, for "
                "one packer, shape, OP and device)"
            )
    files = locate_ledger(ledger, manifest, golden, "shapes")
    if files["ledger"] is not None:
        book, checked = read_consistent(files["ledger"], files["manifest"])  # refuses a manifest not the ledger's own
        if files["manifest"] is not None and checked is None:
            raise HarnessError(
                f"{files['manifest']}: promoted-shapes manifest not found (the ledger {files['ledger']} "
                "exists: `harness promote` writes it)"
            )
        shown = checked if checked is not None else derive_manifest(book)
    elif may:
        raise HarnessError(
            "shapes --may: needs a ledger (--ledger, or --golden for the one beside it), not a manifest alone"
        )
    else:
        shown = load_manifest(files["manifest"])
    answer: dict[str, Any] | None = None
    if may:
        assert packer is not None and k is not None and op is not None and device is not None
        yes, why = may_use(shown, packer, k, str(op), device, fingerprint, profile)
        answer = {
            "packer": packer,
            "k": k,
            "op": str(op),
            "device": device,
            "fingerprint": fingerprint,
            "profile": profile,
            "allowed": yes,
            "why": why,
        }
    if as_json:
        say(shapes_document(shown, files, checked=files["ledger"] is not None, may=answer))
    elif answer is not None:
        say(answer["why"])
    else:
        for line in describe_shapes(shown, checked=files["ledger"] is not None):
            say(line)
    if answer is not None and not answer["allowed"]:
        raise typer.Exit(1)


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
    from harness.ledger.ledger_store import read_consistent  # deferred: imports numpy, pyarrow, pydantic (start-up)
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        describe_history,
        history_document,
        locate_ledger,
    )

    files = locate_ledger(ledger, None, golden, "ledger")
    files["manifest"] = None  # the history is the ledger's alone
    book, _ = read_consistent(files["ledger"])  # an interrupted promotion finished first (or reported, read-only)
    if as_json:
        say(history_document(book, files, shape, model, device, packer))
        return
    for line in describe_history(book, shape, model, device, packer):
        say(line)


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
    from harness.ledger.history_store import series  # deferred: imports numpy, pyarrow, pydantic (start-up)
    from harness.ledger.ledger_history import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        ledger_and_history,
    )
    from harness.pipeline.inspect import (  # deferred: imports numpy, pyarrow, pydantic (start-up)
        describe_series,
        locate_ledger,
        series_document,
    )

    files = locate_ledger(ledger, None, golden, "history")
    files["manifest"] = None  # the history is the ledger's alone
    book, rows = ledger_and_history(files["ledger"])  # an interrupted promotion finished first
    picked = series(
        rows, shape=shape, op=op, metric=metric, device_kind=device, numerics_profile=profile, packer_identity=packer
    )
    if as_json:
        filters = {"shape": shape, "op": op, "metric": metric, "device": device, "profile": profile, "packer": packer}
        say(series_document(picked, book.seq, files, filters))
        return
    for line in describe_series(picked, book.seq, shape, op):
        say(line)
