"""``harness shapes | ledger``: which shapes the engine may use, and each shape's history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, say


@app.command("shapes")
def shapes_cmd(
    manifest: Annotated[Path | None, typer.Option(help="Promoted-shapes manifest the engine reads: re-derived from "
                                                  "--ledger and refused if it differs.")] = None,
    ledger: Annotated[Path | None, typer.Option(help="Its ledger (the truth): an interrupted promotion is finished "
                                                "first, into the files its journal names.")] = None,
    may: Annotated[bool, typer.Option("--may", help="Answer one question instead: may --packer use --k for --op on "
                                      "--device? Exit 0 yes, 1 no, one line why. Needs --ledger.")] = False,
    packer: Annotated[str | None, typer.Option(help="With --may: the packer identity (its describe()['identity'], "
                                               "e.g. harness/1.2+0123456789ab).")] = None,
    k: Annotated[int | None, typer.Option("--k", min=1, help="With --may: blocks per call.")] = None,
    op: Annotated[int | None, typer.Option("--op", min=0, max=2, help="With --may: the OP (0, 1 or 2).")] = None,
    device: Annotated[str | None, typer.Option(help="With --may: the device kind ('cpu', 'NVIDIA H200', ...).")] =
    None,
    fingerprint: Annotated[str | None, typer.Option(help="With --may: the model fingerprint (a prefix is enough; "
                                                    "needed when the manifest holds several models).")] = None,
    profile: Annotated[str | None, typer.Option(help="With --may: the numerics profile (needed when several "
                                                "match).")] = None,
) -> None:
    """Which k the engine may use, per model, device kind, numerics profile, packer and OP; since when, by which run.

    With --may, the engine's question for one packer: a yes needs that packer's own evidence (or a
    release shape); evidence for another packer never counts.
    """
    from harness.errors import HarnessError
    from harness.ledger_store import load_manifest, read_consistent
    from harness.pipeline.inspect import describe_shapes
    from harness.promotion import derive_manifest, may_use

    if may:
        missing = [f"--{n}" for n, v in (("ledger", ledger), ("packer", packer), ("k", k), ("op", op),
                                         ("device", device)) if v is None]
        if missing:
            raise HarnessError(f"shapes --may: needs {', '.join(missing)} (the answer comes from the ledger, for "
                               "one packer, shape, OP and device)")
    if ledger is None and manifest is None:
        raise HarnessError("shapes: give --ledger (and --manifest to check the engine's copy against it)")
    if ledger is not None:
        book, checked = read_consistent(ledger, manifest)  # refuses a manifest that is not the ledger's own
        if manifest is not None and checked is None:
            raise HarnessError(f"{manifest}: promoted-shapes manifest not found (the ledger {ledger} exists: "
                               "`harness promote` writes it)")
        shown = checked if checked is not None else derive_manifest(book)
    else:
        shown = load_manifest(manifest)
    if may:
        yes, why = may_use(shown, packer, k, str(op), device, fingerprint, profile)
        say(why)
        if not yes:
            raise typer.Exit(1)
        return
    for line in describe_shapes(shown, checked=ledger is not None):
        say(line)


@app.command("ledger")
def ledger_cmd(
    ledger: Annotated[Path, typer.Option(help="Ledger file.")] = Path("ledger.json"),
    shape: Annotated[int | None, typer.Option(min=1, help="Only this shape (blocks per call).")] = None,
    model: Annotated[str | None, typer.Option(help="Only models whose fingerprint starts with this.")] = None,
    device: Annotated[str | None, typer.Option(help="Only this device kind ('cpu', 'NVIDIA H200', ...).")] = None,
    packer: Annotated[str | None, typer.Option(help="Only this packer identity (each packer has its own history).")] =
    None,
) -> None:
    """A shape's history per packer: every run that judged it, its verdict, and the state it left."""
    from harness.ledger_store import read_consistent
    from harness.pipeline.inspect import describe_history

    book, _ = read_consistent(ledger)  # an interrupted promotion finished first (or reported, read-only)
    for line in describe_history(book, shape, model, device, packer):
        say(line)
