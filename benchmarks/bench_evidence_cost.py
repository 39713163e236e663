"""What each kind of evidence costs, as a share of one nightly's network time (one run, one process).

    python benchmarks/bench_evidence_cost.py [--model small] [--blocks 16] [--shapes 2,4,8]
        [--arrangements 3] [--workdir DIR] [--json OUT.json]

Records a golden of a synthetic corpus, runs one nightly on it (in process, nothing promoted) and reads the
run's call log: every network call's device time (``wall_s``), summed per kind of lane (the exact lane, the
plain packed lanes, the shuffled arrangements, the duplicates, the neighbour lane ``k<k>.n``, its control
repeats ``k<k>.nc``, the repeats), and the canaries' calls (``score.canaries.seconds``). Each is printed as a
share of the night's network time (every logged call plus the canaries), so the figures compare on any
machine: the networks run 50-200x faster on a GPU, and so do these calls.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.base.process_settings import tune_process  # noqa: E402

tune_process()  # as every harness command: idle OpenMP threads sleep (before torch is imported)

from harness.corpus.synth import synth_corpus  # noqa: E402
from harness.data.geometry import geometry_of  # noqa: E402
from harness.data.numeric_settings import NumericSettings  # noqa: E402
from harness.data.schemas.config_file import EvidenceSection, ModelSection  # noqa: E402
from harness.pipeline.nightly import nightly  # noqa: E402
from harness.pipeline.nightly_job import NightlyJob  # noqa: E402
from harness.pipeline.record import record_golden  # noqa: E402
from harness.release_config import release_config  # noqa: E402
from lanes.backends.backend import InProcessBackend  # noqa: E402
from lanes.models.model_api import load_model  # noqa: E402

KINDS = (
    ("neighbour controls", re.compile(r"k\d+\.nc$")),
    ("neighbours", re.compile(r"k\d+\.n$")),
    ("shuffled arrangements", re.compile(r"k\d+\.a\d+$")),
    ("duplicates", re.compile(r"k\d+\.d$")),
    ("repeats", re.compile(r"k\d+\.r\d+$")),
)


def kind_of(call: dict) -> str:
    if call["lane"] == "exact":
        return "exact lane"
    variant = str(call.get("variant") or "")
    if not variant:
        return "plain packed lanes"
    return next((name for name, pattern in KINDS if pattern.match(variant)), f"other ({variant})")


def measure(model: str, blocks: int, shapes: tuple[int, ...], arrangements: int, workdir: Path) -> dict:
    backend = InProcessBackend(load_model(model), NumericSettings())
    evidence = EvidenceSection(arrangements=arrangements)
    config = release_config(name="cost", model=ModelSection(spec=model), candidates=shapes, evidence=evidence)
    corpus = synth_corpus(geometry_of(backend.model), blocks)
    golden, _ = record_golden(workdir / "goldens", "cost", corpus.rows(), backend, config)
    started = time.perf_counter()
    outcome = nightly(
        NightlyJob(config, golden.path, workdir / "night", progress=False, localise=False, no_promote=True), backend
    )
    wall = time.perf_counter() - started
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    run = outcome.score.run
    from golden.runs import load_run

    for call in load_run(run.path).iter_calls():
        kind = kind_of(call)
        seconds[kind] += float(call["wall_s"])
        calls[kind] += 1
    canaries = outcome.score.canaries
    if canaries is not None and canaries.planted:
        seconds["canaries"] += canaries.seconds
        calls["canaries"] += canaries.calls
    total = sum(seconds.values())
    return {
        "model": model,
        "blocks": blocks,
        "shapes": list(shapes),
        "arrangements": arrangements,
        "nightly_wall_s": wall,
        "network_s": total,
        "exit": outcome.exit_code,
        "kinds": {
            k: {"calls": calls[k], "seconds": seconds[k], "share": seconds[k] / total if total else 0.0}
            for k in sorted(seconds, key=lambda k: -seconds[k])
        },
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="small")
    parser.add_argument("--blocks", type=int, default=16)
    parser.add_argument("--shapes", default="2,4,8")
    parser.add_argument("--arrangements", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    shapes = tuple(int(k) for k in args.shapes.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        data = measure(args.model, args.blocks, shapes, args.arrangements, args.workdir or Path(tmp))
    print(
        f"{data['model']}, {data['blocks']} blocks, shapes {data['shapes']}, {data['arrangements']} arrangements: "
        f"network {data['network_s']:.1f} s, nightly wall {data['nightly_wall_s']:.1f} s"
    )
    for kind, k in data["kinds"].items():
        print(f"  {kind:24s} {k['calls']:6d} calls {k['seconds']:9.2f} s {100 * k['share']:6.1f} %")
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
