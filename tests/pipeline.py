"""The record -> run -> score pipeline the end-to-end tests share (small model by default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from golden.runs import Run
from golden.store import Golden
from harness.corpus.synth import synth_corpus
from harness.data.corpus_schema import Corpus
from harness.data.geometry import geometry_of
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import ConfigFile, EvidenceSection, ModelSection
from harness.data.schemas.results import Score
from harness.data.tolerances import Tolerances
from harness.pipeline.record import record_golden
from harness.pipeline.run import plan_for
from harness.pipeline.run import run_shapes as run_plan
from harness.pipeline.score import score_run
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model

ONE_ARRANGEMENT = EvidenceSection(arrangements=1, neighbours=False, canaries=False)


@dataclass
class Pipeline:
    model: object
    backend: InProcessBackend
    corpus: Corpus
    golden: Golden
    run: Run
    score: Score
    config: ConfigFile


def config_for(spec: str = "small", **kw) -> ConfigFile:
    return release_config(name=kw.pop("name", "rel"), model=ModelSection(spec=spec), **kw)


def record(
    model,
    tmp: Path,
    blocks: int = 12,
    numerics: NumericSettings = NumericSettings(),
    corpus: Corpus | None = None,
    release: str = "rel",
    config: ConfigFile | None = None,
) -> tuple[InProcessBackend, Corpus, Golden]:
    """A golden of ``model`` (a spec or a model object) over a synthetic corpus."""
    model = load_model(model) if isinstance(model, str) else model
    backend = InProcessBackend(model, numerics)
    corpus = corpus if corpus is not None else synth_corpus(geometry_of(model), blocks)
    golden, _ = record_golden(
        tmp / "goldens", release, corpus.rows(), backend, config or release_config(numerics=numerics)
    )
    return backend, corpus, golden


def run_shapes(
    backend: InProcessBackend, golden: Golden, tmp: Path, shapes: tuple[int, ...], config: ConfigFile | None = None
) -> Run:
    """Every shape over the golden's corpus, interleaved with the exact lane; without ``config``, one
    arrangement per shape (CI time: the tests that are about the arrangements pass a config that asks for them)."""
    cfg = (config or release_config(evidence=ONE_ARRANGEMENT)).with_overrides(candidates=shapes)
    return run_plan(golden, backend, plan_for(cfg), tmp / "runs", cfg)


def pipeline(
    model,
    tmp: Path,
    shapes: tuple[int, ...] = (2, 4),
    blocks: int = 12,
    numerics: NumericSettings = NumericSettings(),
    tolerances: Tolerances = Tolerances(),
    corpus: Corpus | None = None,
    voiceprint_inputs: str = "isolated",
    arrangements: int = 1,
    neighbours: bool = False,
) -> Pipeline:
    """Record, run and score ``model``; ``arrangements`` per shape: 1, and no neighbour lane, unless a test is about
    them (CI time)."""
    cfg = release_config(
        numerics=numerics,
        tolerances=tolerances,
        voiceprint_inputs=voiceprint_inputs,
        evidence=EvidenceSection(arrangements=arrangements, neighbours=neighbours, canaries=False),
    )
    backend, corpus, golden = record(model, tmp, blocks, numerics, corpus, config=cfg)
    run = run_shapes(backend, golden, tmp, shapes, cfg)
    return Pipeline(backend.model, backend, corpus, golden, run, score_run(golden, run, tolerances), cfg)
