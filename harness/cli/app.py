"""The typer application: the command tree and the options every command shares.

Importing this module costs no torch import: commands import what they run inside their bodies,
so ``--help``, ``report``, ``shapes`` and ``promote`` start in well under a second.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from harness.base.errors import HarnessError
from harness.cli.set_keys import check_sets
from harness.cli.version import version_line

if TYPE_CHECKING:
    from harness.pipeline.answer import Answer

HELP = (
    "Exact/fast lane accuracy harness: prove that a packed batch shape (k blocks per call) gives the release's "
    "answers before the engine uses it.\n\n"
    "Typical flow: model check (a model against the contract, in seconds) -> corpus synth -> golden record (the "
    "exact lane, twice) -> nightly (run the candidate shapes "
    "interleaved with the exact lane, score, promote or revoke, report). The steps also exist alone: run, score, "
    "promote, report. Questions: `harness shapes` (which k may the engine use), `harness ledger` (a shape's "
    "history), `harness golden show`.\n\n"
    "Exit status: 0 everything holds; 1 a verdict failed (a shape refused, a golden not reproduced); 2 the harness "
    "could not do what was asked (one line 'harness: error: <where>: <what>'); 3 an internal error (a bug; "
    "--debug or HARNESS_DEBUG=1 prints the traceback)."
)

app = typer.Typer(
    name="harness",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
corpus_app = typer.Typer(
    help="Build or check a block corpus (one Parquet row per block).", no_args_is_help=True, rich_markup_mode=None
)
golden_app = typer.Typer(
    help="Record, verify and inspect goldens (the exact lane's outputs).", no_args_is_help=True, rich_markup_mode=None
)
model_app = typer.Typer(
    help="Check a model against the contract (docs/models.md).", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(corpus_app, name="corpus")
app.add_typer(golden_app, name="golden")
app.add_typer(model_app, name="model")


def _show_version(value: bool) -> None:
    if value:
        print(version_line(), flush=True)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_show_version,
            help="Print the harness's version, Python's, the core dependencies' and which extras are installed "
            "(read from package metadata: it answers even where a dependency fails to import), then exit.",
        ),
    ] = False,
) -> None:
    """The options of ``harness`` itself (before any command)."""


SET_KEYS = (
    "[backend] url, concurrency, shm, model_label; [ray] address, workers, shards, retries, accelerator; "
    "[packer] spec, cmd, digest, laws_examples; [nightly] shard (i/n, 1-based), ledger, manifest; [load] "
    "concurrency (e.g. [1,2,4,8]), p99_budget_ms, blocks; [model] seed; [numerics] mkldnn, threads; [lanes] "
    "voiceprint_inputs; and every key of docs/configuration.md"
)

# The flags that were only aliases of one configuration key: each is refused, before the command line is
# parsed, with one line naming the --set key that gives the value (removed_flag). A command's own option of
# the same name (promote --ledger, laws --packer, ...) is that command's, and stays.
REMOVED_FLAGS = {
    "--seed": "model.seed=N",
    "--mkldnn": "numerics.mkldnn=true",
    "--no-mkldnn": "numerics.mkldnn=false",
    "--threads": "numerics.threads=N",
    "--voiceprint-inputs": "lanes.voiceprint_inputs=isolated|chained",
    "--concurrency": "backend.concurrency=N",
    "--shm": "backend.shm=true",
    "--no-shm": "backend.shm=false",
    "--model-label": "backend.model_label=NAME",
    "--ray-workers": "ray.workers=N",
    "--ray-shards": "ray.shards=N",
    "--ray-retries": "ray.retries=N",
    "--ray-accelerator": "ray.accelerator=KIND",
    "--packer": "packer.spec=package.module:function",
    "--packer-cmd": "packer.cmd=COMMAND",
    "--packer-digest": "packer.digest=SHA256",
    "--laws-examples": "packer.laws_examples=N",
    "--shard": "nightly.shard=i/n",
    "--ledger": "nightly.ledger=PATH",
    "--manifest": "nightly.manifest=PATH",
    "--sweep-concurrency": "load.concurrency=[1,2,4,8]",
}

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Release configuration (harness.toml; `harness init` writes one, annotated). Default: "
        "the embedded default (docs/configuration.md).",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="TABLE.KEY=VALUE",
        help="Override one key of the configuration, validated with the file "
        "(repeatable; VALUE is a TOML value, other text a string), e.g. backend.concurrency=4 or ray.workers=2. "
        f"Keys: {SET_KEYS}; a flag wins over a set key.",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Model spec: 'full' or 'small' (the reference model), 'package.module:factory', or a TorchScript "
        "file (.pt). Overrides the config's [model] spec (default 'full').",
    ),
]
DeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="Where the model runs in-process: cpu, cuda, cuda:N "
        "(a GPU machine). Overrides [release] device (default cpu).",
    ),
]
BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="'in-process' (default) or a Triton server URL, "
        "e.g. http://127.0.0.1:8000 (see `harness serve`). Overrides "
        "[backend] url (its other keys: see the set option).",
    ),
]
ToleranceOpt = Annotated[
    str | None,
    typer.Option(
        "--tolerance",
        help="Judge every OP in this mode: bitwise | tolerance | noise-floor (the golden's own noise). "
        "Overrides the mode of [tolerances.op0], [tolerances.op1] and [tolerances.op2]; the limits stay the config's.",
    ),
]
ProgressOpt = Annotated[
    bool,
    typer.Option(
        "--progress/--no-progress",
        help="Show progress on stderr (a bar on a terminal, plain lines every few seconds in CI logs).",
    ),
]
ShapesOpt = Annotated[
    str | None,
    typer.Option("--shapes", help="Packed shapes, blocks per call, e.g. 2,4,8. Overrides [shapes] candidates."),
]
ArrangementsOpt = Annotated[
    int | None,
    typer.Option(
        "--arrangements",
        help="Judge every packed shape in N arrangements of its blocks, today's consecutive one "
        "included: shuffled neighbours, every slot, each block twice in one request (N - 1 more packed lanes). "
        "Overrides [evidence] arrangements (default 3; 1 = today's only).",
    ),
]
RepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--repeats",
        help="Run every packed lane N times, the shape's own noise judged like the release's. Overrides "
        "[evidence] repeats (default 1).",
    ),
]

RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Fan the shards out on Ray: 'local' (a Ray instance on this machine, for this job), 'auto' (the "
        "cluster this machine belongs to) or a cluster address (ray://head:10001). One worker per GPU (per [numerics] "
        "threads CPUs on --device cpu) holds the model; --out must be a folder every node mounts. "
        "Needs the 'ray' extra. "
        "Overrides [ray] address (its other keys: see the set option).",
    ),
]

# every flag that overrides one key of the configuration: parameter name -> (flag, key)
FLAG_KEYS = {
    "model": ("--model", "model.spec"),
    "golden_model": ("--golden-model", "model.spec"),
    "device": ("--device", "release.device"),
    "blocks": ("--blocks", "corpus.blocks"),  # --pad-to-fixed is the run plan's (lane_commands.run), not the file's
    "backend": ("--backend", "backend.url"),
    "ray": ("--ray", "ray.address"),
    "arrangements": ("--arrangements", "evidence.arrangements"),
    "repeats": ("--repeats", "evidence.repeats"),
}


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)


def flag_overrides(
    sets: list[str] | None = None, tolerance: str | None = None, shapes: str | None = None, **flags: object
) -> list:
    """The command line as overrides of the configuration's keys: ``--set`` first, then the named flags
    (which win). Nothing is checked here but syntax: the values are validated with the file."""
    from harness.release_config import Override, parse_set  # deferred: imports numpy, pydantic (start-up)

    out = [parse_set(text) for text in sets or ()]
    for name, value in flags.items():
        if value is not None:
            flag, key = FLAG_KEYS[name]
            out.append(Override(flag, key, str(value) if isinstance(value, Path) else value, _shown(value)))
    if tolerance is not None:
        out += [Override("--tolerance", f"tolerances.op{op}.mode", tolerance, repr(tolerance)) for op in range(3)]
    if shapes is not None:
        from harness.data.shape import parse_shapes  # deferred: imports pydantic (start-up)

        out.append(Override("--shapes", "shapes.candidates", list(parse_shapes(shapes)), repr(shapes)))
    return out


def resolve_config(
    config: Path | None,
    model: str | None = None,
    device: str | None = None,
    tolerance: str | None = None,
    shapes: str | None = None,
    sets: list[str] | None = None,
    command: str = "",
    **flags: object,
):
    """The release configuration with the command line's overrides, validated once, with the file
    (:func:`harness.release_config.load_config`); a refused value names the flag it came from. ``command``: the
    command asking ('golden record'): a ``--set`` key it would not read is refused (:mod:`harness.cli.set_keys`)."""
    from harness.release_config import load_config  # deferred: imports numpy, pydantic (start-up)

    overrides = flag_overrides(sets, tolerance, shapes, model=model, device=device, **flags)
    cfg = load_config(config, overrides)  # every value validated first, by the one validator
    check_sets(command, overrides)  # then: a key this command would not read is refused by name
    return cfg


def removed_flag(command, args: list[str]) -> str | None:
    """The one line for a flag of :data:`REMOVED_FLAGS` given to a command that takes ``--set`` and has no
    option of that name: ``harness nightly: --seed was removed: use --set model.seed=N``; None when there is
    none (the command line goes on to be parsed). ``command``: the click command of the whole tree."""
    path, words = ["harness"], list(args)
    while words and not words[0].startswith("-") and words[0] in getattr(command, "commands", {}):
        path.append(words[0])
        command = command.commands[words.pop(0)]
    own = {
        name
        for p in getattr(command, "params", ())
        for name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))
    }
    if "--set" not in own:
        return None
    for word in words:
        if word == "--":  # what follows is no option
            break
        flag = word.split("=", 1)[0]
        if flag in REMOVED_FLAGS and flag not in own:
            return f"{' '.join(path)}: {flag} was removed: use --set {REMOVED_FLAGS[flag]}"
    return None


def ray_options(
    address: str | None, workers: int | None, shards: int | None, retries: int, accelerator: str | None = None
):
    """The Ray options (None without an address); the others are refused without it."""
    if address is None:
        for name, given in (
            ("ray.workers", workers is not None),
            ("ray.shards", shards is not None),
            ("ray.accelerator", accelerator is not None),
        ):
            if given:  # from the configuration or --set
                raise HarnessError(f"{name}: applies with --ray only (ray.address)")
        return None
    from harness.pipeline.distributed import RayOptions  # deferred: imports numpy, pyarrow, pydantic (start-up)

    return RayOptions(address.strip(), workers, shards, retries, accelerator)


def ray_of(cfg):
    """The configuration's ``[ray]`` as the Ray options (None: no Ray)."""
    r = cfg.ray
    return ray_options(r.address, r.workers, r.shards, r.retries, r.accelerator)


def backend_of(cfg):
    """The configuration's ``[backend]`` as the backend choice."""
    from harness.pipeline.backends import BackendChoice  # deferred: imports numpy, pyarrow, pydantic (start-up)

    return BackendChoice.of(cfg)


def say(text: str) -> None:
    """Results go to stdout, one line each (progress and errors go to stderr)."""
    print(text, flush=True)


def answer(result: Answer) -> None:
    """A command's answer printed (its notes on stderr first, then its lines) and its exit status given."""
    for note in result.notes:
        print(f"harness: note: {note}", file=sys.stderr, flush=True)
    for line in result.lines:
        say(line)
    if result.status:
        raise typer.Exit(result.status)
