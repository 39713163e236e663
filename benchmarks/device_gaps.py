"""Where does the device wait? The idle gaps of a run's timeline, each named by the calls around it.

    python benchmarks/device_gaps.py TIMELINE RUN_DIR [--c0 2 --c1 0.05] [--top 12] [--json OUT.json]

``TIMELINE`` is the ``timeline=`` file of ``lanes.simulation.simulated_device`` (or
``lanes.running.device_timeline``): every
device call's (start, end), in the order the device ran them. ``RUN_DIR`` is the run that made them
(``runs/<id>``: its ``calls.parquet`` lists the timed calls in the same order). The timeline holds more
calls than the log: the first ``len(timeline) - len(calls)`` are the untimed warm-up (one per lane, shape
and OP: :func:`lanes.running.runner._warm_up`), which the log leaves out. With two calls in flight (a model without
``stage`` that two threads may enter, lanes/running/calls_in_flight.py) two neighbouring calls may reach the device
in either order, so a gap may be named by the call beside the one it preceded; the totals are the same.

A gap is the time between one call's end and the next call's start: the device idle because the host
had not yet handed it the next request. The busy fraction that ``benchmarks/bench_device_busy.py``
reports is 1 - (the gaps' sum / the lanes span), so this table is that figure taken apart. Each gap
is named by where it falls (the call after it decides):

    warm-up            between two warm-up calls (serial: each waits for the previous answer)
    warm-up -> lanes   after the last warm-up call, before the first timed one
    group boundary     the first call of a group (the runner walks the corpus in groups)
    OP boundary        the first call of an OP inside a group (OP 1 after OP 0, ...)
    lane boundary      the first call of a lane inside an OP (k2 after the exact lane, ...)
    within exact       between two calls of the exact lane (one block per call)
    within k=K         between two calls of a packed lane

The lanes' order inside a group is read off the log (the order of the first group's first calls),
so a group starts wherever that order goes back. With ``--c0``/``--c1`` (the simulated device's
cost) every call's own time is also compared with ``C0 + C1 x windows``: ``overrun`` is how much
longer the calls took than the device's cost (the table look-up of the simulated answer, or a call
starved of the GIL by host threads); it counts as busy in the busy fraction, not as a gap.

It prints the totals, the idle time by place and by size, and the largest gaps with the calls on
either side, so a change can be judged by which gaps it removed (run it before and after).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

SIZES_MS = (0.05, 0.2, 0.5, 1.0, 2.0, 5.0, 20.0, 100.0)


def load(timeline: Path, run_dir: Path) -> tuple[np.ndarray, dict[str, list]]:
    """The [calls, 2] intervals and the call log's columns (warm-up calls first, as the device ran them)."""
    from harness.base.errors import ModelError
    from lanes.simulation.simulated_device import (
        read_timeline,  # the simulated device's own reading (refuses a cut file)
    )

    try:
        iv = read_timeline(timeline)
    except ModelError as exc:  # a truncated file: one line, as every other refusal of this script
        raise SystemExit(str(exc)) from None
    if len(iv) == 0:
        raise SystemExit(f"{timeline}: an empty timeline (no call was timed)")
    return iv, pq.read_table(run_dir / "calls.parquet").to_pydict()


def lane_of(calls: dict[str, list], i: int) -> tuple[str, int, int, str]:
    """A call's lane: (lane, shape, replica, variant)."""
    return calls["lane"][i], calls["shape"][i], calls["replica"][i], calls["variant"][i]


def label(calls: dict[str, list], i: int) -> str:
    lane, shape, replica, variant = lane_of(calls, i)
    name = (
        "exact" + (f"#{replica}" if replica else "")
        if lane == "exact"
        else f"k={shape}" + (f" ({variant})" if variant else "")
    )
    ids = calls["block_ids"][i]
    where = f"{ids[0]}" + (f"..{ids[-1]}" if len(ids) > 1 else "")
    return f"{name} OP {calls['op'][i]} [{where}]"


def places(calls: dict[str, list], warm: int, n: int) -> tuple[list[str], list[int]]:
    """The place of the gap before each timeline entry 1..n-1 (entry 0 has none), and the group of the
    call after it (-1: the warm-up)."""
    timed = len(calls["lane"])
    order: dict[tuple, int] = {}  # (op, lane) -> its rank in a group, from the first appearances
    for i in range(timed):
        order.setdefault((calls["op"][i], lane_of(calls, i)), len(order))
    out, groups, group = [""], [-1], 0
    for t in range(1, n):
        groups.append(-1 if t < warm else group)
        if t < warm:
            out.append("warm-up")
            continue
        if t == warm:
            out.append("warm-up -> lanes")
            continue
        i, p = t - warm, t - warm - 1
        here, before = (calls["op"][i], lane_of(calls, i)), (calls["op"][p], lane_of(calls, p))
        if order[here] < order[before]:
            group += 1
            groups[-1] = group
            out.append("group boundary")
        elif here[0] != before[0]:
            out.append("OP boundary")
        elif here[1] != before[1]:
            out.append("lane boundary")
        else:
            out.append("within exact" if here[1][0] == "exact" else f"within k={here[1][1]}")
    return out, groups


