"""Does the harness keep an accelerator busy? Each command, as a user runs it, on the simulated device.

    python benchmarks/bench_device_busy.py [--commands run,record,nightly,audit] [--blocks 256,1024]
        [--c0 2] [--c1 0.05,0.2,1.0] [--flight two,serial] [--shapes 2,4,8,16,32] [--repeats 3] [--quick]
        [--model SPEC] [--device cuda:0] [--extra '--arrangements 1'] [--workdir DIR] [--json OUT.json]

The model is ``lanes.simulation.simulated_device:full`` (a model without ``stage``, as a team's own: the null network's
answers at the full reference geometry, its host part, then ``C0 + C1 x windows`` ms of ``time.sleep`` per call
under the one device's lock, the GIL released as a device call releases it) with ``timeline=`` set, so every
call's device part (start, end) is written when the command exits. ``--flight``: ``two``, the model as it is
(it declares ``concurrent_calls``: the lanes keep two calls in flight, lanes/running/calls_in_flight.py), and
``serial``, the same model declaring one call at a time (``concurrent=false``): its host part in series with
the device's, as before two calls in flight; each row names its mode. Each command is a
fresh ``harness ...`` process spawned by this script (what a user or CI pays: start-up, imports, model
load, every write), and the script prints, per command, N and C1:

    busy       the device's busy fraction: busy seconds (the union of the calls' intervals) / lanes span
               (first call's start to last call's end). 1.0: the device never waited for the host
               inside the lanes.
    share      the command share of the lanes: lanes span / command wall (spawn to exit, measured here).
    harness    the harness share: (wall - busy) / wall, the part of the command the device sat idle.
    wall       command wall seconds; device: busy seconds; rss: the child's peak RSS (os.wait4's
               ru_maxrss: that one process, not the maximum over every child).
    before     seconds from spawn to the first call's start (start-up: imports, reading the golden or
               the capture, building the model, the exact lane's first warm-up call);
    after      seconds from the last call's end to exit (finishing the lanes' writes, scoring,
               promotion, the report): with the span, the three parts of the wall.

Medians over ``--repeats`` repetitions, interleaved (repeat 1 of every (command, C1), then repeat 2, ...)
so drift on a shared machine hits all alike. Setup happens once per N, outside the timed commands: the
synthetic corpus, a golden recorded with C0 = C1 = 0 (for run and nightly) and, for audit, a capture of
N blocks served 4 a request by the same null answers (``examples/capture_simulated_engine.py``). The
golden's model spec differs from the timed one only in its arguments: the fingerprint is the null's, so
the run is judged against it as usual. A nightly writes its ledger and manifest into its own folder
(``--set nightly.ledger=...``), so every repetition starts from an empty ledger.

On a GPU, ``--model 'lanes.running.device_timeline:wrap?inner=full' --device cuda:0`` measures the real device
the same way (lanes/running/device_timeline.py: each call's time between two CUDA events; ``--c0``/``--c1`` do not
apply, the C1 column reads ``-``). ``audit`` is then left out: its capture is served on the CPU
(examples/capture_simulated_engine.py has no device option), which for the real network takes hours.

The children use this interpreter and the environment given (``PYTHONPATH=/tmp/base`` measures another
checkout: the header prints which ``harness`` package the children import). Peak RSS should stay
within 20 % from N = 256 to 1024 (the harness streams); the script prints the ratio when both ran.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = ("run", "record", "nightly", "audit")
MODEL = "lanes.simulation.simulated_device:full"


def busy_of(path: Path) -> tuple[float, float, int, float, float]:
    """(busy s, span s, calls, first call's start, last call's end) of a timeline file; overlapping calls
    count once (as the device is busy once): the simulated device's own reading and measure
    (lanes.simulation.simulated_device), an empty timeline refused. The times are CLOCK_MONOTONIC, as this process's
    ``time.perf_counter``: the command's start-up before the lanes, and its finish after them, are read
    against this process's spawn and exit times."""
    from harness.base.errors import ModelError
    from lanes.simulation.simulated_device import busy_fraction, read_timeline

    try:
        iv = read_timeline(path)
    except ModelError as exc:  # a truncated file: one line, as every other refusal of this script
        raise SystemExit(str(exc)) from None
    if len(iv) == 0:
        raise SystemExit(f"{path}: an empty timeline (no call was timed)")
    busy, span, _ = busy_fraction(iv)
    return busy, span, len(iv), float(iv[:, 0].min()), float(iv[:, 1].max())


