"""The typer application: the command tree and the options every command shares.

Importing this module costs no torch import: commands import what they run inside their bodies,
so ``--help``, ``report``, ``shapes`` and ``promote`` start in well under a second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.data.errors import HarnessError

HELP = (
    "Exact/fast lane accuracy harness: prove that a packed batch shape (k blocks per call) gives the release's "
    "answers before the engine uses it.\n\n"
    "Typical flow: corpus synth -> golden record (the exact lane, twice) -> nightly (run the candidate shapes "
    "interleaved with the exact lane, score, promote or revoke, report). The steps also exist alone: run, score, "
    "promote, report. Questions: `harness shapes` (which k may the engine use), `harness ledger` (a shape's "
    "history), `harness golden show`.\n\n"
    "Exit status: 0 everything holds; 1 a verdict failed (a shape refused, a golden not reproduced); 2 the harness "
    "could not do what was asked (one line 'harness: error: <where>: <what>'); 3 an internal error (a bug; "
    "--debug or HARNESS_DEBUG=1 prints the traceback)."
)

app = typer.Typer(name="harness", help=HELP, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None)
corpus_app = typer.Typer(help="Build or check a block corpus (one Parquet row per block).", no_args_is_help=True,
                         rich_markup_mode=None)
golden_app = typer.Typer(help="Record, verify and inspect goldens (the exact lane's outputs).", no_args_is_help=True,
                         rich_markup_mode=None)
app.add_typer(corpus_app, name="corpus")
app.add_typer(golden_app, name="golden")


def _show_version(value: bool) -> None:
    if value:
        from harness.cli.version import version_line

        print(version_line(), flush=True)
        raise typer.Exit(0)


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_show_version,
        help="Print the harness's version, Python's, the core dependencies' and which extras are installed "
        "(read from package metadata: it answers even where a dependency fails to import), then exit.")] = False,
          ) -> None:
    """The options of ``harness`` itself (before any command)."""

ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", "-c", help="Release configuration (harness.toml; see harness.toml.example). Default: the embedded "
    "default (docs/configuration.md).")]
ModelOpt = Annotated[str | None, typer.Option(
    "--model", help="Model spec: 'full' or 'small' (the reference model), 'package.module:factory', or a TorchScript "
    "file (.pt). Overrides the config's [model] spec (default 'full').")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed of a seeded model (reference weights); overrides "
                                             "[model] seed.")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="Where the model runs in-process: cpu, cuda, cuda:N "
                                               "(a GPU machine). Overrides [release] device (default cpu).")]
BackendOpt = Annotated[str, typer.Option("--backend", help="'in-process' (default) or a Triton server URL, e.g. "
                                         "http://127.0.0.1:8000 (see `harness serve`).")]
ConcurrencyOpt = Annotated[int | None, typer.Option("--concurrency", help="Triton backend: requests in flight at "
                                                  "once (default 2, as the engine); results do not depend on it.")]
ShmOpt = Annotated[bool, typer.Option("--shm/--no-shm", help="Triton backend on this host: tensors through system "
                                      "shared memory instead of the HTTP body.")]
ModelLabelOpt = Annotated[str | None, typer.Option("--model-label", help="Triton model without MODEL_INFO (a team's "
                                                   "own server): the name of the model it serves (release, "
                                                   "checkpoint). Required there: its weights cannot be verified "
                                                   "remotely.")]
MkldnnOpt = Annotated[bool | None, typer.Option("--mkldnn/--no-mkldnn", help="oneDNN on/off; overrides [numerics] "
                                                "mkldnn (off routes CPU convolutions through NNPACK: a real "
                                                "non-bitwise case on CPU).")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", min=0, help="Torch intra-op threads (0 = one per CPU); "
                                                "overrides [numerics] threads. Part of the numerics profile shapes "
                                                "are promoted under.")]
ToleranceOpt = Annotated[str | None, typer.Option(
    "--tolerance", help="Judge every OP in this mode: bitwise | tolerance | noise-floor (the golden's own noise). "
    "Overrides the mode of [tolerances.op0], [tolerances.op1] and [tolerances.op2]; the limits stay the config's.")]
VoiceprintOpt = Annotated[str | None, typer.Option(
    "--voiceprint-inputs", help="Where each lane's voiceprint WEIGHTS/IDX come from: isolated = the golden's (the "
    "voiceprint network judged alone), chained = the lane's own segmentation (as production). Overrides [lanes] "
    "voiceprint_inputs.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress on stderr (a bar on a "
                                           "terminal, plain lines every few seconds in CI logs).")]
ShapesOpt = Annotated[str | None, typer.Option("--shapes", help="Packed shapes, blocks per call, e.g. 2,4,8. Overrides "
                                               "[shapes] candidates.")]
LedgerOpt = Annotated[Path | None, typer.Option("--ledger", help="Ledger of every shape's history (default: "
                                                "ledger.json beside the golden).")]
ManifestOpt = Annotated[Path | None, typer.Option("--manifest", help="Promoted-shapes manifest the engine reads "
                                                  "(default: promoted-shapes.json beside the golden).")]
PackerOpt = Annotated[str | None, typer.Option("--packer", help="Packer of the fast lane (and its unpacking): "
                                               "'harness' (default) or a Python packer 'package.module:function'.")]
PackerCmdOpt = Annotated[str | None, typer.Option("--packer-cmd", help="Packer of the fast lane as a process speaking "
                                                  "the wire protocol (docs/packer-protocol.md): the engine's own, so "
                                                  "shapes are promoted for the packing the engine does.")]
PackerDigestOpt = Annotated[str | None, typer.Option("--packer-digest", help="sha256 of the --packer-cmd packer (its "
                                                     "build, as you release it): its identity in the run, score and "
                                                     "ledger instead of a digest of its command's files.")]
LawsExamplesOpt = Annotated[int, typer.Option("--laws-examples", help="Judge the fast lane's packer on the "
                                              "packing laws with N examples per law (fixed seed) at the start of the "
                                              "run; a packer that breaks one fails every shape. 0: not judged, so no "
                                              "shape can be promoted.")]

RayOpt = Annotated[str | None, typer.Option(
    "--ray", help="Fan the shards out on Ray: 'local' (a Ray instance on this machine, for this job), 'auto' (the "
    "cluster this machine belongs to) or a cluster address (ray://head:10001). One worker per GPU (per --threads "
    "CPUs on --device cpu) holds the model; --out must be a folder every node mounts. Needs the 'ray' extra.")]
RayWorkersOpt = Annotated[int | None, typer.Option("--ray-workers", help="With --ray: workers to start (default: one "
                                                   "per GPU, or per --threads CPUs, the cluster offers).")]
RayShardsOpt = Annotated[int | None, typer.Option("--ray-shards", help="With --ray: shards to cut the corpus (or "
                                                  "capture) in (default: 4 per worker; whole groups of the corpus, "
                                                  "whole requests of a capture, never more than it holds). The "
                                                  "result does not depend on it.")]
RayRetriesOpt = Annotated[int, typer.Option("--ray-retries", help="With --ray: restarts of a worker that died (killed, "
                                            "out of memory, node lost), each rerunning the shard it held.")]

RayAcceleratorOpt = Annotated[str | None, typer.Option("--ray-accelerator", help="With --ray on GPUs: workers only on "
                                                       "nodes with this GPU kind, as Ray names it (H100, A100): a "
                                                       "cluster of mixed kinds runs one nightly per kind.")]


def ray_options(address: str | None, workers: int | None, shards: int | None, retries: int,
                accelerator: str | None = None):
    """The --ray options (None without --ray); the others are refused without it."""
    if address is None:
        for name, given in (("--ray-workers", workers is not None), ("--ray-shards", shards is not None),
                            ("--ray-accelerator", accelerator is not None)):
            if given:
                raise HarnessError(f"{name}: applies with --ray only")
        return None
    from harness.pipeline.distributed import RayOptions

    return RayOptions(address.strip(), workers, shards, retries, accelerator)


def resolve_config(config: Path | None, model: str | None = None, seed: int | None = None,
                   mkldnn: bool | None = None, threads: int | None = None, voiceprint_inputs: str | None = None,
                   device: str | None = None, tolerance: str | None = None, shapes: str | None = None):
    """The release configuration with the command line's overrides (each validated like the file)."""
    from harness.config import LANE_MODES, SEED_MAX, ModelSpec, load_config
    from harness.judges.base import MODES

    cfg = load_config(config)
    if seed is not None and not 0 <= seed <= SEED_MAX:
        raise HarnessError(f"--seed {seed}: expected 0..{SEED_MAX} (numpy's seed range)")
    spec = ModelSpec(model if model is not None else cfg.model.spec, seed if seed is not None else cfg.model.seed)
    numerics = cfg.numerics.model_copy(update={k: v for k, v in (("mkldnn", mkldnn), ("threads", threads))
                                               if v is not None})
    if voiceprint_inputs is not None and voiceprint_inputs not in LANE_MODES:
        raise HarnessError(f"--voiceprint-inputs {voiceprint_inputs!r}: expected one of {', '.join(LANE_MODES)}")
    tolerances = cfg.tolerances
    if tolerance is not None:
        if tolerance not in MODES:
            raise HarnessError(f"--tolerance {tolerance!r}: expected one of {', '.join(MODES)}")
        tolerances = tolerances.with_mode(tolerance)
    if device is not None:
        import re

        from harness.config import DEVICE_PATTERN

        if not re.match(DEVICE_PATTERN, device):
            raise HarnessError(f"--device {device!r}: expected cpu, cuda or cuda:N")
    return cfg.with_overrides(model=spec, numerics=numerics, mode=voiceprint_inputs, device=device,
                              tolerances=tolerances, candidates=parse_shapes(shapes) if shapes else None)


def parse_shapes(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise HarnessError(f"--shapes {text!r}: expected comma-separated blocks per call, e.g. 2,4,8 (an empty entry "
                           "is not a shape)")
    try:
        shapes = tuple(int(p) for p in parts)
    except ValueError:
        raise HarnessError(f"--shapes {text!r}: expected comma-separated blocks per call, e.g. 2,4,8") from None
    if any(k < 1 or k > 100_000 for k in shapes) or len(set(shapes)) != len(shapes):
        raise HarnessError(f"--shapes {text!r}: expected distinct whole numbers from 1 to 100000")
    return shapes


def backend_choice(url: str, concurrency: int | None, shm: bool, model_label: str | None):
    from harness.pipeline.backends import BackendChoice

    return BackendChoice(url, concurrency, shm, model_label)


def say(text: str) -> None:
    """Results go to stdout, one line each (progress and errors go to stderr)."""
    print(text, flush=True)


def app_command():
    """The click command of the whole tree (every command module registered)."""
    from harness.cli import audit_cmds, corpus_cmds, golden_cmds, inspect_cmds, job_cmds, lane_cmds  # noqa: F401

    return typer.main.get_command(app)
