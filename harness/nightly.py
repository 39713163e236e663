"""The nightly job: one command for the GPU CI job (CPU too), failing loudly and specifically.

verify golden reproduction -> run every candidate shape (interleaved with the exact lane)
-> score -> localise failures -> update the ledger (revoke what fails) -> promoted-shapes
manifest -> sign-off report + JUnit XML -> exit 0 only when everything holds.

With ``shard`` it runs a deterministic part of the corpus and stops after scoring its
part; :func:`merge` combines the shards into one score, ledger update and report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from golden.runs import Run, load_run, merge_runs, write_run
from golden.store import Golden, load_golden
from harness.config import ReleaseConfig
from harness.errors import HarnessError
from harness.evaluate import score_run, write_score
from harness.jsonio import write_json_atomic
from harness.localise import localise_shape
from harness.progress import progress_bar
from harness.promotion import load_ledger, promoted_manifest, update_ledger
from harness.shards import Shard
from lanes.backend import Backend
from lanes.runner import RunPlan, run_lanes

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


@dataclass
class NightlyOutcome:
    exit_code: int
    summary: str
    paths: dict[str, Path] = field(default_factory=dict)
    score: dict | None = None


def plan_for(config: ReleaseConfig, shapes: tuple[int, ...] | None = None) -> RunPlan:
    return RunPlan(shapes=tuple(shapes if shapes is not None else config.candidates),
                   release_shapes=config.release_shapes, mode=config.mode, pad_to_fixed=config.pad_to_fixed,
                   include_exact=True, mask_policy=config.masks)


def nightly(config: ReleaseConfig, golden_path: Path, out: Path, backend: Backend, shard: Shard | None = None,
            ledger_path: Path | None = None, manifest_path: Path | None = None, localise: bool = True,
            show_progress: bool = True) -> NightlyOutcome:
    golden = load_golden(golden_path, expect_fingerprint=backend.fingerprint)
    target = golden
    if shard is not None:
        target = golden.subset([golden.corpus.ids[i] for i in shard.select(golden.corpus.ids)])
        if not target.corpus.ids:
            raise HarnessError(f"shard {shard} holds no block of the {len(golden.corpus)}-block corpus; "
                               "use fewer shards")
    plan = plan_for(config)
    out.mkdir(parents=True, exist_ok=True)
    with progress_bar(f"nightly {len(target.corpus)} blocks, shapes {list(plan.shapes)}",
                      plan.calls(len(target.corpus)), show_progress) as tick:
        result = run_lanes(target.corpus.blocks, backend, plan, voiceprint_inputs=golden.voiceprint_inputs(),
                           progress=tick)
    extra = {"shard": str(shard)} if shard else {}
    run = write_run(out / "runs", result, plan, backend, golden.golden_id, config.to_dict(), target.corpus.ids,
                    extra=extra)
    if shard is not None:
        score = score_run(target, run, config.tolerances)
        path = write_score(out / "score.json", score)
        return NightlyOutcome(EXIT_PASS, f"shard {shard}: {len(target.corpus)} blocks run ({score['verdict']} on "
                              f"this shard alone); combine shards with `harness merge`",
                              {"run": run.path, "score": path}, score)
    model = getattr(backend, "model", None) or (config.model.load("cpu") if localise else None)
    return finalize(config, golden, run, out, ledger_path, manifest_path, model if localise else None)


def merge(config: ReleaseConfig, golden_path: Path, shard_dirs: list[Path], out: Path,
          ledger_path: Path | None = None, manifest_path: Path | None = None, localise: bool = True) -> NightlyOutcome:
    golden = load_golden(golden_path)
    runs = []
    for d in shard_dirs:
        found = sorted((Path(d) / "runs").glob("*/manifest.json")) if (Path(d) / "runs").is_dir() else []
        if (Path(d) / "manifest.json").is_file():
            found = [Path(d) / "manifest.json"]
        if len(found) != 1:
            raise HarnessError(f"{d}: expected one shard run (a nightly --shard output folder), found {len(found)}")
        runs.append(load_run(found[0].parent))
    for r in runs:
        if r.manifest.get("golden_id") != golden.golden_id:
            raise HarnessError(f"{r.path}: ran against golden {r.manifest.get('golden_id')}, not {golden.golden_id}")
    covered = {b for r in runs for b in r.manifest["corpus_blocks"]}
    missing = [b for b in golden.corpus.ids if b not in covered]
    if missing:
        raise HarnessError(f"shards do not cover the corpus: {len(missing)} block(s) missing, first {missing[0]!r} "
                           "(did every shard i/n run?)")
    merged = merge_runs(out / "runs", runs)
    model = config.model.load("cpu") if localise else None
    return finalize(config, golden, merged, out, ledger_path, manifest_path, model)


def finalize(config: ReleaseConfig, golden: Golden, run: Run, out: Path, ledger_path: Path | None,
             manifest_path: Path | None, model) -> NightlyOutcome:
    """Score, localise, update the ledger, write the promoted manifest, the report and JUnit."""
    from reports import write_junit, write_report
    from reports.junit import summary_line

    localisation = None
    score = score_run(golden, run, config.tolerances)
    if model is not None and model.fingerprint != golden.fingerprint:
        model = None  # e.g. a Triton server running another spec than the config names: nothing to hook
    if model is not None:
        localisation = {}
        for k, shape in score["shapes"].items():
            if shape["verdict"] == "fail":
                localisation[k] = localise_shape(model, golden, run.shapes, shape, run.manifest.get("pad_to_fixed"))
        if localisation:
            score = score_run(golden, run, config.tolerances, localisation=localisation)
    paths = {"run": run.path, "score": write_score(out / "score.json", score)}
    ledger_path = ledger_path or golden.path.parent / "ledger.json"
    manifest_path = manifest_path or golden.path.parent / "promoted-shapes.json"
    ledger = load_ledger(ledger_path)
    transitions = update_ledger(ledger, score)
    paths["ledger"] = write_json_atomic(ledger_path, ledger)
    release_shapes = {str(int(op)): list(ks) for op, ks in config.release_shapes.items()}
    paths["promoted"] = write_json_atomic(manifest_path, promoted_manifest(ledger, release_shapes))
    # the run's interleaved exact lane is the golden reproduction: it travels inside the score
    paths.update(write_report(out / "report", score, ledger=ledger, transitions=transitions,
                              title=f"Release sign-off: {golden.release}"))
    paths["junit"] = write_junit(out / "junit.xml", score, None)
    summary = summary_line(score, None)
    (out / "summary.txt").write_text(summary + "\n")
    paths["summary"] = out / "summary.txt"
    code = EXIT_PASS if score["verdict"] == "pass" else EXIT_FAIL
    return NightlyOutcome(code, summary, paths, score)
