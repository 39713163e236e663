"""Does the copy of request n+1 overlap the compute of request n? (lanes/running/staging.py)

    python benchmarks/gpu_copy_overlap.py --device cuda:0 [--model full] [--blocks 32] [--shape 8] [--json X]

Runs the same lanes (the exact lane and one packed shape) twice on the in-process backend, pipelined:
**staged** (the model's host part at submission, its inputs copied from pinned buffers on a copy stream)
and **unstaged** (the model behind its ``infer`` alone: cut, copy and compute in the device queue, in
series). On CUDA each run is traced by ``torch.profiler``; from the trace it prints, per run, the time of
host-to-device copies, how much of it ran while a kernel ran on another stream (the overlap this is
about: near 0 unstaged, most of it staged), the device's busy time (kernels and copies, their union)
and the lanes' wall; and the ratios staged / unstaged, measured in this run. It also checks that the two
runs' outputs are bitwise equal. Exit status 1 if they differ, or if on CUDA the staged run overlaps no
copy at all (the pipeline is not doing what it says); 0 otherwise. Without CUDA (``--device cpu``) it
runs both and compares the outputs and walls only: there is no copy to overlap.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _overlap(copies: list[tuple[float, float, int]], kernels: list[tuple[float, float, int]]) -> float:
    """Microseconds of copy time during which a kernel of another stream ran."""
    by_stream: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for a, b, s in kernels:
        by_stream[s].append((a, b))
    total = 0.0
    for a, b, s in copies:
        others = [iv for stream, ivs in by_stream.items() if stream != s for iv in ivs]
        clipped = [(max(a, x), min(b, y)) for x, y in others if min(b, y) > max(a, x)]
        total += _union(clipped)
    return total


def trace_figures(trace: Path) -> dict[str, float]:
    events = json.loads(trace.read_text()).get("traceEvents", [])
    copies, kernels = [], []
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        start, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        stream = int((e.get("args") or {}).get("stream", -1))
        cat, name = str(e.get("cat", "")), str(e.get("name", ""))
        if cat == "gpu_memcpy" and "HtoD" in name:
            copies.append((start, end, stream))
        elif cat == "kernel":
            kernels.append((start, end, stream))
    copy_us = _union([(a, b) for a, b, _ in copies])
    return {
        "h2d_copy_ms": copy_us / 1e3,
        "h2d_overlapped_ms": _overlap(copies, kernels) / 1e3,
        "device_busy_ms": _union([(a, b) for a, b, _ in copies + kernels]) / 1e3,
        "kernels": float(len(kernels)),
        "copies": float(len(copies)),
    }


def run_once(model, blocks, shape: int, device: str, numerics, workdir: Path, label: str) -> tuple[dict, dict]:
    from lanes.backends.backend import InProcessBackend
    from lanes.running.run_plan import RunPlan
    from tests.runner_digest import outputs_digest, run_collect

    backend = InProcessBackend(model, numerics, device)
    plan = RunPlan(shapes=(shape,))
    run_collect(blocks[:2], backend, plan)  # warm: kernels chosen, pinned ring and allocator filled
    figures: dict[str, float] = {}
    if device.startswith("cuda"):
        import torch
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            start = time.perf_counter()
            outputs, _ = run_collect(blocks, backend, plan)
            torch.cuda.synchronize(device)
            wall = time.perf_counter() - start
        trace = workdir / f"{label}.json"
        prof.export_chrome_trace(str(trace))
        figures = trace_figures(trace)
    else:
        start = time.perf_counter()
        outputs, _ = run_collect(blocks, backend, plan)
        wall = time.perf_counter() - start
    figures["wall_ms"] = wall * 1e3
    return figures, {"digest": outputs_digest(outputs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--model", default="full", help="a model spec (full, small, module:factory, a .pt)")
    parser.add_argument("--blocks", type=int, default=32)
    parser.add_argument("--shape", type=int, default=8, help="the packed shape run beside the exact lane")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    from harness.corpus.synth import synth_corpus
    from harness.data.numeric_settings import NumericSettings
    from lanes.models.model_api import load_model, staged_entry
    from lanes.running.staging import InferOnly

    model = load_model(args.model, device=args.device)
    if staged_entry(model) is None:
        print(
            f"gpu_copy_overlap: model {args.model!r} does not stage (no stage(); lanes/models/model_api.py): "
            "nothing to measure"
        )
        return 1
    blocks = synth_corpus(model.geometry, args.blocks, seed=0).blocks
    numerics = NumericSettings()
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, m in (("unstaged", InferOnly(model)), ("staged", model)):
            rows[label], check = run_once(m, blocks, args.shape, args.device, numerics, Path(tmp), label)
            rows[label]["digest"] = check["digest"]  # type: ignore[assignment]
    same = rows["staged"]["digest"] == rows["unstaged"]["digest"]
    keys = [k for k in rows["staged"] if k != "digest"]
    print(f"gpu_copy_overlap: {args.model} on {args.device}, {args.blocks} blocks, exact lane + k={args.shape}")
    print(f"{'':>22}" + "".join(f"{k:>20}" for k in keys))
    for label, row in rows.items():
        print(f"{label:>22}" + "".join(f"{row[k]:>20.2f}" for k in keys))
    ratios = {k: rows["staged"][k] / rows["unstaged"][k] for k in keys if rows["unstaged"][k]}
    print(f"{'staged / unstaged':>22}" + "".join(f"{ratios.get(k, float('nan')):>20.3f}" for k in keys))
    if "h2d_copy_ms" in rows["staged"]:
        share = (
            rows["staged"]["h2d_overlapped_ms"] / rows["staged"]["h2d_copy_ms"]
            if rows["staged"]["h2d_copy_ms"]
            else 0.0
        )
        print(f"staged: {share:.1%} of the host-to-device copy time ran while a kernel ran on another stream")
        rows["staged"]["overlapped_share"] = share
    print("outputs: bitwise equal" if same else "outputs: DIFFER between staged and unstaged runs")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "rows": rows,
                    "ratios": ratios,
                    "bitwise_equal": same,
                },
                indent=2,
            )
            + "\n"
        )
    if not same:
        return 1
    if args.device.startswith("cuda") and not rows["staged"].get("h2d_overlapped_ms"):
        print("gpu_copy_overlap: the staged run overlapped no copy with compute")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