def analyse(
    iv: np.ndarray, calls: dict[str, list], c0_ms: float | None = None, c1_ms: float | None = None, top: int = 12
) -> dict:
    n, timed = len(iv), len(calls["lane"])
    warm = n - timed
    if warm < 0:
        raise SystemExit(f"the timeline holds {n} calls, the call log {timed}: not this run's timeline")
    gaps = np.maximum(iv[1:, 0] - iv[:-1, 1], 0.0)
    where, group_of = places(calls, warm, n)
    where, group_of = where[1:], group_of[1:]
    span = float(iv[-1, 1] - iv[0, 0])
    own = iv[:, 1] - iv[:, 0]
    result: dict = {
        "calls": n,
        "warm_up_calls": warm,
        "span_s": span,
        "busy_s": float(own.sum()),
        "idle_s": float(gaps.sum()),
        "busy": 1 - float(gaps.sum()) / span if span > 0 else 0.0,
    }
    if c0_ms is not None and c1_ms is not None:
        windows = np.r_[np.full(warm, np.nan), np.asarray(calls["windows"], dtype=np.float64)]
        cost = (c0_ms + c1_ms * windows) / 1e3
        result["overrun_s"] = float(np.nansum(own - cost))
        result["cost_s"] = float(np.nansum(cost))
    by_place: dict[str, list[float]] = defaultdict(list)
    for place, gap in zip(where, gaps, strict=True):
        by_place[place].append(float(gap))
    result["by_place"] = {
        p: {"gaps": len(g), "idle_s": sum(g), "mean_ms": 1e3 * sum(g) / len(g), "max_ms": 1e3 * max(g)}
        for p, g in sorted(by_place.items(), key=lambda kv: -sum(kv[1]))
    }
    per_group: dict[int, float] = defaultdict(float)
    for g, gap in zip(group_of, gaps, strict=True):
        per_group[g] += float(gap)
    result["by_group"] = {("warm-up" if g < 0 else str(g)): v for g, v in sorted(per_group.items())}
    edges = np.r_[0.0, np.asarray(SIZES_MS) / 1e3, np.inf]
    bins = np.digitize(gaps, edges[1:-1], right=True)
    result["by_size"] = [
        {
            "from_ms": 1e3 * edges[b],
            "to_ms": 1e3 * edges[b + 1],
            "gaps": int((bins == b).sum()),
            "idle_s": float(gaps[bins == b].sum()),
        }
        for b in range(len(edges) - 1)
    ]
    largest = []
    for g in np.argsort(-gaps, kind="stable")[: max(0, top)]:
        t = int(g) + 1
        before = "warm-up" if t - 1 < warm else label(calls, t - 1 - warm)
        after = "warm-up" if t < warm else label(calls, t - warm)
        largest.append(
            {"gap_ms": 1e3 * float(gaps[g]), "place": where[g], "after_call": t - 1, "before": before, "next": after}
        )
    result["top"] = largest
    return result


def report(r: dict, top: int) -> str:
    lines = [
        f"calls {r['calls']} (warm-up {r['warm_up_calls']}); lanes span {r['span_s']:.3f} s, device busy "
        f"{r['busy_s']:.3f} s, idle {r['idle_s']:.3f} s: busy {r['busy']:.3f}"
    ]
    if "overrun_s" in r:
        lines.append(
            f"device cost C0 + C1 x windows {r['cost_s']:.3f} s of the timed calls; the calls took "
            f"{r['overrun_s']:+.3f} s more (look-up, GIL: counted busy)"
        )
    lines += ["", f"{'idle by place':<22} {'gaps':>6} {'idle s':>8} {'of idle':>8} {'mean ms':>8} {'max ms':>8}"]
    idle = r["idle_s"] or 1.0
    for place, p in r["by_place"].items():
        lines.append(
            f"{place:<22} {p['gaps']:>6} {p['idle_s']:>8.3f} {p['idle_s'] / idle:>8.1%} "
            f"{p['mean_ms']:>8.3f} {p['max_ms']:>8.2f}"
        )
    lines += ["", f"{'idle by size (ms)':<22} {'gaps':>6} {'idle s':>8} {'of idle':>8}"]
    for s in r["by_size"]:
        lines.append(
            f"{s['from_ms']:>9g} .. {s['to_ms']:<9g}  {s['gaps']:>6} {s['idle_s']:>8.3f} {s['idle_s'] / idle:>8.1%}"
        )
    lines += ["", "idle by group (s): " + ", ".join(f"{g} {v:.3f}" for g, v in r["by_group"].items())]
    lines += ["", f"largest {min(top, len(r['top']))} gaps"]
    for g in r["top"][:top]:
        lines.append(
            f"{g['gap_ms']:>8.2f} ms  {g['place']:<17} after call {g['after_call']:>5}: {g['before']}  ->  {g['next']}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timeline", type=Path)
    parser.add_argument("run_dir", type=Path, help="the run folder (runs/<id>) holding calls.parquet")
    parser.add_argument("--c0", type=float, default=None, help="the simulated device's ms per call")
    parser.add_argument("--c1", type=float, default=None, help="the simulated device's ms per window")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    iv, calls = load(args.timeline, args.run_dir)
    result = analyse(iv, calls, args.c0, args.c1, args.top)
    print(report(result, args.top))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
