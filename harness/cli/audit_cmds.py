"""``harness audit CAPTURE``: judge a production capture (what the engine sent and got back)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import (
    ConfigOpt,
    DeviceOpt,
    ProgressOpt,
    RayOpt,
    SetOpt,
    ToleranceOpt,
    answer,
    app,
    ray_of,
    resolve_config,
)


@app.command("audit")
def audit_cmd(
    capture: Annotated[
        Path,
        typer.Argument(
            metavar="CAPTURE",
            help="Capture Parquet file: one row per request the engine sent, with its served output "
            "(schema: docs/audit.md).",
        ),
    ],
    golden_model: Annotated[
        str | None,
        typer.Option(
            "--golden-model",
            help="Model the captured blocks are re-run on, one block per call (the exact lane): "
            "'full', 'small', 'package.module:factory' or a TorchScript file. Default: the config's [model] spec.",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Folder for audit.json, junit.xml, report.html and report.md.")] = Path(
        "audit"
    ),
    tolerance: ToleranceOpt = None,
    config: ConfigOpt = None,
    device: DeviceOpt = None,
    progress: ProgressOpt = True,
    ray: RayOpt = None,
    sets: SetOpt = None,
) -> None:
    """Audit production traffic: the packing laws on every captured request, then every captured block re-run
    alone on the golden model and the served outputs scored against it per OP (the same judges and tolerances as a
    packed shape).

    Exit 0 when every law holds and every OP passes; 1 when a packing law is broken (the audit stops before any
    model runs, naming the request, the block and the law) or an OP fails (a capture served by another model is
    named first); 2 when the capture cannot be read or the audit cannot run. Never touches the ledger.

    With --ray the laws are still judged here; the re-runs are cut in shards of whole captured requests, run by
    Ray workers (one per GPU) that read the capture themselves (a file every node mounts, like --out), and
    scored here: the same audit as one process.
    """
    from harness.pipeline.commands import audit as audit_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(
        config, device=device, tolerance=tolerance, sets=sets, golden_model=golden_model, ray=ray, command="audit"
    )
    answer(audit_commands.audit(cfg, capture, out, progress, ray_of(cfg)))