def harness_cmd() -> list[str]:
    """``harness`` as a user types it: this interpreter's console script, else ``python -m harness.cli``."""
    script = Path(sys.executable).parent / "harness"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "harness.cli"]


def spawn(argv: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> tuple[float, int, int, float]:
    """Run ``argv``; (wall s from spawn to exit, peak RSS bytes of that child, exit status, spawn time as
    ``time.perf_counter``). Exits on a status not in ``ok`` (a nightly that refuses a shape, exit 1, did its
    whole work: its figures count)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:  # a file, not a pipe: a chatty child never blocks on it
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().strip()
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(argv)}\nexit {proc.returncode}: {text[-800:]}")
    if proc.returncode:
        print(f"    (exit {proc.returncode}: {text.splitlines()[-1][:200] if text else ''})", flush=True)
    return wall, usage.ru_maxrss * 1024, proc.returncode, start


def untimed(model: str) -> str:
    """The spec that builds the setup: the simulated device at no cost, another model as it is."""
    return f"{MODEL}?c0_ms=0&c1_ms=0" if model == MODEL else model


def timed(model: str, c0: float, c1: float | None, timeline: Path, flight: str = "two") -> str:
    """The spec of one measurement: the model with its timeline (and the simulated device's cost; ``serial``:
    declaring one call at a time)."""
    if model == MODEL:
        serial = "&concurrent=false" if flight == "serial" else ""
        return f"{MODEL}?c0_ms={c0}&c1_ms={c1}&timeline='{timeline}'{serial}"
    return f"{model}{'&' if '?' in model else '?'}timeline='{timeline}'"


def setup(
    work: Path,
    n: int,
    commands: tuple[str, ...],
    env: dict[str, str],
    checkout: Path,
    model: str,
    device: tuple[str, ...],
) -> None:
    """Corpus, golden and capture for N blocks (once; --workdir keeps them between invocations)."""
    work.mkdir(parents=True, exist_ok=True)
    free = untimed(model)
    h = harness_cmd()
    if not (work / "corpus.parquet").is_file():
        spawn([*h, "corpus", "synth", "corpus.parquet", "--model", free, "--blocks", str(n)], work, env)
    if {"run", "nightly"} & set(commands) and not (work / "goldens" / "bench").is_dir():
        spawn(
            [
                *h,
                "golden",
                "record",
                "--model",
                free,
                "--corpus",
                "corpus.parquet",
                "--goldens",
                "goldens",
                "--release",
                "bench",
                "--no-progress",
                *device,
            ],
            work,
            env,
        )
    if "audit" in commands and not (work / "capture.parquet").is_file():
        spawn(
            [
                sys.executable,
                str(checkout / "examples" / "capture_simulated_engine.py"),
                "capture.parquet",
                "--model",
                free,
                "--blocks",
                str(n),
                "--k",
                "4",
            ],
            work,
            env,
        )


def command_argv(command: str, spec: str, out: Path, shapes: str, device: tuple[str, ...] = ()) -> list[str]:
    return [*_command_argv(command, spec, out, shapes), *device]


def _command_argv(command: str, spec: str, out: Path, shapes: str) -> list[str]:
    h = harness_cmd()
    if command == "run":
        return [
            *h,
            "run",
            "--golden",
            "goldens/bench",
            "--runs",
            str(out / "runs"),
            "--shapes",
            shapes,
            "--model",
            spec,
            "--no-progress",
        ]
    if command == "record":
        return [
            *h,
            "golden",
            "record",
            "--model",
            spec,
            "--corpus",
            "corpus.parquet",
            "--goldens",
            str(out / "goldens"),
            "--release",
            "bench",
            "--no-progress",
        ]
    if command == "nightly":
        return [
            *h,
            "nightly",
            "--golden",
            "goldens/bench",
            "--out",
            str(out / "nightly"),
            "--shapes",
            shapes,
            "--model",
            spec,
            "--set",
            f"nightly.ledger='{out / 'ledger.json'}'",
            "--set",
            f"nightly.manifest='{out / 'promoted-shapes.json'}'",
            "--no-progress",
        ]
    if command == "audit":
        return [*h, "audit", "capture.parquet", "--golden-model", spec, "--out", str(out / "audit"), "--no-progress"]
    raise SystemExit(f"unknown command {command!r}; expected some of {', '.join(COMMANDS)}")


def measure(
    command: str,
    work: Path,
    model: str,
    c0: float,
    c1: float | None,
    shapes: str,
    env: dict[str, str],
    rep: int,
    device: tuple[str, ...],
    flight: str = "two",
) -> dict[str, float]:
    out = work / f"out-{command}-c1_{c1}-{flight}-{rep}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    timeline = out / "timeline.bin"
    spec = timed(model, c0, c1, timeline, flight)
    wall, rss, code, spawned = spawn(
        command_argv(command, spec, out, shapes, device), work, env, (0, 1) if command == "nightly" else (0,)
    )
    busy, span, calls, first, last = busy_of(timeline)
    shutil.rmtree(out, ignore_errors=True)  # the disk is shared: keep only the figures
    return {
        "busy": busy / span if span > 0 else 0.0,
        "share": span / wall,
        "harness": (wall - busy) / wall,
        "wall_s": wall,
        "device_s": busy,
        "span_s": span,
        "before_s": first - spawned,
        "after_s": spawned + wall - last,
        "rss_mb": rss / 2**20,
        "calls": calls,
        "exit": code,
    }


def table(rows: list[dict]) -> str:
    head = (
        f"{'command':>8} {'N':>5} {'C1 ms':>6} {'flight':>6} {'busy':>6} {'share':>6} {'harness':>8} {'wall s':>8} "
        f"{'device s':>9} {'span s':>7} {'before':>7} {'after':>6} {'calls':>6} {'rss MB':>7} {'exit':>4}"
    )
    lines = [head]
    for r in rows:
        c1 = "-" if r["c1_ms"] is None else format(r["c1_ms"], "g")
        lines.append(
            f"{r['command']:>8} {r['blocks']:>5} {c1:>6} {r['flight']:>6} {r['busy']:>6.3f} {r['share']:>6.3f} "
            f"{r['harness']:>8.3f} {r['wall_s']:>8.2f} {r['device_s']:>9.2f} {r['span_s']:>7.2f} "
            f"{r['before_s']:>7.2f} {r['after_s']:>6.2f} "
            f"{r['calls']:>6.0f} {r['rss_mb']:>7.0f} {r['exit']:>4.0f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--blocks", default="256,1024")
    parser.add_argument("--c0", type=float, default=2.0, help="device ms per call")
    parser.add_argument("--c1", default="0.05,0.2,1.0", help="device ms per window, comma-separated")
    parser.add_argument(
        "--flight", default="two,serial", help="two (the model as it is) and/or serial (one call at a time)"
    )
    parser.add_argument("--shapes", default="2,4,8,16,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="run only, 32 blocks, C1 = 0.2, one repeat")
    parser.add_argument(
        "--model",
        default=MODEL,
        help="another model (lanes.running.device_timeline:wrap?inner=full on a "
        "GPU) that writes a timeline= file: C0/C1 then do not apply",
    )
    parser.add_argument("--device", default=None, help="--device of every command (cuda:0 on a GPU)")
    parser.add_argument(
        "--extra",
        default="",
        help="more options for run and nightly, e.g. '--arrangements 1' "
        "(to compare with a tree that sent fewer lanes: the calls column counts them)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keeps corpus, golden, capture between runs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.commands, args.blocks, args.c1, args.repeats = "run", "32", "0.2", 1
    commands = tuple(c.strip() for c in args.commands.split(",") if c.strip())
    if args.model != MODEL and "audit" in commands:
        print("audit left out: its capture is served on the CPU (see the docstring)", flush=True)
        commands = tuple(c for c in commands if c != "audit")
    for c in commands:
        command_argv(c, MODEL, Path("."), args.shapes)  # an unknown command is refused before any setup
    blocks = [int(b) for b in args.blocks.split(",")]
    c1s: list[float | None] = [float(c) for c in args.c1.split(",")] if args.model == MODEL else [None]
    flights = [f.strip() for f in args.flight.split(",") if f.strip()] if args.model == MODEL else ["two"]
    if not flights or set(flights) - {"two", "serial"}:
        raise SystemExit(f"--flight {args.flight!r}: expected two, serial or both")
    device = ("--device", args.device) if args.device else ()
    extra = tuple(shlex.split(args.extra))
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="bench-device-busy-"))
    where = subprocess.run(
        [sys.executable, "-c", "import harness; print(harness.__file__)"], env=env, capture_output=True, text=True
    ).stdout.strip()
    print(
        f"harness from {where}; model {args.model}, C0 {args.c0:g} ms; shapes {args.shapes}; CPUs "
        f"{len(os.sched_getaffinity(0))}; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    samples: dict[tuple[str, int, float | None, str], list[dict[str, float]]] = {}
    for n in blocks:
        setup(root / f"N{n}", n, commands, env, Path(where).parents[1], args.model, device)
        for rep in range(args.repeats):
            for command in commands:
                for c1 in c1s:
                    for flight in flights:
                        more = (*device, *extra) if command in ("run", "nightly") else device
                        m = measure(
                            command, root / f"N{n}", args.model, args.c0, c1, args.shapes, env, rep, more, flight
                        )
                        samples.setdefault((command, n, c1, flight), []).append(m)
                        print(
                            f"  [{rep + 1}/{args.repeats}] {command} N={n} C1={c1} {flight}: busy {m['busy']:.3f}, "
                            f"share {m['share']:.3f}, wall {m['wall_s']:.1f} s, load {os.getloadavg()[0]:.2f}",
                            flush=True,
                        )
    rows = [
        {
            "command": c,
            "blocks": n,
            "c0_ms": args.c0,
            "c1_ms": c1,
            "flight": flight,
            "repeats": len(ms),
            **{k: statistics.median(m[k] for m in ms) for k in ms[0]},
        }
        for (c, n, c1, flight), ms in samples.items()
    ]
    rows.sort(key=lambda r: (COMMANDS.index(r["command"]), r["blocks"], r["c1_ms"] or 0.0, r["flight"]))
    print(f"\nmedians of {args.repeats}; load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(table(rows))
    growth = {}
    for c in commands:
        for c1 in c1s:
            for flight in flights:
                pair = [samples.get((c, n, c1, flight)) for n in (min(blocks), max(blocks))]
                if len(blocks) > 1 and all(pair):
                    small, large = (statistics.median(m["rss_mb"] for m in p) for p in pair if p)
                    growth[f"{c} C1={c1} {flight}"] = large / small
    for name, ratio in growth.items():
        print(
            f"peak RSS {name}: N={max(blocks)} / N={min(blocks)} = {ratio:.2f} "
            f"({'within' if ratio <= 1.2 else 'OVER'} 20 %)"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "harness": where,
                    "load": os.getloadavg(),
                    "model": args.model,
                    "device": args.device or "cpu",
                    "rows": rows,
                    "rss_growth": growth,
                },
                indent=1,
            )
            + "\n"
        )
    if args.workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
