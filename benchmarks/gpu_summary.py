"""Summarise a gpu_nightly.sh output folder: OUT/summary.md and OUT/summary.json.

    python benchmarks/gpu_summary.py OUT_DIR [--smoke SMOKE_DIR]

Reads what the script left there: per profile (release, speed) the nightly's score.json and the same run
scored in bitwise mode (score_bitwise.json), the golden's manifest and the run's call log; golden_diff.json
(`harness golden diff` speed vs release); copy_overlap.json, device_busy_{simulated,device}.json and
harness_cost.json when those phases ran; phases.tsv (each phase's seconds and budget) and, from
benchmarks/gpu_lease.sh, plan.json (how BLOCKS and the budgets were chosen) and, with --smoke, the
verdicts of the small-model smoke run before. summary.json holds every figure
of summary.md, so the lease brings back one file instead of eight.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from golden.store import load_golden
from harness.pipeline.record import summarize_changes
from lanes.models.diar_nn_g import DiarNNG

PROFILES = ("release", "speed")


def _verdicts(score: dict | None) -> dict[tuple[str, str], bool]:
    """(shape, OP) -> passed, from a score (the bitwise scoring's, say); empty without one."""
    if not score:
        return {}
    return {
        (k, op): bool(v["passed"])
        for k, shape in score.get("shapes", {}).items()
        for op, v in shape.get("ops", {}).items()
    }


def _evidence(shape: dict, op: str) -> dict[str, Any]:
    """The arrangement, duplicate and repeat evidence of one shape and OP (score.json's shapes[k])."""
    arr = shape.get("arrangements") or {}
    lanes = arr.get("lanes") or {}
    differing = {
        name: (lane.get("blocks_differing_from_plain") or {}).get(op)
        for name, lane in lanes.items()
        if lane.get("kind") != "duplicate"
    }
    dup = (arr.get("duplicates") or {}).get(op) or {}
    rep = ((shape.get("repeats") or {}).get("ops") or {}).get(op) or {}
    return {
        "arrangements_passed": arr.get("passed"),
        "arrangement_lanes": sorted(lanes),
        "blocks_differing_from_plain": differing,
        "worst_slot": (arr.get("worst_slot") or {}).get(op),
        "duplicates_passed": dup.get("passed") if dup else None,
        "duplicates_bitwise": (dup.get("metrics") or {}).get("bitwise") if dup else None,
        "repeats_reproducible": rep.get("as_reproducible_as_release") if rep else None,
        "repeat_blocks_differing": rep.get("blocks_differing") if rep else None,
    }


def rows_for(score: dict, bitwise_score: dict | None = None) -> list[dict]:
    rows = []
    throughput = score.get("throughput", {})
    bitwise_verdicts = _verdicts(bitwise_score)
    for k, shape in sorted(score["shapes"].items(), key=lambda kv: int(kv[0])):
        t = throughput.get(k, {})
        for op, v in sorted(shape["ops"].items()):
            m = v["metrics"]
            rows_total = m.get("golden_rows")
            rows.append(
                {
                    "shape": int(k),
                    "op": int(op),
                    "verdict": "pass" if v["passed"] else "fail",
                    "verdict_bitwise": (
                        None if (k, op) not in bitwise_verdicts else "pass" if bitwise_verdicts[(k, op)] else "fail"
                    ),
                    "bitwise": m.get("bitwise"),
                    "max_abs": m.get("max_abs_finite", m.get("max_abs")),
                    "max_ulp": m.get("max_ulp"),
                    "flips_near_tie": m.get("argmax_flips_near_tie"),
                    "flips_confident": m.get("argmax_flips_confident"),
                    "min_cosine": m.get("min_cosine"),
                    "rows_matched": (None if rows_total is None else rows_total - int(m.get("missing_rows") or 0)),
                    "rows_golden": rows_total,
                    "rows_missing": m.get("missing_rows"),
                    "rows_extra": m.get("extra_rows"),
                    "rows_differing": m.get("differing_rows"),
                    "blocks_per_s": (t.get("ops", {}).get(op) or {}).get("blocks_per_s"),
                    "speedup": t.get("speedup"),
                    "speedup_interval": t.get("speedup_interval"),
                    "speedup_basis": t.get("speedup_basis"),
                    "peak_device_mb": (t.get("ops", {}).get(op) or {}).get("peak_device_mb"),
                    **_evidence(shape, op),
                    "reasons": [r for r in shape["reasons"] if r.startswith(f"OP {op} ")],
                }
            )
    return rows


def fmt(value, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return format(value, spec) if isinstance(value, float) else str(value)


def _interval(r: dict) -> str:
    iv = r.get("speedup_interval")
    return "-" if not iv else f"[{iv[0]:.2f}, {iv[1]:.2f}]"


def _arrangement_cell(r: dict) -> str:
    if r["arrangements_passed"] is None:
        return "-"
    moved = [n for n in r["blocks_differing_from_plain"].values() if n]
    return f"{fmt(r['arrangements_passed'])} ({sum(moved)} blk differ)" if moved else fmt(r["arrangements_passed"])


def _repeat_cell(r: dict) -> str:
    if r["repeats_reproducible"] is None:
        return "-"
    n = r["repeat_blocks_differing"]
    return fmt(r["repeats_reproducible"]) + (f" ({n} blk differ)" if n else "")


def lane_units(run_dir: Path, blocks: int) -> float | None:
    """Blocks through the network per corpus block, every lane and variant (a duplicate lane counts each
    block twice), from the run's call log: what the host time per block is shared over."""
    path = run_dir / "calls.parquet"
    if not path.is_file() or blocks <= 0:
        return None
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["op", "blocks"]).to_pydict()
    total = sum(b for op, b in zip(table["op"], table["blocks"], strict=True) if op == 0)
    return total / blocks


def host_figures(out: Path, profile: str, score: dict) -> dict[str, Any] | None:
    """The harness's own time between the network calls (score.json's host) per block and lane, against the
    network time the device measured (the same calls), and the harness's share of the nightly's lanes."""
    host = score.get("host")
    if not host:
        return None
    run_dir = Path(score.get("run", {}).get("path", ""))
    if not run_dir.is_absolute():
        run_dir = out / profile / "nightly" / "runs" / run_dir.name
    units = lane_units(run_dir, int(host["blocks"]))
    figures = {
        **host,
        "lane_units_per_block": units,
        "host_share_of_lanes": host["host_s"] / host["lanes_wall_s"] if host["lanes_wall_s"] else None,
    }
    if units:
        figures["host_ms_per_block_lane"] = host["host_ms_per_block"] / units
        figures["network_ms_per_block_lane"] = host["device_s"] * 1e3 / host["blocks"] / units
    return figures


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def golden_reproduction(golden_dir: Path) -> dict[str, Any] | None:
    """The golden's own reproduction (golden record runs the exact lane twice on the device)."""
    manifest = _load(golden_dir / "manifest.json")
    if manifest is None:
        return None
    rep = manifest.get("reproducibility") or {}
    return {
        "bitwise": rep.get("bitwise"),
        "repeats": rep.get("repeats"),
        "golden": manifest.get("golden_id"),
        "ops": {op: v.get("bitwise") for op, v in (rep.get("ops") or {}).items()},
    }


def profile_lines(out: Path, profile: str, summary: dict) -> list[str]:
    score = _load(out / profile / "nightly" / "score.json")
    if score is None:
        return [f"## {profile}: no score (the nightly did not finish)", ""]
    bitwise_score = _load(out / profile / "score_bitwise.json")
    env = score["environment"]
    ver = score.get("verification", {})
    rows = rows_for(score, bitwise_score)
    exact = score.get("throughput", {}).get("exact", {})
    record = golden_reproduction(out / profile / "goldens" / f"gpu-nightly-{profile}")
    host = host_figures(out, profile, score)
    in_force = (score.get("numerics") or {}).get("in_force")
    summary["profiles"][profile] = {
        "verdict": score["verdict"],
        "verdict_bitwise": bitwise_score.get("verdict") if bitwise_score else None,
        "device": env.get("device_name"),
        "environment": env,
        "numerics": in_force,
        "blocks": (score.get("corpus") or {}).get("blocks"),
        "evidence": score.get("evidence"),
        "golden_record_reproduction": record,
        "golden_reproduction": ver.get("status"),
        "golden_reproduction_bitwise": ver.get("bitwise"),
        "exact_blocks_per_s": exact.get("blocks_per_s"),
        "exact_peak_device_mb": exact.get("peak_device_mb"),
        "host": host,
        "rows": rows,
    }
    lines = [
        f"## {profile}: {score['verdict'].upper()} on {env.get('device_name')} "
        f"(torch {env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}, driver "
        f"{env.get('driver')}); bitwise mode: "
        f"{(bitwise_score or {}).get('verdict', '-').upper()}",
        "",
        f"numerics in force: `{json.dumps(in_force)}`",
        "",
        f"{(score.get('corpus') or {}).get('blocks')} blocks; evidence {json.dumps(score.get('evidence'))}",
        "",
        f"golden recorded here reproduced bitwise: {fmt((record or {}).get('bitwise'))} (exact lane x"
        f"{(record or {}).get('repeats')}); nightly's exact lane vs golden: {ver.get('status')} "
        f"(bitwise {fmt(ver.get('bitwise'))}); exact lane {fmt(exact.get('blocks_per_s'))} blocks/s "
        f"(all OPs), peak {fmt(exact.get('peak_device_mb'), '.0f')} MB",
        "",
    ]
    if host:
        lines += [
            f"harness host time {fmt(host['host_ms_per_block'])} ms per block, "
            f"{fmt(host.get('host_ms_per_block_lane'))} ms per block and lane, against "
            f"{fmt(host.get('network_ms_per_block_lane'))} ms of network per block and lane (the device's "
            f"calls); the harness's share of the lanes' wall: {fmt(host['host_share_of_lanes'], '.1%')} "
            f"({fmt(host['lanes_wall_s'], '.1f')} s of lanes, {fmt(host['device_s'], '.1f')} s in calls, "
            f"{fmt(host.get('lane_units_per_block'), '.0f')} blocks through the network per corpus block)",
            "",
        ]
    lines += [
        "| k | OP | verdict | bitwise mode | bitwise | max abs | max ULP | flips near/conf | rows matched "
        "| arrangements | duplicates | repeats | blocks/s | speedup | 95 % interval | peak MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        flips = "-" if r["flips_near_tie"] is None else f"{r['flips_near_tie']}/{r['flips_confident']}"
        matched = "-" if r["rows_golden"] is None else f"{r['rows_matched']}/{r['rows_golden']}"
        if r["rows_extra"]:
            matched += f" +{r['rows_extra']}"
        dup = (
            "-"
            if r["duplicates_passed"] is None
            else (f"{fmt(r['duplicates_passed'])}{' (bitwise)' if r['duplicates_bitwise'] else ''}")
        )
        lines.append(
            f"| {r['shape']} | {r['op']} | {r['verdict']} | {fmt(r['verdict_bitwise'])} | "
            f"{fmt(r['bitwise'])} | {fmt(r['max_abs'])} | {fmt(r['max_ulp'])} | {flips} | {matched} | "
            f"{_arrangement_cell(r)} | {dup} | {_repeat_cell(r)} | {fmt(r['blocks_per_s'])} | "
            f"{fmt(r['speedup'], '.2f')} | {_interval(r)} | {fmt(r['peak_device_mb'], '.0f')} |"
        )
    failing = [f"k={r['shape']} OP {r['op']}: {'; '.join(r['reasons'])}" for r in rows if r["reasons"]]
    lines += ["", *(f"- {f}" for f in failing), ""]
    return lines


def golden_lines(out: Path, summary: dict) -> list[str]:
    goldens = {p: out / p / "goldens" / f"gpu-nightly-{p}" for p in PROFILES}
    if not all((g / "manifest.json").is_file() for g in goldens.values()):
        return []
    lines: list[str] = []
    diff = _load(out / "golden_diff.json")
    if diff is not None:
        ops = {op: v.get("status") for op, v in (diff.get("ops") or {}).items()}
        summary["golden_diff"] = {
            "status": diff.get("status"),
            "ops": ops,
            "environment_differences": diff.get("environment_differences"),
        }
        lines += [
            "## `harness golden diff`: the speed profile's golden against the release's",
            "",
            f"status: {diff.get('status')}; per OP: {json.dumps(ops)}",
            "",
            *(f"- {d}" for d in diff.get("environment_differences") or []),
            "",
        ]
    change = summarize_changes(load_golden(goldens["release"]), load_golden(goldens["speed"]))
    summary["speed_golden_vs_release_golden"] = change
    lines += [
        "## speed-profile golden vs release golden (the numeric settings' own effect)",
        "",
        "| OP | bitwise | max abs | other |",
        "|---|---|---|---|",
    ]
    for op, v in sorted(change.get("ops", {}).items()):
        other = {k: x for k, x in v.items() if k not in ("bitwise", "max_abs")}
        lines.append(f"| {op} | {fmt(v.get('bitwise'))} | {fmt(v.get('max_abs'))} | {json.dumps(other)} |")
    release = load_golden(goldens["release"])
    fp = release.fingerprint
    spec = release.manifest.model.model_dump(mode="json").get("config")
    if spec in ("full", "small"):
        pinned = DiarNNG(spec).fingerprint
        summary["fingerprint_matches_cpu_build"] = fp == pinned
        lines += ["", f"model fingerprint {fp[:16]}... equals a CPU build of the same seed: {fp == pinned}"]
    return lines


def phase_lines(out: Path, summary: dict) -> list[str]:
    """Each phase's seconds against its budget (phases.tsv), and the lease's plan (plan.json) if any."""
    lines: list[str] = []
    plan = _load(out / "plan.json")
    if plan is not None:
        summary["plan"] = plan
        lines += ["## plan (benchmarks/gpu_lease_plan.py)", "", *(f"- {line}" for line in plan.get("why", [])), ""]
    path = out / "phases.tsv"
    if not path.is_file():
        return lines
    phases = []
    for line in path.read_text().splitlines():
        name, took, budget, rc, parent = ([*line.split("\t"), "", "", "", ""])[:5]
        phases.append(
            {
                "phase": name,
                "seconds": int(took) if took.isdigit() else None,
                "budget_s": int(budget) if budget.lstrip("-").isdigit() else None,
                "exit": rc,
                "part_of": parent or None,
            }
        )
    summary["phases"] = phases
    lines += ["## phases", "", "| phase | seconds | budget s | exit |", "|---|---|---|---|"]
    lines += [
        f"| {p['part_of'] + ' / ' if p['part_of'] else ''}{p['phase']} | {fmt(p['seconds'])} | "
        f"{fmt(p['budget_s'])} | {p['exit']} |"
        for p in phases
    ]
    total = sum(p["seconds"] or 0 for p in phases if not p["part_of"])  # a part is in its whole's seconds
    return [*lines, f"| total | {total} | | |", ""]


def smoke_lines(smoke: Path | None, summary: dict) -> list[str]:
    """The small-model smoke's verdicts (its gpu_nightly.sh folder, which writes no summary of its own), one line."""
    if smoke is None:
        return []
    verdicts = {}
    for profile in PROFILES:
        score = _load(smoke / profile / "nightly" / "score.json")
        if score is not None:
            bitwise = _load(smoke / profile / "score_bitwise.json") or {}
            verdicts[profile] = {
                "verdict": score["verdict"],
                "verdict_bitwise": bitwise.get("verdict"),
                "golden_reproduction": (score.get("verification") or {}).get("status"),
            }
    summary["smoke"] = {"profiles": verdicts}
    return [
        "smoke (small model): "
        + (
            "; ".join(
                f"{p} {v['verdict']} (bitwise mode {v['verdict_bitwise']}, golden {v['golden_reproduction']})"
                for p, v in verdicts.items()
            )
            or "no profile finished"
        ),
        "",
    ]


def main(out: Path, smoke: Path | None = None) -> None:
    summary: dict = {"profiles": {}}
    lines = ["# GPU nightly summary", ""]
    lines += smoke_lines(smoke, summary)
    for profile in PROFILES:
        lines += profile_lines(out, profile, summary)
    lines += golden_lines(out, summary)
    lines += overlap_lines(out, summary)
    lines += busy_lines(out, summary)
    lines += cost_lines(out, summary)
    lines += ["", *phase_lines(out, summary)]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print("\n".join(lines))


def overlap_lines(out: Path, summary: dict) -> list[str]:
    """Copy of request n+1 against compute of request n (gpu_copy_overlap.py), staged vs unstaged."""
    overlap = _load(out / "copy_overlap.json")
    if overlap is None:
        return []
    summary["copy_overlap"] = overlap
    rows, ratios = overlap.get("rows", {}), overlap.get("ratios", {})
    keys = [k for k in rows.get("staged", {}) if k != "digest"]
    lines = [
        "",
        "## copy overlap (gpu_copy_overlap.py: staged vs unstaged, from the profiler trace)",
        "",
        f"args {json.dumps(overlap.get('args'))}; outputs bitwise equal: {fmt(overlap.get('bitwise_equal'))}",
        "",
        "| run | " + " | ".join(keys) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for label in ("unstaged", "staged"):
        if label in rows:
            lines.append(f"| {label} | " + " | ".join(fmt(rows[label].get(k)) for k in keys) + " |")
    lines.append("| staged / unstaged | " + " | ".join(fmt(ratios.get(k)) for k in keys) + " |")
    return lines


def cost_lines(out: Path, summary: dict) -> list[str]:
    """The harness's own cost per block (bench_harness_cost.py) against this machine's network time."""
    path = out / "harness_cost.json"
    if not path.is_file():
        return []
    cost = json.loads(path.read_text())
    summary["harness_cost"] = cost
    gpu = cost["gpu"]
    lines = [
        "",
        "## harness cost per block (null network) vs this GPU's network time",
        "",
        f"network time per block and lane: {gpu['block_ms']:.2f} ms ({gpu['source']}: {gpu['seg_ms']:.3g} ms per "
        f"segmentation window, {gpu['vp_ms']:.3g} ms per voiceprint window and OP)",
        "",
        "| N | step | harness ms/block/lane | CPU ms/block/lane | overhead | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for r in cost["rows"]:
        lines.append(
            f"| {r['blocks']} | {r['step']} | {r['harness_ms_per_block_lane']:.3f} | "
            f"{r['harness_cpu_ms_per_block_lane']:.3f} | {r['overhead_fraction']:.1%} | "
            f"{r['peak_rss_mb']:.0f} |"
        )
    return lines


BUSY = {
    "simulated": "the simulated device (null network + C0 + C1 x windows of sleep per call, this host's CPUs)",
    "device": "the real device (each call timed between two CUDA events)",
}


def busy_lines(out: Path, summary: dict) -> list[str]:
    """Does the harness keep the device busy (bench_device_busy.py): simulated and real device."""
    lines: list[str] = []
    for kind, what in BUSY.items():
        path = out / f"device_busy_{kind}.json"
        if not path.is_file():
            continue
        busy = json.loads(path.read_text())
        summary[f"device_busy_{kind}"] = busy
        lines += [
            "",
            f"## device busy: {what}",
            "",
            f"model `{busy.get('model')}` on {busy.get('device')}; busy = device busy / lanes span, share = "
            "lanes span / command wall, harness = (wall - busy) / wall; medians",
            "",
            "| command | N | C1 ms | busy | share | harness | wall s | device s | peak RSS MB |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in busy["rows"]:
            lines.append(
                f"| {r['command']} | {r['blocks']} | {fmt(r.get('c1_ms'), 'g')} | {r['busy']:.3f} | "
                f"{r['share']:.3f} | {r['harness']:.3f} | {r['wall_s']:.1f} | {r['device_s']:.2f} | "
                f"{r['rss_mb']:.0f} |"
            )
        lines += [
            f"- peak RSS {name}: x{ratio:.2f} from the smallest N to the largest"
            for name, ratio in busy.get("rss_growth", {}).items()
        ]
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--smoke", type=Path, default=None, help="the smoke's gpu_nightly.sh folder (gpu_lease.sh)")
    args = parser.parse_args()
    main(args.out, args.smoke)
