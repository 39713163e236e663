"""The ``harness`` command line.

Every command prints one line per result and, on any expected failure (bad input, corrupt
golden, server down, ...), one line naming what and where, then exits non-zero:

    0  everything holds          1  a verdict failed (a shape, a golden reproduction)
    2  the harness could not do what was asked (bad input, missing file, server down, ...)
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from harness.config import ReleaseConfig, load_config
from harness.errors import HarnessError
from harness.numerics import NumericSettings
from harness.progress import progress_bar
from lanes.model_api import ModelSpec

app = typer.Typer(
    name="harness",
    help=(
        "Exact/fast lane accuracy harness: prove that a packed batch shape (k blocks per call) gives the "
        "release's answers before the engine uses it.\n\n"
        "Typical flow: corpus -> golden record (exact lane) -> run (fast lane, shapes k) -> score -> promote "
        "-> report. `harness nightly` does run+score+promote+report in one step; `harness demo` does it all "
        "on the embedded default (synthetic corpus, reference model, CPU)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
corpus_app = typer.Typer(help="Build or check a block corpus (one Parquet row per block).", no_args_is_help=True)
golden_app = typer.Typer(help="Record, verify and inspect goldens (the exact lane's outputs).", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")
app.add_typer(golden_app, name="golden")

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Release configuration (harness.toml). "
                                                "Default: the embedded default (docs/configuration.md).")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Model spec: 'full' or 'small' (reference model), "
                                              "'package.module:factory', or a TorchScript file (.pt). Overrides "
                                              "[model] spec.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed of a seeded model (reference weights).")]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="Where the model runs in-process: cpu, cuda, cuda:N.")]
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
MkldnnOpt = Annotated[bool | None, typer.Option("--mkldnn/--no-mkldnn", help="oneDNN on/off (off routes CPU "
                                                "convolutions through NNPACK: a real non-bitwise case on CPU).")]
ThreadsOpt = Annotated[int | None, typer.Option("--threads", help="Torch intra-op threads (0 = one per CPU); part "
                                                "of the numeric settings recorded with every result.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars on stderr.")]


def _config(config: Path | None, model: str | None = None, seed: int | None = None, mkldnn: bool | None = None,
            threads: int | None = None, mode: str | None = None, device: str | None = None) -> ReleaseConfig:
    cfg = load_config(config)
    spec = ModelSpec(model if model is not None else cfg.model.spec, seed if seed is not None else cfg.model.seed)
    numerics = cfg.numerics
    if mkldnn is not None:
        numerics = replace(numerics, mkldnn=mkldnn)
    if threads is not None:
        numerics = replace(numerics, threads=threads)
    if mode is not None:
        from lanes.runner import MODES

        if mode not in MODES:
            raise HarnessError(f"--mode {mode!r}: expected one of {MODES}")
    return cfg.with_overrides(model=spec, numerics=NumericSettings(**numerics.to_dict()), mode=mode, device=device)


def _shapes(text: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if not text:
        return default
    try:
        shapes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise HarnessError(f"--shapes {text!r}: expected comma-separated blocks per call, e.g. 2,4,8") from None
    if not shapes or any(k < 1 for k in shapes) or len(set(shapes)) != len(shapes):
        raise HarnessError(f"--shapes {text!r}: expected distinct whole numbers >= 1")
    return shapes


def _say(text: str) -> None:
    """Results go to stdout, one line each (progress bars and errors go to stderr)."""
    print(text, flush=True)


# ---------------------------------------------------------------- corpus


@corpus_app.command("synth")
def corpus_synth(
    out: Annotated[Path, typer.Argument(help="Parquet file to write.")],
    blocks: Annotated[int, typer.Option(help="Number of blocks.")] = 16,
    seed: Annotated[int, typer.Option("--corpus-seed", help="Seed of the synthetic audio.")] = 0,
    step: Annotated[int, typer.Option(help="Window step in samples (0: a quarter window).")] = 0,
    model: ModelOpt = "small",
    config: ConfigOpt = None,
) -> None:
    """Deterministic multi-speaker audio (turns, overlaps, silences, short final windows), no downloads."""
    from harness.corpus import write_corpus
    from harness.corpus.synth import synth_corpus

    geometry = _config(config, model).model.load().geometry
    corpus = synth_corpus(geometry, blocks, seed=seed, step=step or None)
    write_corpus(out, corpus, geometry)
    _say(f"wrote {out}: {json.dumps(corpus.summary())}")


@corpus_app.command("wav")
def corpus_wav(
    out: Annotated[Path, typer.Argument(help="Parquet file to write.")],
    wavs: Annotated[list[Path], typer.Argument(help="16 kHz WAV files (PCM 16/24/32 or float; stereo is averaged).")],
    step: Annotated[int, typer.Option(help="Window step in samples (0: a quarter window).")] = 0,
    model: ModelOpt = "small",
    config: ConfigOpt = None,
) -> None:
    """Cut WAV files into blocks of 8 windows; the last block is padded with VALID = 0 windows."""
    from harness.corpus import write_corpus
    from harness.corpus.wav import wav_corpus

    geometry = _config(config, model).model.load().geometry
    corpus = wav_corpus(list(wavs), geometry, step=step or None)
    write_corpus(out, corpus, geometry)
    _say(f"wrote {out}: {json.dumps(corpus.summary())}")


@corpus_app.command("capture")
def corpus_capture(
    out: Annotated[Path, typer.Argument(help="Parquet file to write (normalised, validated).")],
    captured: Annotated[Path, typer.Argument(help="Blocks recorded by the engine in the corpus schema "
                                             "(docs/corpus.md).")],
    model: ModelOpt = "small",
    config: ConfigOpt = None,
) -> None:
    """Import blocks captured from the engine: validated whole (refused at the first bad block)."""
    from harness.corpus import read_corpus, write_corpus

    geometry = _config(config, model).model.load().geometry
    corpus = read_corpus(captured, geometry)
    write_corpus(out, corpus, geometry)
    _say(f"wrote {out}: {json.dumps(corpus.summary())}")


@corpus_app.command("show")
def corpus_show(
    corpus: Annotated[Path, typer.Argument(help="Corpus Parquet file.")],
    model: ModelOpt = "small",
    config: ConfigOpt = None,
) -> None:
    """Validate a corpus against a model's geometry and print its summary."""
    from harness.corpus import read_corpus

    geometry = _config(config, model).model.load().geometry
    _say(json.dumps(read_corpus(corpus, geometry).summary()))


