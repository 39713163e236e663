"""The record -> run -> score pipeline the end-to-end tests share (small model by default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from golden.runs import Run, load_run, write_run
from golden.store import Golden, record_golden
from harness.corpus.schema import Corpus
from harness.corpus.synth import synth_corpus
from harness.evaluate import score_run
from harness.numerics import NumericSettings
from harness.tolerances import Tolerances
from lanes.backend import InProcessBackend
from lanes.model_api import load_model
from lanes.runner import RunPlan, run_lanes


@dataclass
class Pipeline:
    model: object
    backend: InProcessBackend
    corpus: Corpus
    golden: Golden
    run: Run
    score: dict


def record(model, tmp: Path, blocks: int = 12, numerics: NumericSettings = NumericSettings(),
           corpus: Corpus | None = None, release: str = "rel") -> tuple[InProcessBackend, Corpus, Golden]:
    """A golden of ``model`` (a spec or a model object) over a synthetic corpus."""
    model = load_model(model) if isinstance(model, str) else model
    backend = InProcessBackend(model, numerics)
    corpus = corpus if corpus is not None else synth_corpus(model.geometry, blocks)
    golden, _ = record_golden(tmp / "goldens", release, corpus, backend, RunPlan(), {})
    return backend, corpus, golden


def run_shapes(backend: InProcessBackend, golden: Golden, tmp: Path, shapes: tuple[int, ...]) -> Run:
    """The fast lane at ``shapes`` over the golden's corpus (isolated: the golden's voiceprint inputs)."""
    plan = RunPlan(shapes=shapes)
    corpus = golden.corpus
    result = run_lanes(corpus.blocks, backend, plan, voiceprint_inputs=golden.voiceprint_inputs())
    return load_run(write_run(tmp / "runs", result, plan, backend, golden.golden_id, {}, corpus.ids).path)


def pipeline(model, tmp: Path, shapes: tuple[int, ...] = (2, 4), blocks: int = 12,
             numerics: NumericSettings = NumericSettings(), tolerances: Tolerances = Tolerances(),
             corpus: Corpus | None = None) -> Pipeline:
    backend, corpus, golden = record(model, tmp, blocks, numerics, corpus)
    run = run_shapes(backend, golden, tmp, shapes)
    return Pipeline(backend.model, backend, corpus, golden, run, score_run(golden, run, tolerances))
