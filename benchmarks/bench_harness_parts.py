"""Where the harness's time per block and lane goes, part by part, one thread, no overlap.

    python benchmarks/bench_harness_cost.py --blocks 256 --workdir W   # leaves W/n256: golden and run
    python benchmarks/bench_harness_parts.py W/n256 [--groups 4]

Takes the golden and run that bench_harness_cost.py left (null network, full geometry) and times,
on a few row groups, each part the steps are made of, in this thread alone (the steps themselves
run writing, reading and hashing in threads beside the lanes): the model adapter's request
validation, packing, masks, output collection, Parquet encoding and decoding of a lane's outputs,
sha256 of their bytes, the corpus's decoding and hashing (shared by every lane), and scoring
(harness.compute.metrics' kernels apart from the judges' own work). Prints ms per block and lane.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from golden.lane_reader import LaneReader  # noqa: E402
from golden.runs import load_run  # noqa: E402
from golden.store import CORPUS, load_golden  # noqa: E402
from golden.tables import LaneWriter  # noqa: E402
from harness.compute import metrics  # noqa: E402
from harness.data.blocks import check_request  # noqa: E402
from harness.data.corpus_reader import CorpusReader  # noqa: E402
from harness.data.masks import voiceprint_rows  # noqa: E402
from harness.data.ops import ALL_OPS, Op  # noqa: E402
from harness.data.outputs import OutputCollector  # noqa: E402
from harness.data.parquet import RUN_COMPRESSION  # noqa: E402
from harness.data.tolerances import Tolerances  # noqa: E402
from harness.judging.lane_scoring import LaneScorer, op_limits  # noqa: E402
from harness.packers.packing import pack, unpack  # noqa: E402


class Clock:
    """Accumulates the process's CPU time per part (pyarrow decodes in its own threads; nothing else
    of the harness runs beside this script's calls)."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}

    def time(self, part: str, fn, *args, **kw):
        start = time.process_time()
        out = fn(*args, **kw)
        self.parts[part] = self.parts.get(part, 0.0) + time.process_time() - start
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path, help="a bench_harness_cost.py work folder (holds goldens/ and runs/)")
    parser.add_argument("--groups", type=int, default=4, help="row groups (32 blocks each) to time")
    args = parser.parse_args()
    golden = load_golden(args.work / "goldens" / "bench")
    (run_dir,) = [p for p in (args.work / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]
    run = load_run(run_dir, trusted=True)
    g = golden.geometry
    k = max(run.shapes)
    reader = run.lane(f"k{k}")
    ids = golden.block_ids()[: 32 * args.groups]
    n = len(ids)
    clock = Clock()

    # corpus: decoded and validated once per block whatever the lanes; hashed once per run
    blocks = []
    corpus = CorpusReader(golden.path / CORPUS, g)
    start = time.process_time()
    for rows, _ in corpus._groups():  # in this thread (rows() reads ahead in another)
        blocks += [b for b, _, _ in rows]
        if len(blocks) >= n:
            break
    blocks = blocks[:n]
    clock.parts["corpus: decode + validate (per block)"] = time.process_time() - start
    corpus_bytes = (golden.path / CORPUS).stat().st_size * n / golden.blocks
    data = np.random.default_rng(0).bytes(int(corpus_bytes))
    clock.time("corpus: sha256 (per block)", hashlib.sha256, data)

    # one packed lane (the largest shape): pack, validate (model adapter), unpack, masks, collect
    collector = OutputCollector(g)
    seg_of = {}
    for s in range(0, n, k):
        chunk = blocks[s : s + k]
        packed = clock.time("lane: pack", pack, chunk)
        clock.time("model adapter: check_request", check_request, packed.tensors(), g)
        answer = (
            golden.outputs()
            .select([b.id for b in chunk])
            .segmentation.logprobs.reshape(-1, g.frames_per_window, g.classes)
        )
        for b, out in zip(chunk, clock.time("lane: unpack", unpack, packed, {"SEGMENTATION": answer}), strict=True):
            clock.time("lane: collect", collector.add_segmentation, b.id, b.valid, out)
            seg_of[b.id] = out
    inputs = golden.outputs().select_voiceprints(ids)
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        rows = inputs[op].inputs()
        for s in range(0, n, k):
            chunk = blocks[s : s + k]

            def masks(chunk=chunk, op=op):
                return [voiceprint_rows(seg_of[b.id], b.valid, op, g) for b in chunk]

            def requests(chunk=chunk, op=op, rows=rows):
                return [
                    b.with_voiceprint(op, rows[b.id].weights, rows[b.id].idx, rows[b.id].speakers, g)
                    for b in chunk
                    if b.id in rows
                ]

            clock.time("lane: masks (chained mode only)", masks)
            vps = clock.time("lane: voiceprint requests", requests)
            if vps:
                packed = clock.time("lane: pack", pack, vps)
                clock.time("model adapter: check_request", check_request, packed.tensors(), g)
    batch = reader.select(ids)
    clock.time("lane: collect", collector.finish, ids)

    # writing a lane (Parquet encode + page CRC; the manifest's sha256 while writing) and reading it back
    with tempfile.TemporaryDirectory() as tmp:
        warm = LaneWriter(Path(tmp) / "warm", g, ALL_OPS, decisions=False, compression=RUN_COMPRESSION)
        warm.write(batch.select(ids[:1]))  # pyarrow's first table conversion initialises itself: not per block
        warm.close()
        writer = LaneWriter(Path(tmp) / "lane", g, ALL_OPS, decisions=False, compression=RUN_COMPRESSION)
        for s in range(0, n, 32):
            clock.time("write: encode + CRC + sha256", writer.write, batch.select(ids[s : s + 32]))
        clock.time("write: encode + CRC + sha256", writer.close)
        lane_bytes = sum(p.stat().st_size for p in (Path(tmp) / "lane").iterdir())
        copy = LaneReader(Path(tmp) / "lane", g, ALL_OPS, decisions=False, where="copy")
        clock.time("read: decode", lambda: [copy.select(ids[s : s + 32]) for s in range(0, n, 32)])
        lane_data = np.random.default_rng(0).bytes(lane_bytes)
        clock.time("read: sha256 (a standalone score verifies)", hashlib.sha256, lane_data)

    # scoring one lane against the golden: harness.compute.metrics' kernels and the judges' own work
    limits = op_limits(Tolerances(), ALL_OPS, golden.floors())
    scorer = LaneScorer(k, ALL_OPS, g, limits, "isolated")
    kernels = {"row_diff": metrics.row_diff, "cosine_and_rel_l2": metrics.cosine_and_rel_l2}
    spent = {"kernels": 0.0}

    def timed(fn):
        def wrapper(*a, **kw):
            start = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                spent["kernels"] += time.process_time() - start

        return wrapper

    import harness.judging.judges.segmentation_evidence as seg_judge
    import harness.judging.judges.voiceprint_evidence as vp_judge

    saved = (seg_judge.row_diff, vp_judge.row_diff, vp_judge.cosine_and_rel_l2)
    seg_judge.row_diff, vp_judge.row_diff = timed(kernels["row_diff"]), timed(kernels["row_diff"])
    vp_judge.cosine_and_rel_l2 = timed(kernels["cosine_and_rel_l2"])
    try:
        for s in range(0, n, 32):
            chunk = ids[s : s + 32]
            gold = golden.outputs().select(chunk)
            gold.segmentation.decisions()
            clock.time("score: judges (all)", scorer.add, gold, batch.select(chunk))
    finally:
        seg_judge.row_diff, vp_judge.row_diff, vp_judge.cosine_and_rel_l2 = saved
    clock.parts["score: of which harness.compute.metrics kernels"] = spent["kernels"]

    print(
        f"{n} blocks, full geometry, lane k={k}; CPU ms per block and lane, no overlap "
        "(corpus parts: per block, shared by every lane of a run)"
    )
    for part, seconds in clock.parts.items():
        print(f"  {part:<48} {1e3 * seconds / n:8.3f}")


if __name__ == "__main__":
    main()
