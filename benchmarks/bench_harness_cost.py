"""What the harness itself costs per block, with a network that costs nothing: does it keep a GPU busy?

    python benchmarks/bench_harness_cost.py [--blocks 64,256,1024] [--shapes 1,2,4,8,16,32]
        [--model lanes.models.null_model:full] [--seg-ms 0.5] [--vp-ms 1.0] [--network-from RUN_OR_GOLDEN]
        [--repeat 1] [--workdir DIR] [--json OUT.json]

On a GPU the networks are 50-200x faster than on this CPU, so the harness's own cost decides how
long the GPU waits. This benchmark plugs a zero-cost network (``lanes.models.null_model:full``: table
look-ups at the full reference geometry, 160,000-sample windows, 589 frames, 7 classes, 256-dim
embeddings; it still validates every request as a model adapter does) into the real pipeline and
runs, for each corpus size N, the five steps of a nightly, each in a fresh process (so each has
its own peak RSS):

    record   harness.pipeline.record.record_golden   (corpus copy, exact lane x2, golden written)
    run      harness.pipeline.run.run_shapes          (exact lane + every packed shape, run written)
    score    harness.pipeline.score.score_run + write_score
    promote  harness.pipeline.promote.promote_file
    report   harness.pipeline.commands.lane.report (what `harness report` runs)

and prints per step: wall time, the null network's time (request validation and look-ups, from
the call log), the harness's time (the rest) in ms per block, per block and lane, and per window
and lane; the harness's CPU time (every thread: the writers, readers and hashing run beside the
lanes); peak RSS; and the overhead fraction: harness ms per block and lane over the GPU network
time of one block in one lane (ASSUMED, configurable: ``--seg-ms`` per segmentation window,
``--vp-ms`` per voiceprint window and voiceprint OP; or measured in a real call log with
``--network-from``: a run's largest packed shape, or a golden's exact lane). Lanes per step:
record 2 (the exact lane twice), run and score 1 + shapes, promote and report 1 (their cost does
not grow with the lanes).

The corpus is the synthetic one (harness.corpus.synth), built once for the largest N and cut for
the smaller ones (``--workdir`` keeps it between invocations). Timings are medians over
``--repeat`` repetitions.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

STEPS = ("record", "run", "score", "promote", "report")
RELEASE = "bench"
MARK = "BENCH-RESULT "


# ------------------------------------------------------------------------------------------ child


def _cpu() -> float:
    """CPU seconds of this process so far, every thread (user + system)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _memory() -> dict[str, int]:
    """VmHWM (peak RSS) and VmRSS of this process, bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0]) * 1024
    return out


def _config(model: str, shapes: tuple[int, ...]):
    from harness.data.numeric_settings import NumericSettings

    # the cost of each plain lane (one arrangement): --arrangements N adds lanes, not cost per lane
    from harness.data.schemas.config_file import EvidenceSection, ModelSection
    from harness.release_config import release_config

    return release_config(
        name=RELEASE,
        model=ModelSection(spec=model),
        candidates=shapes,
        numerics=NumericSettings(threads=1),
        evidence=EvidenceSection(arrangements=1),
    )


def child(step: str, work: Path, corpus: Path, model: str, shapes: tuple[int, ...]) -> dict:
    """One step in this (fresh) process; the numbers as a dict."""
    from golden.runs import load_run
    from golden.store import load_golden
    from harness.pipeline.backends import make_backend

    cfg = _config(model, shapes)
    goldens, runs = work / "goldens", work / "runs"
    golden_dir = goldens / RELEASE
    score_path, ledger, manifest = work / "score.json", work / "ledger.json", work / "promoted-shapes.json"
    backend = make_backend(cfg) if step in ("record", "run") else None
    network_cpu = [0.0]
    if backend is not None:  # the network's own CPU time (its thread's), apart from the harness's
        infer = backend.model.infer

        def timed_infer(request):
            start = time.thread_time()
            try:
                return infer(request)
            finally:
                network_cpu[0] += time.thread_time() - start

        backend.model.infer = timed_infer
    result: dict = {"step": step}
    if step == "record":
        from harness.data.corpus_reader import CorpusReader
        from harness.pipeline.record import record_golden

        base, cpu = _memory()["VmRSS"], _cpu()
        start = time.perf_counter()
        golden, _ = record_golden(goldens, RELEASE, CorpusReader(corpus, backend.geometry).rows(), backend, cfg)
        wall = time.perf_counter() - start
        calls = golden.calls()
        result.update(blocks=golden.blocks, bitwise=golden.manifest.reproducibility.bitwise)
    elif step == "run":
        from harness.pipeline.run import plan_for, run_shapes

        base, cpu = _memory()["VmRSS"], _cpu()
        start = time.perf_counter()
        golden = load_golden(golden_dir, expect_fingerprint=backend.fingerprint)
        run = run_shapes(golden, backend, plan_for(cfg), runs, cfg)
        wall = time.perf_counter() - start
        calls = run.calls()
        result.update(blocks=golden.blocks, run=str(run.path))
    elif step == "score":
        from harness.pipeline.score import score_run, write_score

        (run_dir,) = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")]
        base, cpu = _memory()["VmRSS"], _cpu()
        start = time.perf_counter()
        golden = load_golden(golden_dir)
        score = score_run(golden, load_run(run_dir), cfg.tolerances)
        write_score(score_path, score)
        wall = time.perf_counter() - start
        calls = []
        result.update(
            blocks=golden.blocks, verdict=score.verdict, shapes={k: s.verdict for k, s in score.shapes.items()}
        )
    elif step == "promote":
        from harness.pipeline.promote import promote_file

        base, cpu = _memory()["VmRSS"], _cpu()
        start = time.perf_counter()
        _, transitions = promote_file(score_path, cfg, ledger, manifest)
        wall = time.perf_counter() - start
        calls = []
        result.update(promoted=sorted(t.shape for t in transitions if t.after == "promoted"))
    elif step == "report":
        from harness.pipeline.commands.lane import report

        base, cpu = _memory()["VmRSS"], _cpu()
        start = time.perf_counter()
        report(score_path, work / "report", ledger, manifest, work / "junit.xml", None)  # `harness report`
        wall = time.perf_counter() - start
        calls = []
    else:
        raise SystemExit(f"unknown step {step!r}")
    mem = _memory()
    result.update(
        cpu_s=_cpu() - cpu,
        network_cpu_s=network_cpu[0],
        wall_s=wall,
        network_s=float(sum(c["wall_s"] for c in calls)),
        calls=len(calls),
        peak_rss=mem["VmHWM"],
        base_rss=base,
    )
    return result


# ------------------------------------------------------------------------------------------ parent


def prepare_corpora(workdir: Path, model: str, sizes: list[int]) -> dict[int, Path]:
    """Corpus files of each size: the synthetic corpus built once for the largest, cut for the others."""
    from harness.corpus.synth import synth_corpus
    from harness.data.corpus_reader import CorpusReader
    from harness.data.corpus_schema import write_corpus
    from lanes.models.model_api import load_model

    geometry = load_model(model).geometry
    tag = model.replace(":", "-").replace("/", "-")
    largest = max(sizes)
    big = workdir / f"corpus-{tag}-{largest}.parquet"
    if not big.exists():
        existing = sorted(
            (p for p in workdir.glob(f"corpus-{tag}-*.parquet") if int(p.stem.rsplit("-", 1)[1]) >= largest),
            key=lambda p: int(p.stem.rsplit("-", 1)[1]),
        )
        if existing:
            big = existing[0]
        else:
            start = time.perf_counter()
            write_corpus(big, synth_corpus(geometry, largest), geometry)
            print(f"built a {largest}-block synthetic corpus in {time.perf_counter() - start:.0f} s", flush=True)
    out = {}
    for n in sizes:
        path = workdir / f"corpus-{tag}-{n}.parquet"
        if not path.exists():
            write_corpus(path, itertools.islice(CorpusReader(big, geometry).rows(), n), geometry)
        out[n] = path
    return out


def run_step(step: str, work: Path, corpus: Path, model: str, shapes: tuple[int, ...]) -> dict:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        step,
        "--work",
        str(work),
        "--corpus",
        str(corpus),
        "--model",
        model,
        "--shapes",
        ",".join(map(str, shapes)),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"step {step} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len(MARK) :])


def network_times(path: Path) -> tuple[float, float, str]:
    """(ms per segmentation window, ms per voiceprint window and OP, which calls) from a real call log:
    a run's largest packed shape (the fastest per window: the harness's cost weighs most there), or a
    golden's exact lane."""
    from golden.runs import load_run
    from golden.store import load_golden

    if json.loads((path / "manifest.json").read_text()).get("kind") == "harness.run":
        run = load_run(path)
        k = max(run.shapes)
        calls = [c for c in run.iter_calls() if c["lane"] == "fast" and int(c["shape"]) == k]
        which = f"run {run.run_id}, shape k={k}"
    else:
        calls = [c for c in load_golden(path).iter_calls() if c["lane"] == "exact"]
        which = f"golden {path.name}, exact lane"
    seg = [c for c in calls if c["op"] == 0]
    vp = [c for c in calls if c["op"] != 0]
    per = lambda cs: 1e3 * sum(c["wall_s"] for c in cs) / max(1, sum(c["windows"] for c in cs))  # noqa: E731
    return per(seg), per(vp), which


