"""Throughput, latency and memory per lane and shape, from the recorded network calls."""

from __future__ import annotations

from collections import defaultdict

import numpy as np


def summarize_calls(calls: list[dict]) -> dict[str, dict]:
    """Key "exact" or the shape k as a string -> summary over every OP of that lane.

    blocks_per_s counts a block once it has been through every OP (segmentation and the
    voiceprints): it is the rate at which the engine could finish blocks in that lane.
    """
    groups: dict[str, list[dict]] = defaultdict(list)
    for c in calls:
        if c.get("replica", 0) != 0:
            continue
        groups["exact" if c["lane"] == "exact" else str(int(c["shape"]))].append(c)
    out = {}
    for key, group in groups.items():
        per_op = {}
        for op in sorted({int(c["op"]) for c in group}):
            sel = [c for c in group if int(c["op"]) == op]
            wall = np.array([c["wall_s"] for c in sel], dtype=np.float64)
            blocks = sum(int(c["blocks"]) for c in sel)
            peaks = [c["peak_device_bytes"] for c in sel if c.get("peak_device_bytes") is not None]
            per_op[str(op)] = {
                "calls": len(sel),
                "blocks": blocks,
                "wall_s": float(wall.sum()),
                "blocks_per_s": blocks / float(wall.sum()) if wall.sum() > 0 else None,
                "p50_ms": float(np.percentile(wall, 50) * 1e3),
                "p99_ms": float(np.percentile(wall, 99) * 1e3),
                "mean_request_mb": float(np.mean([c["request_bytes"] for c in sel]) / 1e6),
                "peak_device_mb": max(peaks) / 2**20 if peaks else None,
            }
        ops0 = per_op.get("0", {})
        total = sum(v["wall_s"] for v in per_op.values())
        blocks = ops0.get("blocks", 0)
        peaks = [v["peak_device_mb"] for v in per_op.values() if v["peak_device_mb"] is not None]
        out[key] = {"blocks": blocks, "wall_s": total, "blocks_per_s": blocks / total if total > 0 else None,
                    "peak_device_mb": max(peaks) if peaks else None, "ops": per_op}
    exact = out.get("exact")
    for summary in out.values():
        if exact and exact["blocks_per_s"] and summary["blocks_per_s"]:
            summary["speedup"] = summary["blocks_per_s"] / exact["blocks_per_s"]
            for op, v in summary["ops"].items():
                e = exact["ops"].get(op)
                v["speedup"] = v["blocks_per_s"] / e["blocks_per_s"] if e and e["blocks_per_s"] and v[
                    "blocks_per_s"] else None
        else:
            summary["speedup"] = None
    return out
