"""Peak memory of `harness score` on a very large golden: bounded by a batch, not by the corpus.

    python benchmarks/bench_score_large.py [--blocks 100000] [--model lanes.models.null_model:small]
        [--shapes 2] [--workdir DIR] [--keep]

Builds a synthetic golden of N blocks and a run against it (the exact lane and each packed shape)
directly with the golden store's writers (golden.tables.LaneWriter, golden.calls.CallLog), then runs
`python -m harness.cli score` on them in a fresh process and prints its wall time and peak RSS
(and those of the generation, for scale). Running the lanes for 100,000 blocks would take hours and
store 176 GB of audio; scoring never opens the corpus, so:

- the outputs are the null network's (lanes.models.null_model): each window's log-probabilities a row of its
  table chosen by a hash of (block, window), the voiceprint rows those masks give (harness.data.masks), the
  embeddings its table rows; the run's exact lane equals the golden, each packed shape differs from it
  by up to 1e-6 in some windows and rows (within tolerance: every shape passes, not bitwise);
- the call log holds one call per exact-lane block and OP and one per packed call and OP, with their
  block ids, as a run of N blocks writes them (the score summarises it as a stream);
- the manifests are those of a real 4-block recording and run of the same null network, rewritten
  for N blocks and re-sealed; the golden's corpus.parquet is that 4-block corpus, a stand-in the
  score does not open (the manifest's corpus summary says N blocks).

At the full geometry (``--model lanes.models.null_model:full``) a golden holds about 0.24 MB and each run
lane about 0.22 MB per block: 100,000 blocks need about 70 GB of disk; the small geometry
(the default here) about 30 times less. Memory per batch is geometry-bound, not corpus-bound.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from golden.calls import CallLog  # noqa: E402
from golden.manifest import MANIFEST  # noqa: E402
from golden.runs import blocks_digest, load_run  # noqa: E402
from golden.store import CORPUS, load_golden, seal_golden_manifest, write_manifest  # noqa: E402
from golden.tables import GROUP_BLOCKS, LaneWriter  # noqa: E402
from harness.base.jsonio import dumps, seal  # noqa: E402
from harness.corpus.synth import synth_corpus  # noqa: E402
from harness.data.masks import voiceprint_rows  # noqa: E402
from harness.data.numeric_settings import NumericSettings  # noqa: E402
from harness.data.ops import ALL_OPS, Op  # noqa: E402
from harness.data.outputs import LaneOutputs, SegmentationOutputs, VoiceprintOutputs  # noqa: E402
from harness.data.parquet import RUN_COMPRESSION  # noqa: E402
from harness.data.schemas.config_file import (  # noqa: E402
    EvidenceSection,  # noqa: E402
    ModelSection,
)
from harness.pipeline.record import record_golden  # noqa: E402
from harness.pipeline.run import plan_for, run_shapes  # noqa: E402
from harness.release_config import release_config  # noqa: E402
from lanes.backends.backend import InProcessBackend  # noqa: E402
from lanes.models.model_api import load_model  # noqa: E402

RELEASE = "large"
PEAK_REPORTING_CLI = """
import atexit, runpy, sys
atexit.register(lambda: sys.stderr.write(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:'))))
sys.argv = ['harness', *sys.argv[1:]]
runpy.run_module('harness.cli', run_name='__main__')
"""


def template(work: Path, spec: str, shapes: tuple[int, ...]):
    """A real 4-block golden and run of the null network: manifests to rewrite, a corpus stand-in."""
    model = load_model(spec)
    shutil.rmtree(work / "template", ignore_errors=True)
    cfg = release_config(
        name=RELEASE,
        model=ModelSection(spec=spec),
        candidates=shapes,
        numerics=NumericSettings(threads=1),
        evidence=EvidenceSection(arrangements=1),
    )  # today's 2 lanes: the README's measured row
    backend = InProcessBackend(model, cfg.numerics)
    golden, _ = record_golden(
        work / "template" / "goldens", RELEASE, synth_corpus(model.geometry, 4).rows(), backend, cfg
    )
    run = run_shapes(golden, backend, plan_for(cfg), work / "template" / "runs", cfg)
    return model, golden, run


def batch(model, ids: list[str], start: int, rng: np.random.RandomState) -> LaneOutputs:
    """The null network's outputs for blocks ``ids`` (block i is the start+i-th of the corpus)."""
    g = model.geometry
    n = g.windows_per_block
    b = len(ids)
    keys = np.arange(start * n, (start + b) * n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    valid = np.full((b, n), g.window_samples, dtype=np.int32)
    tail = rng.randint(0, n, size=b)  # some blocks end early: a short window, then padding
    for i in np.flatnonzero(rng.uniform(size=b) < 0.3):
        valid[i, tail[i]] = rng.randint(1, g.window_samples)
        valid[i, tail[i] + 1 :] = 0
    logprobs = model._segmentation[keys % np.uint64(model._segmentation.shape[0])]
    logprobs += model._shift[(keys >> np.uint64(32)) % np.uint64(model._shift.shape[0])]
    seg = SegmentationOutputs(list(ids), valid, logprobs.reshape(b, n, g.frames_per_window, g.classes))
    vps = {}
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        parts = [voiceprint_rows(seg.logprobs[i], valid[i], op, g) for i in range(b)]
        counts = [p.idx.shape[0] for p in parts]
        window = np.concatenate([p.idx for p in parts])
        row_keys = keys.reshape(b, n)[np.repeat(np.arange(b), counts), window] + np.uint64(int(op))
        emb = model._embedding[row_keys % np.uint64(model._embedding.shape[0])]
        vps[op] = VoiceprintOutputs(
            op,
            np.repeat(np.array(ids, dtype=object), counts),
            np.concatenate([np.arange(c, dtype=np.int32) for c in counts]),
            window,
            np.concatenate([p.speakers for p in parts]),
            np.concatenate([p.weights for p in parts]),
            emb,
        )
    return LaneOutputs(seg, vps)


def nudged(out: LaneOutputs, rng: np.random.RandomState) -> LaneOutputs:
    """A packed shape's outputs: up to 1e-6 off in some windows and rows (a GPU's other kernels)."""
    seg = out.segmentation
    logprobs = seg.logprobs.copy()
    hit = rng.uniform(size=logprobs.shape[:2]) < 0.05
    logprobs[hit] += rng.uniform(-1e-6, 1e-6, size=(int(hit.sum()), *logprobs.shape[2:])).astype(np.float32)
    vps = {}
    for op, v in out.voiceprint.items():
        emb = v.embedding.copy()
        rows = rng.uniform(size=emb.shape[0]) < 0.05
        emb[rows] += rng.uniform(-1e-6, 1e-6, size=(int(rows.sum()), emb.shape[1])).astype(np.float32)
        vps[op] = VoiceprintOutputs(op, v.block_ids, v.row, v.window, v.speaker, v.weights, emb)
    return LaneOutputs(SegmentationOutputs(list(seg.block_ids), seg.valid, logprobs), vps)


def call_rows(ids: list[str], shapes: tuple[int, ...], g, rng: np.random.RandomState) -> list[dict]:
    """The calls a run makes over ``ids`` (one group): the exact lane per block, each shape per k blocks."""
    out = []
    for op in ALL_OPS:
        for b in ids:
            out.append(_call("exact", 1, op, [b], g, rng))
        for k in shapes:
            for s in range(0, len(ids), k):
                out.append(_call("fast", k, op, ids[s : s + k], g, rng))
    return out


def _call(lane: str, k: int, op: Op, ids: list[str], g, rng) -> dict:
    n = len(ids)
    return {
        "lane": lane,
        "shape": k,
        "op": int(op),
        "blocks": n,
        "windows": n * g.windows_per_block,
        "rows": 0 if op is Op.SEGMENTATION else 12 * n,
        "request_bytes": n * 4 * g.window_samples * 2,
        "wall_s": float(rng.uniform(0.5, 1.5)) * 1e-3 * n / (1.0 + 0.1 * k),
        "peak_device_bytes": None,
        "replica": 0,
        "block_ids": list(ids),
    }


def build(work: Path, spec: str, blocks: int, shapes: tuple[int, ...]) -> tuple[Path, Path]:
    model, small_golden, small_run = template(work, spec, shapes)
    g = model.geometry
    gdir, rdir = work / "goldens" / RELEASE, work / "runs" / "large-run"
    for d in (gdir, rdir):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    lanes = ["exact", *(f"k{k}" for k in shapes)]
    golden_writer = LaneWriter(gdir, g, ALL_OPS, decisions=True)
    lane_writers = {
        lane: LaneWriter(rdir / lane, g, ALL_OPS, decisions=False, compression=RUN_COMPRESSION) for lane in lanes
    }
    calls = CallLog(rdir / "calls.parquet")
    golden_calls = CallLog(gdir / "calls.parquet")
    rng = np.random.RandomState(0)
    ids_all: list[str] = []
    for start in range(0, blocks, GROUP_BLOCKS):
        ids = [f"blk-{i:07d}" for i in range(start, min(blocks, start + GROUP_BLOCKS))]
        ids_all += ids
        out = batch(model, ids, start, rng)
        golden_writer.write(out)
        lane_writers["exact"].write(out)
        for k in shapes:
            lane_writers[f"k{k}"].write(nudged(out, rng))
        calls.extend(call_rows(ids, shapes, g, rng))
        golden_calls.extend(call_rows(ids, (), g, rng))
    files = {CORPUS: small_golden.manifest.files[CORPUS].model_dump(mode="json")}
    shutil.copy(small_golden.path / CORPUS, gdir / CORPUS)
    files.update(golden_writer.close())
    files["calls.parquet"] = golden_calls.close()
    fields = {
        k: v
        for k, v in small_golden.manifest.model_dump(mode="json").items()
        if k not in ("kind", "format", "created", "files", "golden_id", "manifest_sha256")
    }
    fields["corpus"] = {**fields["corpus"], "blocks": blocks}
    write_manifest(gdir, seal_golden_manifest(fields, files))
    golden = load_golden(gdir)
    run_files = {f"{lane}/{name}": entry for lane, w in lane_writers.items() for name, entry in w.close().items()}
    run_files["calls.parquet"] = calls.close()
    manifest = {k: v for k, v in small_run.manifest.model_dump(mode="json").items() if k != "manifest_sha256"}
    manifest.update(
        run_id="large-run",
        golden_id=golden.golden_id,
        golden_manifest_sha256=golden.manifest_sha256,
        blocks=blocks,
        blocks_sha256=blocks_digest(ids_all),
        files=run_files,
    )
    (rdir / MANIFEST).write_text(dumps(seal(manifest, "manifest_sha256"), indent=2) + "\n")
    load_run(rdir)
    return gdir, rdir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=100_000)
    parser.add_argument("--model", default="lanes.models.null_model:small")
    parser.add_argument("--shapes", default="2")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the golden and run")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    shapes = tuple(int(s) for s in args.shapes.split(","))
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-score-large-"))
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    gdir, rdir = build(work, args.model, args.blocks, shapes)
    built_s = time.perf_counter() - start
    build_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    sizes = {d.name: sum(p.stat().st_size for p in d.rglob("*") if p.is_file()) for d in (gdir, rdir)}
    print(
        f"built a {args.blocks}-block golden ({sizes[gdir.name] / 2**30:.2f} GiB) and run "
        f"({sizes[rdir.name] / 2**30:.2f} GiB, lanes exact + {list(shapes)}) of {args.model} in {built_s:.0f} s "
        f"(peak RSS {build_rss / 2**20:.0f} MB)",
        flush=True,
    )
    # `harness score` in a fresh process that reports its own peak RSS when it exits (a forked child's
    # ru_maxrss would count the pages it shared with this process before exec)
    cmd = [
        sys.executable,
        "-c",
        PEAK_REPORTING_CLI,
        "score",
        "--golden",
        str(gdir),
        "--run",
        str(rdir),
        "--out",
        str(work / "score.json"),
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peaks = [int(line.split()[1]) * 1024 for line in proc.stderr.splitlines() if line.startswith("VmHWM:")]
    peak = peaks[-1] if peaks else float("nan")
    print(proc.stdout.strip())
    if proc.returncode not in (0, 1):
        raise SystemExit(f"harness score failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    print(
        f"harness score of {args.blocks} blocks ({len(shapes) + 1} lanes): exit {proc.returncode}, "
        f"{wall:.0f} s, peak RSS {peak / 2**20:.0f} MB"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "blocks": args.blocks,
                    "model": args.model,
                    "shapes": list(shapes),
                    "score_exit": proc.returncode,
                    "score_wall_s": wall,
                    "score_peak_rss_mb": peak / 2**20,
                    "build_s": built_s,
                    "golden_bytes": sizes[gdir.name],
                    "run_bytes": sizes[rdir.name],
                },
                indent=2,
            )
            + "\n"
        )
    if not args.keep:
        shutil.rmtree(work if args.workdir is None else work / "goldens", ignore_errors=True)
        shutil.rmtree(work / "runs", ignore_errors=True)


if __name__ == "__main__":
    main()