def _load_or_build_corpus(corpus: Path | None, cfg: ReleaseConfig, geometry):
    from harness.corpus import read_corpus
    from harness.corpus.synth import synth_corpus

    if corpus is not None:
        return read_corpus(corpus, geometry)
    return synth_corpus(geometry, cfg.corpus.blocks, seed=cfg.corpus.seed, step=cfg.corpus.step or None)


# ---------------------------------------------------------------- golden


@golden_app.command("record")
def golden_record(
    corpus: Annotated[Path | None, typer.Option(help="Corpus Parquet file. Default: the config's [corpus] "
                                                "(synthetic).")] = None,
    goldens: Annotated[Path, typer.Option(help="Folder holding one golden directory per release.")] = Path("goldens"),
    release: Annotated[str | None, typer.Option(help="Release name (default: [release] name).")] = None,
    regen: Annotated[bool, typer.Option("--regen", help="Record a new golden BESIDE an existing one and print what "
                                        "changed; nothing is ever overwritten.")] = False,
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    backend: BackendOpt = "in-process", mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    concurrency: ConcurrencyOpt = None, shm: ShmOpt = False, model_label: ModelLabelOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """Record the release's golden: the exact lane, twice, over a corpus (atomic, never overwritten)."""
    from golden.store import record_golden
    from harness.backends import make_backend
    from harness.nightly import plan_for

    cfg = _config(config, model, seed, mkldnn, threads, device=device)
    be = make_backend(cfg, backend, device, concurrency=concurrency, shm=shm, model_label=model_label)
    data = _load_or_build_corpus(corpus, cfg, be.geometry)
    plan = plan_for(cfg, ())
    with progress_bar(f"golden record ({len(data)} blocks, x2)", 2 * 3 * len(data), progress) as tick:
        gold, changes = record_golden(goldens, release or cfg.name, data, be, plan, cfg.to_dict(), regen=regen,
                                      progress=tick)
    repro = gold.manifest["reproducibility"]
    floor = "bitwise" if repro["bitwise"] else "NOT bitwise, noise floor " + ", ".join(
        f"OP {op} max_abs {v['max_abs']:.3g} ({v['max_ulp']} ULP)" for op, v in repro["ops"].items())
    _say(f"recorded golden {gold.golden_id} at {gold.path} ({len(data)} blocks; exact lane reproduced {floor})")
    if changes is not None:
        _say("changes against the previous golden: " + json.dumps(changes))


@golden_app.command("verify")
def golden_verify(
    golden: Annotated[Path, typer.Argument(help="Golden directory.")],
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    backend: BackendOpt = "in-process", mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    concurrency: ConcurrencyOpt = None, shm: ShmOpt = False, model_label: ModelLabelOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """Re-run the exact lane against a golden and compare.

    The same model and environment must reproduce it bitwise; otherwise the drift is reported with
    what differs in the environment (torch, CUDA, cuDNN, device, driver, CPU, numeric settings).
    """
    from golden.store import describe_verification, load_golden, verify_golden
    from harness.backends import make_backend
    from harness.nightly import plan_for

    cfg = _config(config, model, seed, mkldnn, threads, device=device)
    gold = load_golden(golden)
    be = make_backend(cfg, backend, device, concurrency=concurrency, shm=shm, model_label=model_label)
    with progress_bar("golden verify", 3 * len(gold.corpus), progress) as tick:
        result = verify_golden(gold, be, plan_for(cfg, ()), progress=tick)
    _say(describe_verification(result))
    if not result["passed"]:
        raise typer.Exit(1)


@golden_app.command("show")
def golden_show(golden: Annotated[Path, typer.Argument(help="Golden directory.")]) -> None:
    """Check a golden's integrity (every sha256, schema) and print its manifest summary."""
    from golden.store import load_golden

    gold = load_golden(golden)
    m = gold.manifest
    _say(json.dumps({"golden_id": gold.golden_id, "release": gold.release, "model": m["model"],
                     "device_kind": gold.device_kind, "corpus": m["corpus"],
                     "reproducibility": m["reproducibility"], "created": m["created"]}, indent=1))


# ---------------------------------------------------------------- run / score / promote / report


@app.command("run")
def run_cmd(
    golden: Annotated[Path, typer.Option(help="Golden to run against (its corpus; its WEIGHTS/IDX in isolated "
                                         "mode).")],
    shapes: Annotated[str | None, typer.Option(help="Packed shapes, blocks per call, e.g. 2,4,8 (default: "
                                               "[shapes] candidates).")] = None,
    runs: Annotated[Path, typer.Option(help="Folder for run directories.")] = Path("runs"),
    mode: Annotated[str | None, typer.Option(help="isolated: every lane gets the golden's voiceprint inputs; "
                                             "chained: each lane derives them from its own segmentation.")] = None,
    pad_to_fixed: Annotated[bool | None, typer.Option("--pad-to-fixed/--no-pad", help="Pad every pack to exactly k "
                                                      "blocks with empty blocks (a fixed compiled batch).")] = None,
    with_exact: Annotated[bool, typer.Option("--with-exact/--fast-only", help="Also run the exact lane, "
                                             "interleaved block by block (golden reproduction, fair timing).")] = True,
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    backend: BackendOpt = "in-process", mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    concurrency: ConcurrencyOpt = None, shm: ShmOpt = False, model_label: ModelLabelOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """Run the fast lane at packed shapes over a golden's corpus.

    Writes a run directory (same Parquet layout as a golden), so any run can be scored against any golden.
    """
    from golden.runs import write_run
    from golden.store import load_golden
    from harness.backends import make_backend
    from lanes.runner import RunPlan, run_lanes

    cfg = _config(config, model, seed, mkldnn, threads, mode, device)
    wanted = _shapes(shapes, cfg.candidates)
    be = make_backend(cfg, backend, device, concurrency=concurrency, shm=shm, model_label=model_label)
    gold = load_golden(golden, expect_fingerprint=be.fingerprint)
    plan = RunPlan(shapes=wanted, release_shapes=cfg.release_shapes, mode=cfg.mode,
                   pad_to_fixed=cfg.pad_to_fixed if pad_to_fixed is None else pad_to_fixed,
                   include_exact=with_exact, mask_policy=cfg.masks)
    with progress_bar(f"run shapes {list(plan.shapes)}", plan.calls(len(gold.corpus)), progress) as tick:
        result = run_lanes(gold.corpus.blocks, be, plan, voiceprint_inputs=gold.voiceprint_inputs(), progress=tick)
    run = write_run(runs, result, plan, be, gold.golden_id, cfg.to_dict(), gold.corpus.ids)
    _say(f"wrote run {run.run_id} at {run.path}")


@app.command("score")
def score_cmd(
    golden: Annotated[Path, typer.Option(help="Golden directory.")],
    run: Annotated[Path, typer.Option(help="Run directory (harness run / nightly).")],
    out: Annotated[Path, typer.Option(help="Score file to write.")] = Path("score.json"),
    localise: Annotated[bool, typer.Option("--localise/--no-localise", help="For each failing shape, find the first "
                                           "layer whose output differs (needs the model in-process).")] = True,
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None,
) -> None:
    """Compare a run with a golden per OP and shape, against the configured tolerances."""
    from golden.runs import load_run
    from golden.store import load_golden
    from harness.evaluate import score_run, write_score
    from harness.localise import localise_shape

    cfg = _config(config, model, seed)
    gold, r = load_golden(golden), load_run(run)
    report = score_run(gold, r, cfg.tolerances)
    failed = [k for k, s in report["shapes"].items() if s["verdict"] == "fail"]
    if localise and failed:
        m = cfg.model.load("cpu")
        if m.fingerprint == gold.fingerprint:
            loc = {k: localise_shape(m, gold, r.shapes, report["shapes"][k], r.manifest.get("pad_to_fixed"))
                   for k in failed}
            report = score_run(gold, r, cfg.tolerances, localisation=loc)
        else:
            _say("localisation skipped: the configured model is not the golden's (fingerprints differ)")
    write_score(out, report)
    for k, s in report["shapes"].items():
        _say(f"shape k={k}: {s['verdict'].upper()}" + (f" ({s['reasons'][0]})" if s["reasons"] else ""))
    _say(f"wrote {out}")
    if report["verdict"] != "pass":
        raise typer.Exit(1)


@app.command("promote")
def promote_cmd(
    score: Annotated[Path, typer.Option(help="Score file (harness score / nightly).")],
    ledger: Annotated[Path, typer.Option(help="Ledger of every shape's history (created if missing).")] =
    Path("ledger.json"),
    manifest: Annotated[Path, typer.Option(help="Promoted-shapes manifest the engine reads.")] =
    Path("promoted-shapes.json"),
    config: ConfigOpt = None,
) -> None:
    """Promote shapes whose score passed for every OP; revoke promoted shapes that now fail."""
    from harness.evaluate import read_score
    from harness.jsonio import write_json_atomic
    from harness.promotion import load_ledger, promoted_manifest, update_ledger

    cfg = _config(config)
    report = read_score(score)
    book = load_ledger(ledger)
    transitions = update_ledger(book, report)
    write_json_atomic(ledger, book)
    write_json_atomic(manifest, promoted_manifest(book, {str(int(op)): list(ks) for op, ks in
                                                         cfg.release_shapes.items()}))
    for k, s in sorted(report["shapes"].items(), key=lambda kv: int(kv[0])):
        _say(f"shape k={k}: {s['verdict']}")
    for t in transitions:
        _say(f"shape k={t['shape']}: {t['from']} -> {t['to']} (run {t['run_id']})")
    _say(f"wrote {ledger} and {manifest}")


@app.command("report")
def report_cmd(
    score: Annotated[Path, typer.Option(help="Score file.")],
    out: Annotated[Path, typer.Option(help="Folder for report.html, report.md, report.json.")] = Path("report"),
    ledger: Annotated[Path | None, typer.Option(help="Ledger, to show promoted/revoked shapes.")] = None,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here.")] = None,
) -> None:
    """Write the release sign-off report (self-contained HTML, Markdown, JSON)."""
    from harness.evaluate import read_score
    from harness.promotion import load_ledger
    from reports import write_junit, write_report

    report = read_score(score)
    book = load_ledger(ledger) if ledger else None
    paths = write_report(out, report, ledger=book)
    if junit:
        write_junit(junit, report, None)
    _say(f"report: {paths['html']}")


# ---------------------------------------------------------------- nightly / merge / serve / demo


@app.command("nightly")
def nightly_cmd(
    golden: Annotated[Path, typer.Option(help="Golden directory (recorded on the same device kind).")],
    out: Annotated[Path, typer.Option(help="Output folder: runs/, score.json, report/, junit.xml, summary.txt.")] =
    Path("nightly"),
    shard: Annotated[str | None, typer.Option(help="Run shard i/n (1-based) of the corpus only; combine the shard "
                                              "folders with `harness merge`.")] = None,
    ledger: Annotated[Path | None, typer.Option(help="Ledger (default: ledger.json beside the golden).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Promoted-shapes manifest (default: promoted-shapes.json "
                                                  "beside the golden).")] = None,
    shapes: Annotated[str | None, typer.Option(help="Candidate shapes (default: [shapes] candidates).")] = None,
    localise: Annotated[bool, typer.Option("--localise/--no-localise", help="Name the first diverging layer of "
                                           "each failing shape.")] = True,
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    backend: BackendOpt = "in-process", mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    concurrency: ConcurrencyOpt = None, shm: ShmOpt = False, model_label: ModelLabelOpt = None,
    mode: Annotated[str | None, typer.Option(help="isolated or chained (default: [lanes] mode).")] = None,
    progress: ProgressOpt = True,
) -> None:
    """The nightly CI job: verify, run candidate shapes, score, promote/revoke, report + JUnit.

    Works on a GPU or the CPU. Exit 0 only when everything holds; 1 with a one-line reason otherwise;
    2 when the job could not run.
    """
    from harness.backends import make_backend
    from harness.nightly import nightly
    from harness.shards import Shard

    cfg = _config(config, model, seed, mkldnn, threads, mode, device)
    if shapes:
        cfg = cfg.with_overrides(candidates=_shapes(shapes, cfg.candidates))
    part = Shard.parse(shard) if shard else None
    be = make_backend(cfg, backend, device, concurrency=concurrency, shm=shm, model_label=model_label)
    outcome = nightly(cfg, golden, out, be, part, ledger, manifest, localise, progress)
    _finish(outcome)


@app.command("merge")
def merge_cmd(
    shards: Annotated[list[Path], typer.Argument(help="Output folders of `harness nightly --shard i/n`.")],
    golden: Annotated[Path, typer.Option(help="The golden the shards ran against.")],
    out: Annotated[Path, typer.Option(help="Output folder for the merged run, score, report, JUnit.")] =
    Path("nightly-merged"),
    ledger: Annotated[Path | None, typer.Option(help="Ledger (default: beside the golden).")] = None,
    manifest: Annotated[Path | None, typer.Option(help="Promoted-shapes manifest (default: beside the golden).")] =
    None,
    localise: Annotated[bool, typer.Option("--localise/--no-localise")] = True,
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None,
) -> None:
    """Combine shard results into one score, ledger update and report."""
    from harness.nightly import merge

    cfg = _config(config, model, seed)
    _finish(merge(cfg, golden, list(shards), out, ledger, manifest, localise))


def _finish(outcome) -> None:
    for name in ("html", "junit", "score", "promoted"):
        if name in outcome.paths:
            _say(f"{name}: {outcome.paths[name]}")
    _say(outcome.summary)
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)


@app.command("serve")
def serve_cmd(
    config: ConfigOpt = None, model: ModelOpt = None, seed: SeedOpt = None, device: DeviceOpt = None,
    mkldnn: MkldnnOpt = None, threads: ThreadsOpt = None,
    instances: Annotated[int, typer.Option(help="Model instances (instance_group count).")] = 1,
    model_repository: Annotated[Path | None, typer.Option("--model-repository", help="Serve this model repository "
                                                          "as it is (copied unchanged; the model options above do "
                                                          "not apply), e.g. a team's own diar_nn_g.")] = None,
) -> None:
    """Serve diar_nn_g on a real Triton server on loopback; stop with Ctrl-C / SIGTERM.

    Uses the tritonserver binary of the nvidia-pytriton wheel (Python backend) and prints the URL to
    give other commands as --backend.
    """
    from lanes.triton.server import ServerOptions, serve_forever

    cfg = _config(config, model, seed, mkldnn, threads, device=device)
    options = ServerOptions(model_spec=cfg.model.spec, seed=cfg.model.seed, device=cfg.device,
                            numerics=cfg.numerics, instances=instances, repository=model_repository,
                            verbatim=model_repository is not None)
    what = f"model repository {model_repository}" if model_repository is not None else "diar_nn_g"
    serve_forever(options, on_ready=lambda url: _say(f"{what} served at {url} (Ctrl-C to stop)"))


@app.command("demo")
def demo_cmd(
    out: Annotated[Path | None, typer.Option(help="Output folder (default: harness-out/demo-<time>).")] = None,
    model: ModelOpt = None,
    blocks: Annotated[int | None, typer.Option(help="Synthetic corpus size (default: [corpus] blocks).")] = None,
    shapes: Annotated[str | None, typer.Option(help="Candidate shapes (default: [shapes] candidates).")] = None,
    config: ConfigOpt = None,
    progress: ProgressOpt = True,
) -> None:
    """The main job on the embedded default: corpus, golden, nightly, sign-off report.

    Synthetic corpus, reference model on the CPU: golden record, then the nightly (verify, candidate
    shapes, score, promote), then the report. Prints where the report is.
    """
    from golden.store import record_golden
    from harness.backends import make_backend
    from harness.corpus import write_corpus
    from harness.corpus.synth import synth_corpus
    from harness.nightly import nightly, plan_for

    start = time.perf_counter()
    cfg = _config(config, model)
    if blocks is not None:
        cfg = cfg.with_overrides(corpus=replace(cfg.corpus, blocks=blocks))
    if shapes:
        cfg = cfg.with_overrides(candidates=_shapes(shapes, cfg.candidates))
    out = out or Path("harness-out") / f"demo-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    be = make_backend(cfg)
    _say(f"main job: model {be.model.describe()['name']} on {cfg.device}, {cfg.corpus.blocks} synthetic blocks, "
         f"candidate shapes {list(cfg.candidates)}, output in {out}")
    corpus = synth_corpus(be.geometry, cfg.corpus.blocks, seed=cfg.corpus.seed, step=cfg.corpus.step or None)
    write_corpus(out / "corpus.parquet", corpus, be.geometry)
    with progress_bar(f"golden record ({len(corpus)} blocks, x2)", 2 * 3 * len(corpus), progress) as tick:
        gold, _ = record_golden(out / "goldens", cfg.name, corpus, be, plan_for(cfg, ()), cfg.to_dict(),
                                progress=tick)
    _say(f"golden {gold.golden_id}: exact lane "
         f"{'reproduced bitwise' if gold.manifest['reproducibility']['bitwise'] else 'NOT bitwise'}")
    outcome = nightly(cfg, gold.path, out / "nightly", be, show_progress=progress)
    _say(f"main job took {time.perf_counter() - start:.0f} s")
    _finish(outcome)
    _say(f"sign-off report: {outcome.paths.get('html')}")


def main() -> None:
    try:
        app()
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("harness: interrupted; nothing partial was written as complete", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
