"""Summarise a gpu_nightly.sh output folder: OUT/summary.md and OUT/summary.json.

    python benchmarks/gpu_summary.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from golden.store import load_golden
from harness.pipeline.record import summarize_changes
from lanes.diar_nn_g import DiarNNG

PROFILES = ("release", "speed")


def rows_for(score: dict) -> list[dict]:
    rows = []
    throughput = score.get("throughput", {})
    for k, shape in sorted(score["shapes"].items(), key=lambda kv: int(kv[0])):
        t = throughput.get(k, {})
        for op, v in sorted(shape["ops"].items()):
            m = v["metrics"]
            rows.append({
                "shape": int(k), "op": int(op), "verdict": "pass" if v["passed"] else "fail",
                "bitwise": m.get("bitwise"), "max_abs": m.get("max_abs_finite", m.get("max_abs")),
                "max_ulp": m.get("max_ulp"),
                "flips_near_tie": m.get("argmax_flips_near_tie"), "flips_confident": m.get("argmax_flips_confident"),
                "min_cosine": m.get("min_cosine"),
                "blocks_per_s": (t.get("ops", {}).get(op) or {}).get("blocks_per_s"),
                "speedup": t.get("speedup"),
                "peak_device_mb": (t.get("ops", {}).get(op) or {}).get("peak_device_mb"),
                "reasons": [r for r in shape["reasons"] if r.startswith(f"OP {op} ")],
            })
    return rows


def fmt(value, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec) if isinstance(value, float) else str(value)


def main(out: Path) -> None:
    summary: dict = {"profiles": {}}
    lines = ["# GPU nightly summary", ""]
    for profile in PROFILES:
        score_path = out / profile / "nightly" / "score.json"
        if not score_path.is_file():
            lines.append(f"## {profile}: no score (the nightly did not finish)")
            continue
        score = json.loads(score_path.read_text())
        env = score["environment"]
        ver = score.get("verification", {})
        rows = rows_for(score)
        exact = score.get("throughput", {}).get("exact", {})
        summary["profiles"][profile] = {"verdict": score["verdict"], "device": env.get("device_name"),
                                        "numerics": (score.get("numerics") or {}).get("in_force"),
                                        "golden_reproduction": ver.get("status"),
                                        "exact_blocks_per_s": exact.get("blocks_per_s"), "rows": rows}
        lines += [f"## {profile}: {score['verdict'].upper()} on {env.get('device_name')} "
                  f"(torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')})", "",
                  f"numerics in force: `{json.dumps((score.get('numerics') or {}).get('in_force'))}`", "",
                  f"golden reproduction: {ver.get('status')}; exact lane {fmt(exact.get('blocks_per_s'))} blocks/s "
                  f"(all OPs), peak {fmt(exact.get('peak_device_mb'))} MB", "",
                  "| k | OP | verdict | bitwise | max abs | max ULP | flips near/conf | min cos | blocks/s | speedup "
                  "| peak MB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            flips = "-" if r["flips_near_tie"] is None else f"{r['flips_near_tie']}/{r['flips_confident']}"
            lines.append(f"| {r['shape']} | {r['op']} | {r['verdict']} | {fmt(r['bitwise'])} | {fmt(r['max_abs'])} | "
                         f"{fmt(r['max_ulp'])} | {flips} | {fmt(r['min_cosine'], '.9f')} | {fmt(r['blocks_per_s'])} | "
                         f"{fmt(r['speedup'], '.2f')} | {fmt(r['peak_device_mb'], '.0f')} |")
        failing = [f"k={r['shape']} OP {r['op']}: {'; '.join(r['reasons'])}" for r in rows if r["reasons"]]
        lines += ["", *(f"- {f}" for f in failing), ""]
    goldens = {p: out / p / "goldens" / f"gpu-nightly-{p}" for p in PROFILES}
    if all(g.is_dir() for g in goldens.values()):
        change = summarize_changes(load_golden(goldens["release"]), load_golden(goldens["speed"]))
        summary["speed_golden_vs_release_golden"] = change
        lines += ["## speed-profile golden vs release golden (the numeric settings' own effect)", "",
                  "| OP | bitwise | max abs | other |", "|---|---|---|---|"]
        for op, v in sorted(change.get("ops", {}).items()):
            other = {k: x for k, x in v.items() if k not in ("bitwise", "max_abs")}
            lines.append(f"| {op} | {fmt(v.get('bitwise'))} | {fmt(v.get('max_abs'))} | {json.dumps(other)} |")
        fp = load_golden(goldens["release"]).fingerprint
        spec = load_golden(goldens["release"]).manifest["model"].get("config")
        if spec in ("full", "small"):
            pinned = DiarNNG(spec).fingerprint
            summary["fingerprint_matches_cpu_build"] = fp == pinned
            lines += ["", f"model fingerprint {fp[:16]}... equals a CPU build of the same seed: {fp == pinned}"]
    lines += cost_lines(out, summary)
    lines += busy_lines(out, summary)
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print("\n".join(lines))


def cost_lines(out: Path, summary: dict) -> list[str]:
    """The harness's own cost per block (bench_harness_cost.py) against this machine's network time."""
    path = out / "harness_cost.json"
    if not path.is_file():
        return []
    cost = json.loads(path.read_text())
    summary["harness_cost"] = cost
    gpu = cost["gpu"]
    lines = ["", "## harness cost per block (null network) vs this GPU's network time", "",
             f"network time per block and lane: {gpu['block_ms']:.2f} ms ({gpu['source']}: {gpu['seg_ms']:.3g} ms per "
             f"segmentation window, {gpu['vp_ms']:.3g} ms per voiceprint window and OP)", "",
             "| N | step | harness ms/block/lane | CPU ms/block/lane | overhead | peak RSS MB |",
             "|---|---|---|---|---|---|"]
    for r in cost["rows"]:
        lines.append(f"| {r['blocks']} | {r['step']} | {r['harness_ms_per_block_lane']:.3f} | "
                     f"{r['harness_cpu_ms_per_block_lane']:.3f} | {r['overhead_fraction']:.1%} | "
                     f"{r['peak_rss_mb']:.0f} |")
    return lines


BUSY = {"simulated": "the simulated device (null network + C0 + C1 x windows of sleep per call, this host's CPUs)",
        "device": "the real device (each call timed between two CUDA events)"}


def busy_lines(out: Path, summary: dict) -> list[str]:
    """Does the harness keep the device busy (bench_device_busy.py): simulated and real device."""
    lines: list[str] = []
    for kind, what in BUSY.items():
        path = out / f"device_busy_{kind}.json"
        if not path.is_file():
            continue
        busy = json.loads(path.read_text())
        summary[f"device_busy_{kind}"] = busy
        lines += ["", f"## device busy: {what}", "",
                  f"model `{busy.get('model')}` on {busy.get('device')}; busy = device busy / lanes span, share = "
                  "lanes span / command wall, harness = (wall - busy) / wall; medians", "",
                  "| command | N | C1 ms | busy | share | harness | wall s | device s | peak RSS MB |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for r in busy["rows"]:
            lines.append(f"| {r['command']} | {r['blocks']} | {fmt(r.get('c1_ms'), 'g')} | {r['busy']:.3f} | "
                         f"{r['share']:.3f} | {r['harness']:.3f} | {r['wall_s']:.1f} | {r['device_s']:.2f} | "
                         f"{r['rss_mb']:.0f} |")
        lines += [f"- peak RSS {name}: x{ratio:.2f} from the smallest N to the largest"
                  for name, ratio in busy.get("rss_growth", {}).items()]
    return lines


if __name__ == "__main__":
    main(Path(sys.argv[1]))
