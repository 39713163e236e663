"""Size the long part of benchmarks/gpu_lease.sh to the time left, from a calibration golden.

    python benchmarks/gpu_lease_plan.py CALIBRATION_GOLDEN --left SECONDS [--record-wall SECONDS]
        [--blocks N] [--json plan.json]

The calibration golden is a `harness golden record` of a few blocks of the full model on the device, with
the release's numeric settings (gpu_lease.sh's calibrate phase): its call log gives the network seconds of
one block in the exact lane (every OP), measured on this device, and the command's wall (--record-wall)
less those calls gives what one harness process costs before and after its lanes here (start-up, imports,
CUDA, the model, the corpus; ``process``). The long part's time is estimated as

    per profile:  3 x process + NIGHTLY_EXTRA
                  + blocks x (3 x max(t_exact, HOST) + shapes x units x max(t_exact x PACKED, HOST)
                              + (1 + shapes x units) x SCORE)

(golden record: the exact lane twice; the nightly: the exact lane once and per shape `units` blocks through
the network: the plain lane, the arrangement lanes, the duplicate lane's second copy, the repeats and the
neighbour lane's two requests per plain one; each
block-lane scored once more in bitwise mode), twice (release, speed: speed is costed like release, which
its TF32 only makes faster), plus the golden diff, the copy-overlap check and the real-device busy
benchmark, each with its own small budget. ``blocks`` is the largest multiple of 32 (every shape then
packs full requests) from 32 to --max-blocks whose estimate fits in --left; if 32 does not, the busy and
overlap phases are given up in that order, then 16 blocks are tried (no full k = 32 request: no k = 32
speedup). The cost benchmark (the null network) runs only in time left over: the nightlies' own host
figures already give the harness's share. Every budget is the estimate x SLACK: a phase's commands are
cut at its budget (the nightlies' at x2), and the lease's deadline cuts all.

Prints shell assignments (BLOCKS=..., T_RELEASE=..., ...) for ``eval``, and writes the plan with its
reasons (``why``) to --json; gpu_summary.py shows them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

PACKED = 0.6  # network time per block in a packed lane / the exact lane's (a GPU amortises over k; conservative)
HOST_S = 0.03  # the harness's own seconds per block and lane between calls (45 ms on this CPU, null network)
SCORE_S = 0.005  # scoring seconds per block and lane (the bitwise rescoring; the nightly scores while its lanes run)
PROCESS_S = 8.0  # one harness process's start-up and finish when no --record-wall is given
NIGHTLY_EXTRA_S = 10.0  # the nightly's own fixed work: the packing laws, promotion, report, JUnit, localisation
SLACK = {"release": 2.0, "speed": 2.0}  # the nightlies' budgets: the estimate x 2; the other phases' x 1.5
SLACK_OTHER = 1.5
DIFF_S = 20.0
COPY_BLOCKS = 32
BUSY_BLOCKS = 32
COST_BLOCKS = 64
SUMMARY_S = 15.0


def calibration_figures(golden: Path) -> tuple[float, int, float, int]:
    """(median network seconds of one block through every OP in the exact lane, how many (block, replica) pairs
    it is the median of, the network seconds of every call, the corpus's blocks). A block's first replica on
    the device's first block is skipped when there are others (its calls carry the first kernels' set-up)."""
    import pyarrow.parquet as pq

    table = pq.read_table(golden / "calls.parquet").to_pylist()
    per: dict[tuple[str, int], float] = defaultdict(float)
    order: list[tuple[str, int]] = []
    for call in table:
        if call["lane"] != "exact":
            continue
        ids = call.get("block_ids") or []
        for b in ids:
            key = (b, int(call.get("replica") or 0))
            if key not in per:
                order.append(key)
            per[key] += float(call["wall_s"]) / max(1, len(ids))
    if not per:
        raise SystemExit(f"gpu_lease_plan: {golden}/calls.parquet holds no exact-lane call")
    keys = order[1:] if len(order) > 1 else order
    network = sum(float(c["wall_s"]) for c in table)
    blocks = len({b for b, _ in per})
    return statistics.median(per[k] for k in keys), len(keys), network, blocks


def units_per_shape(arrangements: int, repeats: int, neighbours: bool = True) -> int:
    """Blocks through the network per corpus block and packed shape: the plain lane, arrangements - 1 more
    lanes (the duplicate lane, from 3 arrangements on, holds each block twice), repeats - 1 repeats and the
    neighbour lane (``[evidence] neighbours``, on by default: two requests per plain request)."""
    return 1 + (arrangements - 1) + (1 if arrangements >= 3 else 0) + (repeats - 1) + (2 if neighbours else 0)


def plan(
    t_exact: float,
    left: float,
    shapes: int,
    arrangements: int,
    repeats: int,
    max_blocks: int,
    fixed_blocks: int | None = None,
    process_s: float = PROCESS_S,
) -> dict:
    units = units_per_shape(arrangements, repeats)
    exact = max(t_exact, HOST_S)
    packed = max(t_exact * PACKED, HOST_S)
    per_block = 3 * exact + shapes * units * packed + (1 + shapes * units) * SCORE_S
    fixed = 3 * process_s + NIGHTLY_EXTRA_S

    def profile_s(blocks: int) -> float:
        return fixed + blocks * per_block

    busy_units = 2 + 2 * (1 + shapes)  # the setup's record, then run and nightly with one arrangement (BUSY_EXTRA)
    optional = {
        # one process, the model, two runs (staged, unstaged) of the exact lane and k = 8, a profiler trace each
        "overlap": process_s + 10.0 + 2 * COPY_BLOCKS * (exact + packed),
        # corpus synth, golden record, run and nightly: a process each, and the benchmark's own
        "busy": 5 * process_s + BUSY_BLOCKS * (2 * exact + (busy_units - 2) * packed),
        # bench_harness_cost.py: corpus, then record/run/score/promote/report at 64 blocks, a process each
        "cost": 6 * process_s + 20.0,
    }
    extras = {"diff": DIFF_S, "overlap": optional["overlap"], "busy": optional["busy"]}
    why = [
        f"exact lane {t_exact * 1e3:.1f} ms of network per block (every OP) and {process_s:.1f} s per harness "
        f"process outside its lanes, measured; packed lanes assumed x{PACKED} of the exact lane; harness "
        f"{HOST_S * 1e3:.0f} ms per block and lane, scoring {SCORE_S * 1e3:.0f} ms (assumed)",
        f"{shapes} shapes x {units} blocks through the network per block (arrangements {arrangements}, "
        f"repeats {repeats}) + 3 exact: {per_block:.2f} s per corpus block and profile, {fixed:.0f} s fixed",
    ]
    dropped: list[str] = ["cost"]

    def fitting(room: float) -> list[int]:
        return [b for b in range(32, max_blocks + 1, 32) if 2 * profile_s(b) <= room]

    room = left - SUMMARY_S - sum(extras.values())
    blocks = fixed_blocks
    if blocks is None:
        fits = fitting(room)
        for phase in ("busy", "overlap"):  # given up in this order when 32 blocks do not fit
            if fits:
                break
            room += extras.pop(phase)
            dropped.append(phase)
            fits = fitting(room)
        if not fits and 2 * profile_s(16) <= room:
            fits = [16]  # k = 32 then packs no full request: no speedup at k = 32, the verdicts all the same
        blocks = max(fits) if fits else 16
        why.append(
            f"{left:.0f} s left, {room:.0f} s for the two nightlies after the other phases: {blocks} blocks "
            f"(the largest multiple of 32 up to {max_blocks} whose estimate fits, else 16"
            + ("; none fits: 16 anyway, the deadline cuts" if not fits else "")
            + ")"
        )
    else:
        why.append(f"{blocks} blocks, as given (BLOCKS)")
    spare = room - 2 * profile_s(blocks)
    for phase in ("overlap", "busy", "cost"):  # what was given up, and the cost benchmark, in time left over
        if phase in dropped and spare >= optional[phase]:
            extras[phase] = optional[phase]
            spare -= optional[phase]
            dropped.remove(phase)
    if dropped:
        why.append("left out for time: " + ", ".join(sorted(dropped)))
    est = {"release": profile_s(blocks), "speed": profile_s(blocks), **extras}
    budgets = {name: int(round(s * SLACK.get(name, SLACK_OTHER))) for name, s in est.items()}
    why.append(
        "estimates (s): "
        + ", ".join(f"{k} {v:.0f}" for k, v in est.items())
        + f"; total {sum(est.values()) + SUMMARY_S:.0f} of {left:.0f}; budgets: the nightlies x2, the rest "
        f"x{SLACK_OTHER}, all cut at the deadline"
    )
    return {
        "t_exact_s": t_exact,
        "process_s": process_s,
        "left_s": left,
        "blocks": blocks,
        "units_per_shape": units,
        "per_block_profile_s": per_block,
        "fixed_profile_s": fixed,
        "estimates_s": est,
        "budgets_s": budgets,
        "dropped": dropped,
        "copy_blocks": COPY_BLOCKS if "overlap" in extras else 0,
        "busy_blocks": BUSY_BLOCKS if "busy" in extras else 0,
        "cost_blocks": COST_BLOCKS if "cost" in extras else 0,
        "why": why,
    }


def shell(p: dict) -> str:
    b = p["budgets_s"]
    pairs = {
        "BLOCKS": p["blocks"],
        "T_RELEASE": b["release"],
        "T_SPEED": b["speed"],
        "T_DIFF": b["diff"],
        "T_OVERLAP": b.get("overlap", 0),
        "T_BUSY": b.get("busy", 0),
        "T_COST": b.get("cost", 0),
        "COPY_BLOCKS_PLAN": p["copy_blocks"] or COPY_BLOCKS,
        "COPY_OVERLAP_PLAN": int("overlap" in b),
        "BUSY_BLOCKS_PLAN": p["busy_blocks"] or "",
        "COST_BLOCKS_PLAN": p["cost_blocks"] or "",
    }
    return "\n".join(f"{k}={v}" for k, v in pairs.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("golden", type=Path, help="the calibration golden (gpu_lease.sh's calibrate phase)")
    parser.add_argument("--left", type=float, required=True, help="seconds left for the long part")
    parser.add_argument(
        "--record-wall",
        type=float,
        default=None,
        help="the calibration's golden record, seconds from spawn to exit (else PROCESS_S per process)",
    )
    parser.add_argument("--shapes", default="2,4,8,16,32")
    parser.add_argument("--arrangements", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--max-blocks",
        type=int,
        default=192,
        help="192: six full k = 32 requests, the fewest for a 95 %% interval of the k = 32 speedup",
    )
    parser.add_argument("--blocks", type=int, default=None, help="use these blocks (the budgets follow them)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    t_exact, n, network, blocks = calibration_figures(args.golden)
    process = PROCESS_S
    if args.record_wall is not None:  # what the record cost beyond its calls and its own per-block work
        process = max(3.0, args.record_wall - network - 2 * blocks * HOST_S)
    shapes = len([s for s in args.shapes.split(",") if s.strip()])
    p = plan(t_exact, args.left, shapes, args.arrangements, args.repeats, args.max_blocks, args.blocks, process)
    p["why"].insert(
        0,
        f"calibration: {args.golden} ({n} block-replicas timed; {network:.1f} s of calls"
        + (f", {args.record_wall:.0f} s of wall" if args.record_wall is not None else "")
        + ")",
    )
    if args.json:
        args.json.write_text(json.dumps(p, indent=1) + "\n")
    for line in p["why"]:
        print(f"gpu_lease_plan: {line}", file=sys.stderr)
    print(shell(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
