"""``harness shapes | ledger``: which shapes the engine may use, and each shape's history."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import app, say


@app.command("shapes")
def shapes_cmd(
    manifest: Annotated[Path, typer.Option(help="Promoted-shapes manifest the engine reads.")] =
    Path("promoted-shapes.json"),
    ledger: Annotated[Path | None, typer.Option(help="Its ledger: checked to agree with the manifest (an interrupted "
                                                "promotion is finished first).")] = None,
) -> None:
    """Which k the engine may use, per model, device kind and numerics profile and OP; since when, by which run."""
    from harness.ledger_store import load_manifest, read_consistent
    from harness.pipeline.inspect import describe_shapes

    if ledger is not None:
        read_consistent(ledger, manifest)  # finishes an interrupted promotion; refuses a manifest of another ledger
    for line in describe_shapes(load_manifest(manifest)):
        say(line)


@app.command("ledger")
def ledger_cmd(
    ledger: Annotated[Path, typer.Option(help="Ledger file.")] = Path("ledger.json"),
    shape: Annotated[int | None, typer.Option(min=1, help="Only this shape (blocks per call).")] = None,
    model: Annotated[str | None, typer.Option(help="Only models whose fingerprint starts with this.")] = None,
    device: Annotated[str | None, typer.Option(help="Only this device kind ('cpu', 'NVIDIA H200', ...).")] = None,
) -> None:
    """A shape's history: every run that judged it, its verdict, and the state it left."""
    from harness.ledger_store import load_ledger
    from harness.pipeline.inspect import describe_history

    for line in describe_history(load_ledger(ledger, must_exist=True), shape, model, device):
        say(line)