def lanes_of(step: str, shapes: tuple[int, ...]) -> int:
    return {"record": 2, "run": 1 + len(shapes), "score": 1 + len(shapes)}.get(step, 1)


def summarise(
    step: str, reps: list[dict], n: int, shapes: tuple[int, ...], windows_per_block: int, gpu_block_ms: float
) -> dict:
    med = lambda key: statistics.median(r[key] for r in reps)  # noqa: E731
    lanes = lanes_of(step, shapes)
    wall, net = med("wall_s"), med("network_s")
    harness_ms = 1e3 * statistics.median(r["wall_s"] - r["network_s"] for r in reps)
    per_block_lane = harness_ms / n / lanes
    cpu_ms = 1e3 * statistics.median(r["cpu_s"] - r["network_cpu_s"] for r in reps)
    return {
        "step": step,
        "blocks": n,
        "lanes": lanes,
        "repeats": len(reps),
        "wall_s": wall,
        "network_s": net,
        "cpu_s": med("cpu_s"),
        "harness_cpu_ms_per_block_lane": cpu_ms / n / lanes,
        "network_ms_per_block_lane": 1e3 * net / n / lanes,
        "harness_ms_per_block": harness_ms / n,
        "harness_ms_per_block_lane": per_block_lane,
        "harness_ms_per_window_lane": per_block_lane / windows_per_block,
        "overhead_fraction": per_block_lane / gpu_block_ms,
        "peak_rss_mb": med("peak_rss") / 2**20,
        "base_rss_mb": med("base_rss") / 2**20,
        **{k: reps[-1][k] for k in ("verdict", "shapes", "promoted", "bitwise") if k in reps[-1]},
    }


