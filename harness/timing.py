"""Throughput, latency and memory per lane and shape, from the recorded network calls.

Speedup is measured the way the lanes run: interleaved. Each packed call of k blocks is paired
with the exact lane's calls of the *same* blocks (every OP of them), which ran moments before on
the same machine; the speedup is the median of those ratios, with a distribution-free 95 %
interval for the median (order statistics). When the interval includes 1 the speedup is within
noise. A call far slower than its lane's median (a stall: a page fault storm, another process) is
counted, and cannot move a median the way it moves a sum.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

STALL_FACTOR = 5.0  # a call this many times its lane's median time (same OP) is a stall


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
    out = {key: _lane(group) for key, group in groups.items()}
    exact = groups.get("exact", [])
    exact_time = defaultdict(float)  # block id -> exact wall time summed over its OPs
    for c in exact:
        for b in c.get("block_ids") or ():
            exact_time[b] += c["wall_s"] / max(1, len(c.get("block_ids") or ()))
    for key, group in groups.items():
        if key == "exact":
            out[key]["speedup"] = 1.0
            continue
        out[key].update(_speedup(group, exact_time))
    return out


def _lane(group: list[dict]) -> dict:
    per_op = {}
    stalls = 0
    for op in sorted({int(c["op"]) for c in group}):
        sel = [c for c in group if int(c["op"]) == op]
        wall = np.array([c["wall_s"] for c in sel], dtype=np.float64)
        blocks = sum(int(c["blocks"]) for c in sel)
        peaks = [c["peak_device_bytes"] for c in sel if c.get("peak_device_bytes") is not None]
        median = float(np.median(wall))
        op_stalls = int((wall > STALL_FACTOR * median).sum()) if median > 0 and wall.size >= 4 else 0
        stalls += op_stalls
        per_op[str(op)] = {
            "calls": len(sel),
            "blocks": blocks,
            "wall_s": float(wall.sum()),
            "blocks_per_s": blocks / float(wall.sum()) if wall.sum() > 0 else None,
            "p50_ms": float(np.percentile(wall, 50) * 1e3),
            "p99_ms": float(np.percentile(wall, 99) * 1e3),
            "mean_request_mb": float(np.mean([c["request_bytes"] for c in sel]) / 1e6),
            "peak_device_mb": max(peaks) / 2**20 if peaks else None,
            "stalls": op_stalls,
        }
    total = sum(v["wall_s"] for v in per_op.values())
    blocks = per_op.get("0", {}).get("blocks", 0)
    peaks = [v["peak_device_mb"] for v in per_op.values() if v["peak_device_mb"] is not None]
    return {"blocks": blocks, "wall_s": total, "blocks_per_s": blocks / total if total > 0 else None,
            "peak_device_mb": max(peaks) if peaks else None, "ops": per_op, "stalls": stalls}


def _speedup(group: list[dict], exact_time: dict[str, float]) -> dict:
    """Median over packed calls' block sets of (exact time of those blocks) / (packed time)."""
    units: dict[tuple, float] = defaultdict(float)
    for c in group:
        ids = tuple(c.get("block_ids") or ())
        if ids:
            units[frozenset(ids)] += c["wall_s"]
    ratios = np.array([sum(exact_time.get(b, 0.0) for b in ids) / wall for ids, wall in units.items()
                       if wall > 0 and all(b in exact_time for b in ids)], dtype=np.float64)
    if ratios.size == 0:
        return {"speedup": None, "speedup_interval": None, "repetitions": 0, "within_noise": None}
    lo, hi = median_interval(ratios)
    within = None if lo is None else bool(lo <= 1.0 <= hi)
    return {"speedup": float(np.median(ratios)), "speedup_interval": None if lo is None else [lo, hi],
            "repetitions": int(ratios.size), "within_noise": within}


def median_interval(values: np.ndarray, confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Distribution-free interval for the median: order statistics x_(j)..x_(n-j+1) with
    P(Binomial(n, 1/2) <= j - 1) <= (1 - confidence) / 2. None when n is too small (n < 6)."""
    from scipy.stats import binom

    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    alpha = 1.0 - confidence
    j = int(binom.ppf(alpha / 2, n, 0.5)) + 1 if n else 0
    while j > 0 and binom.cdf(j - 1, n, 0.5) > alpha / 2:
        j -= 1
    if j < 1:
        return None, None
    return float(v[j - 1]), float(v[n - j])
