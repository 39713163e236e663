"""A digest of what ``run_lanes`` produced: every lane's outputs (bitwise) and the call log (every field
but the timings), so a runner change can be checked against the runner as it was (the digests in
tests/test_runner_variants.py were computed by this module over the code before variants and pipelining)."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

import numpy as np

from harness.data.outputs import LaneOutputs

CALL_KEYS = ("lane", "shape", "op", "blocks", "windows", "rows", "request_bytes", "replica", "block_ids")


def null_setup(blocks: int = 10):
    """The null model at the small geometry, its in-process backend and ``blocks`` synthetic blocks."""
    from harness.corpus.synth import synth_corpus
    from harness.data.numeric_settings import NumericSettings
    from lanes.backends.backend import InProcessBackend
    from lanes.models.model_api import load_model

    model = load_model("lanes.models.null_model:small")
    return InProcessBackend(model, NumericSettings()), synth_corpus(model.geometry, blocks, seed=0).blocks


def run_collect(blocks, backend, plan, **hooks):
    """``hooks``: the fields of :class:`lanes.running.runner.LaneHooks` (``log=...``)."""
    from lanes.running.runner import LaneHooks, run_lanes

    parts = defaultdict(list)
    calls = run_lanes(blocks, backend, plan, lambda lane, batch: parts[lane].append(batch), hooks=LaneHooks(**hooks))
    return {lane: LaneOutputs.concat(p) for lane, p in parts.items()}, list(calls)


def outputs_digest(outputs: dict[str, LaneOutputs]) -> str:
    h = hashlib.sha256()
    for lane in sorted(outputs):
        out = outputs[lane]
        h.update(lane.encode() + b"\0" + "\0".join(out.segmentation.block_ids).encode())
        for arr in (out.segmentation.valid, out.segmentation.logprobs):
            h.update(np.ascontiguousarray(arr).tobytes())
        for op in sorted(out.voiceprint):
            v = out.voiceprint[op]
            h.update(str(int(op)).encode() + "\0".join(str(b) for b in v.block_ids).encode())
            for arr in (v.row, v.window, v.speaker, v.weights, v.embedding):
                h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def calls_digest(calls) -> str:
    h = hashlib.sha256()
    for c in calls:
        row = c if isinstance(c, dict) else c.to_dict()
        h.update(repr([row[k] if k != "block_ids" else list(row[k]) for k in CALL_KEYS]).encode() + b"\n")
    return h.hexdigest()


def recorded_and_run(backend, folder: Path) -> tuple[dict[str, str], list[str]]:
    """A golden recorded and a run of shapes 2 and 4 (null network, 8 synthetic blocks) through ``backend`` in
    ``folder``: every file's sha256 but the call log's (its walls differ), and the two call logs' digests."""
    from harness.corpus.synth import synth_corpus
    from harness.data.schemas.config_file import ModelSection
    from harness.pipeline.record import record_golden
    from harness.pipeline.run import RunOptions, plan_for, run_shapes
    from harness.release_config import release_config

    config = release_config(name="rel", model=ModelSection(spec="lanes.models.null_model:small"), candidates=(2, 4))
    corpus = synth_corpus(backend.geometry, 8, seed=1)
    golden, _ = record_golden(folder / "goldens", "rel", corpus.rows(), backend, config)
    run = run_shapes(golden, backend, plan_for(config, (2, 4)), folder / "runs", config, RunOptions(laws_examples=0))
    files = {
        f"{kind}/{k}": v.sha256
        for kind, files_of in (("golden", golden.manifest.files), ("run", run.manifest.files))
        for k, v in files_of.items()
        if k != "calls.parquet"
    }
    return files, [calls_digest(golden.iter_calls()), calls_digest(run.iter_calls())]


def plans():
    """The plans whose digests are pinned: shapes, both voiceprint modes, padding, exact repeats."""
    from lanes.running.run_plan import RunPlan

    return {
        "isolated-2-4": RunPlan(shapes=(2, 4)),
        "chained-3-pad-repeats": RunPlan(shapes=(3,), voiceprint_inputs="chained", pad_to_fixed=True, exact_repeats=2),
    }


def main() -> None:
    """Print the digests of the runner on sys.path (PYTHONPATH=/tmp/base: the code as it was)."""
    backend, blocks = null_setup()
    for name, plan in plans().items():
        outputs, calls = run_collect(blocks, backend, plan)
        print(name, len(calls), outputs_digest(outputs), calls_digest(calls))


if __name__ == "__main__":
    main()