def print_table(rows: list[dict], gpu: dict) -> None:
    print(
        f"GPU network time per block and lane: {gpu['block_ms']:.2f} ms ({gpu['source']}: "
        f"{gpu['seg_ms']:.3g} ms per segmentation window, {gpu['vp_ms']:.3g} ms per voiceprint window and OP, "
        f"{gpu['windows']} windows, {gpu['vp_ops']} voiceprint OPs)"
    )
    head = (
        f"{'N':>6} {'step':<8} {'lanes':>5} {'wall s':>8} {'null net ms/blk/lane':>20} {'harness ms/blk':>14} "
        f"{'ms/blk/lane':>11} {'ms/win/lane':>11} {'overhead':>9} {'CPU ms/blk/lane':>15} {'peak RSS MB':>11}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['blocks']:>6} {r['step']:<8} {r['lanes']:>5} {r['wall_s']:>8.2f} "
            f"{r['network_ms_per_block_lane']:>20.3f} {r['harness_ms_per_block']:>14.3f} "
            f"{r['harness_ms_per_block_lane']:>11.3f} {r['harness_ms_per_window_lane']:>11.4f} "
            f"{r['overhead_fraction']:>8.1%} {r['harness_cpu_ms_per_block_lane']:>15.3f} {r['peak_rss_mb']:>11.0f}"
        )
    for n in sorted({r["blocks"] for r in rows}):
        mine = {r["step"]: r for r in rows if r["blocks"] == n}
        if "run" in mine and "score" in mine:
            both = mine["run"]["harness_ms_per_block_lane"] + mine["score"]["harness_ms_per_block_lane"]
            print(
                f"N={n}: run + score (lane loop, writing, reading, scoring): {both:.3f} ms per block and lane, "
                f"{both / gpu['block_ms']:.1%} of the GPU network time; verdict {mine['score'].get('verdict')}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", default="64,256,1024", help="corpus sizes N, comma-separated")
    parser.add_argument("--shapes", default="1,2,4,8,16,32", help="packed shapes of the run step")
    parser.add_argument(
        "--model", default="lanes.models.null_model:full", help="model spec (the null network by default)"
    )
    parser.add_argument("--steps", default=",".join(STEPS), help="steps to time (each needs the ones before it)")
    parser.add_argument("--seg-ms", type=float, default=0.5, help="ASSUMED GPU ms per segmentation window")
    parser.add_argument("--vp-ms", type=float, default=1.0, help="ASSUMED GPU ms per voiceprint window and OP")
    parser.add_argument(
        "--network-from",
        type=Path,
        help="a run (its largest shape) or golden (its exact lane) made "
        "on the GPU: network times per window from its call log instead of --seg-ms/--vp-ms",
    )
    parser.add_argument("--repeat", type=int, default=1, help="repetitions per N (medians are printed)")
    parser.add_argument("--workdir", type=Path, help="keep corpora (and the last repetition's files) here")
    parser.add_argument("--json", type=Path, help="write every number here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    shapes = tuple(int(s) for s in args.shapes.split(","))
    if args.child:
        print(MARK + json.dumps(child(args.child, args.work, args.corpus, args.model, shapes)), flush=True)
        return

    from lanes.models.model_api import load_model

    g = load_model(args.model).geometry
    sizes = [int(s) for s in args.blocks.split(",")]
    steps = [s for s in STEPS if s in args.steps.split(",")]
    seg_ms, vp_ms, source = args.seg_ms, args.vp_ms, "assumed"
    if args.network_from is not None:
        seg_ms, vp_ms, which = network_times(args.network_from)
        source = f"measured: {which}"
    vp_ops = 2
    gpu = {
        "seg_ms": seg_ms,
        "vp_ms": vp_ms,
        "source": source,
        "windows": g.windows_per_block,
        "vp_ops": vp_ops,
        "block_ms": g.windows_per_block * (seg_ms + vp_ops * vp_ms),
    }
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-harness-cost-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(
        f"model {args.model}, geometry {g.window_samples} samples x {g.windows_per_block} windows, "
        f"{g.frames_per_window} frames x {g.classes} classes, {g.embedding_dim}-dim; shapes {list(shapes)}; "
        f"N {sizes}; {args.repeat} repetition(s); work in {workdir}",
        flush=True,
    )
    corpora = prepare_corpora(workdir, args.model, sizes)
    rows = []
    for n in sizes:
        reps: dict[str, list[dict]] = {s: [] for s in steps}
        for rep in range(args.repeat):
            work = workdir / f"n{n}"
            subprocess.run(["rm", "-rf", str(work)], check=True)
            work.mkdir()
            for step in steps:
                reps[step].append(run_step(step, work, corpora[n], args.model, shapes))
                r = reps[step][-1]
                print(
                    f"  N={n} rep {rep + 1} {step}: {r['wall_s']:.2f} s, peak RSS {r['peak_rss'] / 2**20:.0f} MB",
                    flush=True,
                )
        for step in steps:
            rows.append(summarise(step, reps[step], n, shapes, g.windows_per_block, gpu["block_ms"]))
        if args.workdir is None:
            subprocess.run(["rm", "-rf", str(workdir / f"n{n}")], check=True)
    print_table(rows, gpu)
    if args.json:
        args.json.write_text(
            json.dumps({"model": args.model, "shapes": list(shapes), "gpu": gpu, "rows": rows}, indent=2) + "\n"
        )
    if args.workdir is None:
        subprocess.run(["rm", "-rf", str(workdir)], check=True)


if __name__ == "__main__":
    main()
