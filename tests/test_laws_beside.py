"""The packing-laws gate runs beside the lanes: a cached verdict imports no hypothesis, the
harness's own packer is judged in a thread joined at ``RunWriter.finish``, and an error there still ends
the run with its one line and no run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import Future
from pathlib import Path

import pytest

from harness.base.errors import HarnessError
from harness.packers.packing import HarnessPacker
from harness.pipeline import laws_gate

ROOT = Path(__file__).resolve().parents[1]


def test_the_gate_s_own_constants_are_the_laws_kit_s():
    import hypothesis

    from harness.laws.boundary import DEFAULT_MAX_BLOCKS

    assert laws_gate.DEFAULT_MAX_BLOCKS == DEFAULT_MAX_BLOCKS, (
        f"laws_gate.DEFAULT_MAX_BLOCKS {laws_gate.DEFAULT_MAX_BLOCKS} != harness.laws.boundary's "
        f"{DEFAULT_MAX_BLOCKS}: both must read harness.packers.packing.LAWS_DEFAULT_MAX_BLOCKS "
        "(no hypothesis for the gate)"
    )
    assert laws_gate._hypothesis_version() == hypothesis.__version__


def test_a_cached_verdict_imports_neither_hypothesis_nor_the_laws_kit(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_LAWS_CACHE", str(tmp_path))
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    monkeypatch.setattr(laws_gate, "_source_digest", lambda: "d" * 64)  # one key while the tree is edited
    first = laws_gate.judge_laws(HarnessPacker(), examples=1, max_blocks=2)  # judged here, cached in tmp_path
    code = textwrap.dedent("""
        import json, sys
        from harness.packers.packing import HarnessPacker
        from harness.pipeline import laws_gate
        laws_gate._source_digest = lambda: "d" * 64
        verdict = laws_gate.judge_laws(HarnessPacker(), examples=1, max_blocks=2)
        print(json.dumps({"verdict": verdict.model_dump(), "imported": sorted(m for m in ("hypothesis", "harness.laws")
                                                                  if m in sys.modules)}))
    """)
    env = {**os.environ, "HARNESS_LAWS_CACHE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["verdict"] == first.model_dump()
    assert got["imported"] == [], (
        f"a process that found its verdict in the cache imported {got['imported']} (about 1 s of start-up); "
        "expected none: take hypothesis's version from its metadata, DEFAULT_MAX_BLOCKS from laws_gate"
    )


def test_beside_returns_the_same_verdict_as_a_future(monkeypatch):
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    monkeypatch.setenv("HARNESS_LAWS_CACHE", "off")
    future = laws_gate.judge_laws(HarnessPacker(), 1, 2, beside=True)
    assert isinstance(future, Future)
    assert future.result(timeout=300) == laws_gate.judge_laws(HarnessPacker(), 1, 2)


class _Foreign:
    """Not the harness's packer: judged at once, in the caller's thread (the lanes use it next)."""

    name = "foreign"

    def describe(self):
        return {"name": self.name, "identity": "foreign@1"}


def test_a_foreign_packer_is_judged_now_and_its_error_raised_now(monkeypatch):
    import threading

    seen = []

    def judge(packer, examples, max_blocks):
        seen.append(threading.current_thread().name)
        raise HarnessError("packer foreign: crashed during the laws")

    monkeypatch.setattr(laws_gate, "_judge", judge)
    with pytest.raises(HarnessError, match="crashed during the laws"):
        laws_gate.judge_laws(_Foreign(), 1, 2, beside=True)  # type: ignore[arg-type]
    assert seen == [threading.current_thread().name]


@pytest.mark.parametrize(
    "error", [HarnessError("packing laws: the verdict cache is unreadable"), RuntimeError("a bug in the laws")]
)
def test_an_error_beside_the_lanes_ends_the_run_and_keeps_no_run(tmp_path, monkeypatch, error):
    from harness.corpus.synth import synth_corpus
    from harness.data.numeric_settings import NumericSettings
    from harness.data.schemas.config_file import ModelSection
    from harness.pipeline.record import record_golden
    from harness.pipeline.run import RunOptions, plan_for, run_shapes
    from harness.release_config import release_config
    from lanes.backends.backend import InProcessBackend
    from lanes.models.model_api import load_model

    backend = InProcessBackend(load_model("lanes.models.null_model:small"), NumericSettings())
    config = release_config(name="rel", model=ModelSection(spec="lanes.models.null_model:small"), candidates=(2,))
    golden, _ = record_golden(
        tmp_path / "goldens", "rel", synth_corpus(backend.geometry, 4, seed=1).rows(), backend, config
    )

    def judge(packer, examples, max_blocks):
        raise error

    monkeypatch.setattr(laws_gate, "_judge", judge)
    with pytest.raises(type(error), match=str(error)) as caught:
        run_shapes(golden, backend, plan_for(config, (2,)), tmp_path / "runs", config, RunOptions(laws_examples=1))
    if isinstance(error, RuntimeError):  # an internal error names the step it happened in
        assert "packing laws" in caught.value.harness_step  # type: ignore[attr-defined]
    left = [p.name for p in (tmp_path / "runs").iterdir()] if (tmp_path / "runs").exists() else []
    assert left == [], f"a run whose laws verdict failed left {left} under runs/; expected nothing"
