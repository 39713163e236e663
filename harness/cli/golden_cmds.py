"""``harness golden ...``: record, verify and show goldens (the exact lane's outputs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import (
    BackendOpt,
    ConcurrencyOpt,
    ConfigOpt,
    DeviceOpt,
    MkldnnOpt,
    ModelLabelOpt,
    ModelOpt,
    ProgressOpt,
    RayAcceleratorOpt,
    RayOpt,
    RayRetriesOpt,
    RayShardsOpt,
    RayWorkersOpt,
    SeedOpt,
    ShmOpt,
    ThreadsOpt,
    backend_choice,
    golden_app,
    ray_options,
    resolve_config,
    say,
)


@golden_app.command("record")
def golden_record(
    corpus: Annotated[Path | None, typer.Option(help="Corpus Parquet file. Default: the config's [corpus] "
                                                "(synthetic, [corpus] blocks).")] = None,
    goldens: Annotated[Path, typer.Option(help="Folder holding one golden directory per release.")] = Path("goldens"),
    release: Annotated[str | None, typer.Option(help="Release name: the golden's folder name (default: [release] "
                                                "name).")] = None,
    regen: Annotated[bool, typer.Option("--regen", help="Record a new golden BESIDE an existing one and print what "
                                        "changed; nothing is ever overwritten.")] = False,
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    backend: BackendOpt = "in-process", mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    concurrency: ConcurrencyOpt = None, shm: ShmOpt = False, model_label: ModelLabelOpt = None,
    progress: ProgressOpt = True, ray: RayOpt = None, ray_workers: RayWorkersOpt = None,
    ray_shards: RayShardsOpt = None, ray_retries: RayRetriesOpt = 3, ray_accelerator: RayAcceleratorOpt = None,
) -> None:
    """Record the release's golden: the exact lane, twice, over a corpus (atomic, never overwritten).

    With --ray the corpus is staged in the golden folder (which every Ray node must mount), each
    shard is recorded by a Ray worker and the shard goldens are merged into one.
    """
    from harness.pipeline.commands import record

    cfg = resolve_config(config, model, seed, mkldnn, threads, device=device)
    for line in record(cfg, corpus, goldens, release, regen,
                       backend_choice(backend, concurrency, shm, model_label), progress,
                       ray_options(ray, ray_workers, ray_shards, ray_retries, ray_accelerator)):
        say(line)


@golden_app.command("verify")
def golden_verify(
    golden: Annotated[Path, typer.Argument(help="Golden directory.")],
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    backend: BackendOpt = "in-process", mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    concurrency: ConcurrencyOpt = None, shm: ShmOpt = False, model_label: ModelLabelOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """Re-run the exact lane against a golden and judge it against the golden's noise floor.

    A model of another geometry or fingerprint is refused first, before any block runs (exit 2,
    naming both sides). The same model and environment must reproduce it (bitwise, when it was
    recorded bitwise); otherwise the line names what differs: the environment (torch, CUDA,
    cuDNN, device, driver, CPU) and every numeric setting. Exit 1 when not reproduced.
    """
    from harness.pipeline.commands import verify

    cfg = resolve_config(config, model, seed, mkldnn, threads, device=device)
    line, passed = verify(cfg, golden, backend_choice(backend, concurrency, shm, model_label), progress)
    say(line)
    if not passed:
        raise typer.Exit(1)


@golden_app.command("show")
def golden_show(
    golden: Annotated[Path, typer.Argument(help="Golden directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw manifest (checked) instead.")] = False,
    no_hash: Annotated[bool, typer.Option("--no-hash", help="Skip the sha256 of the data files (the output then "
                                          "says that their content was not checked).")] = False,
) -> None:
    """A golden at a glance: release, model, corpus, reproduction, noise floor, environment.

    The manifest is checked (schema, seal, golden id, file sizes) and, unless --no-hash, every data
    file's sha256 against it before anything is shown: a golden whose bytes changed is refused
    (exit 2, one line naming the file), as `score` would refuse it.
    """
    from golden.store import load_golden
    from harness.pipeline.inspect import CONTENT_NOT_CHECKED, check_golden_content, describe_golden

    gold = load_golden(golden)
    hashed = None if no_hash else check_golden_content(gold)
    if as_json:
        if hashed is None:
            print(f"harness: note: {golden}: {CONTENT_NOT_CHECKED}", file=sys.stderr, flush=True)
        say(json.dumps(gold.manifest, indent=1, sort_keys=True))
        return
    for line in describe_golden(gold, hashed):
        say(line)
