"""``harness golden ...``: record, verify and show goldens (the exact lane's outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from golden.locate import refuse_folder_of_goldens
from harness.cli.app import (
    BackendOpt,
    ConfigOpt,
    DeviceOpt,
    ModelOpt,
    ProgressOpt,
    RayOpt,
    SetOpt,
    ToleranceOpt,
    answer,
    backend_of,
    golden_app,
    ray_of,
    resolve_config,
)


@golden_app.command("record")
def golden_record(
    corpus: Annotated[
        Path | None,
        typer.Option(help="Corpus Parquet file. Default: the config's [corpus] (synthetic, [corpus] blocks)."),
    ] = None,
    goldens: Annotated[Path, typer.Option(help="Folder holding one golden directory per release.")] = Path("goldens"),
    release: Annotated[
        str | None, typer.Option(help="Release name: the golden's folder name (default: [release] name).")
    ] = None,
    regen: Annotated[
        bool,
        typer.Option(
            "--regen",
            help="Record a new golden BESIDE an existing one "
            "(GOLDENS/NAME.regen-<time>) and print what changed; nothing is ever "
            "overwritten. The nightly starts using it once adopted: `harness golden adopt "
            "GOLDENS/NAME.regen-<time>`.",
        ),
    ] = False,
    config: ConfigOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = None,
    backend: BackendOpt = None,
    progress: ProgressOpt = True,
    ray: RayOpt = None,
    sets: SetOpt = None,
) -> None:
    """Record the release's golden: the exact lane, twice, over a corpus (atomic, never overwritten).

    With --ray the corpus is staged in the golden folder (which every Ray node must mount), each
    shard is recorded by a Ray worker and the shard goldens are merged into one.
    """
    from harness.pipeline.commands import golden as golden_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, model, device=device, sets=sets, backend=backend, ray=ray, command="golden record")
    answer(golden_commands.record(cfg, corpus, goldens, release, regen, backend_of(cfg), progress, ray_of(cfg)))


@golden_app.command("verify")
def golden_verify(
    golden: Annotated[Path, typer.Argument(help="Golden directory.")],
    config: ConfigOpt = None,
    model: ModelOpt = None,
    device: DeviceOpt = None,
    backend: BackendOpt = None,
    progress: ProgressOpt = True,
    sets: SetOpt = None,
) -> None:
    """Re-run the exact lane against a golden and judge it against the golden's noise floor.

    A model of another geometry or fingerprint is refused first, before any block runs (exit 2,
    naming both sides). The same model and environment must reproduce it (bitwise, when it was
    recorded bitwise); otherwise the line names what differs: the environment (torch, CUDA,
    cuDNN, device, driver, CPU) and every numeric setting. Exit 1 when not reproduced.
    """
    from harness.pipeline.commands import golden as golden_commands  # deferred: its imports are heavy (start-up)

    refuse_folder_of_goldens(golden, "GOLDEN")  # at once, before the configuration and the model
    cfg = resolve_config(config, model, device=device, sets=sets, backend=backend, command="golden verify")
    answer(golden_commands.verify(cfg, golden, backend_of(cfg), progress))


@golden_app.command("show")
def golden_show(
    golden: Annotated[Path, typer.Argument(help="Golden directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw manifest (checked) instead.")] = False,
    no_hash: Annotated[
        bool,
        typer.Option(
            "--no-hash",
            help="Skip the sha256 of the data files (the output then says that their content was not checked).",
        ),
    ] = False,
) -> None:
    """A golden at a glance: release, model, corpus, reproduction, noise floor, environment.

    The manifest is checked (schema, seal, golden id, file sizes) and, unless --no-hash, every data
    file's sha256 against it before anything is shown: a golden whose bytes changed is refused
    (exit 2, one line naming the file), as `score` would refuse it.
    """
    from harness.pipeline.commands import golden as golden_commands  # deferred: its imports are heavy (start-up)

    answer(golden_commands.golden_show(golden, as_json, no_hash))


@golden_app.command("adopt")
def golden_adopt(
    regen: Annotated[
        Path,
        typer.Argument(
            help="The regenerated golden to adopt, GOLDENS/NAME.regen-<time> as `golden record --regen` printed it (or "
            "a NAME.history-<time> folder, to roll back to it)."
        ),
    ],
) -> None:
    """Make a regenerated golden THE golden of its release: GOLDENS/NAME.regen-<time> becomes GOLDENS/NAME.

    \b
    - The golden at GOLDENS/NAME now is kept, whole, as GOLDENS/NAME.history-<its recorded time>
      (`golden show` reads it; adopt it back the same way to roll back).
    - The two folders are swapped in one rename: a kill at any moment leaves the old golden or the
      new one at GOLDENS/NAME, never none and never a half; run the same command again after a
      kill to finish it.
    - Refused (exit 2, nothing moved) when the regen is not a complete golden (every file's sha256
      is checked), is of another release, geometry or OPs than the golden it replaces (naming what
      differs), or another adopt of NAME is running.
    - A regen of a changed model (another fingerprint: `golden record --regen` after the model's code
      or weights changed) is adopted: the new model starts unpromoted, the old model's promotions stay
      with it in the ledger (shapes are promoted per model fingerprint).
    - The ledger beside it (GOLDENS/ledger.json) is not changed: promotions earned on the old golden
      stay in force and in its history until the next nightly judges every shape against the new
      one (`nightly --golden GOLDENS/NAME`). A score of the old golden promotes only with
      `--golden GOLDENS/NAME.history-<time>`.
    - No model is built and no block runs: it takes the time of hashing the regen's files.
    """
    from harness.pipeline.commands import golden as golden_commands  # deferred: its imports are heavy (start-up)

    answer(golden_commands.adopt(regen))


@golden_app.command("diff")
def golden_diff(
    a: Annotated[
        Path, typer.Argument(metavar="A", help="Golden directory A, the reference (noise-floor mode reads its floor).")
    ],
    b: Annotated[Path, typer.Argument(metavar="B", help="Golden directory B, of the same corpus, judged against A.")],
    tolerance: ToleranceOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print the answer as one JSON document (docs/schemas.md: golden diff) instead of the text."
        ),
    ] = False,
    out: Annotated[Path | None, typer.Option(help="Also write the JSON answer to this file (atomic).")] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
) -> None:
    """Compare two goldens of one corpus: B's exact lane judged against A's.

    The same judges and tolerances as `harness score` (--tolerance, --config, --set).

    \b
    - The environment differences come first (model, device, driver, torch, every numeric setting,
      A -> B), then one line per OP (bitwise / within tolerance / DIFFERS with its failing checks),
      then the worst blocks of every OP that is not bitwise.
    - Exit 0: every OP within the tolerances; 1: some OP differs beyond them; 2: bad input (goldens
      of different corpora, geometries or OPs, a missing or corrupt golden), one line naming both.
    - No model is built and no block runs: both goldens' outputs are read once, batch by batch.
    """
    from harness.pipeline.commands import golden as golden_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, tolerance=tolerance, sets=sets, command="golden diff")
    answer(golden_commands.golden_diff(cfg, a, b, as_json, out))
