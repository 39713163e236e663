"""Shared fixtures: the small reference model, a small synthetic corpus, a recorded golden."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def small_model():
    from lanes.models.model_api import load_model

    return load_model("small")


@pytest.fixture(scope="session")
def geometry(small_model):
    return small_model.geometry


@pytest.fixture(scope="session")
def small_corpus(geometry):
    from harness.corpus.synth import synth_corpus

    return synth_corpus(geometry, 12, seed=0)


@pytest.fixture(scope="session")
def backend(small_model):
    from harness.data.numeric_settings import NumericSettings
    from lanes.backends.backend import InProcessBackend

    return InProcessBackend(small_model, NumericSettings())


@pytest.fixture(scope="session")
def small_config():
    from harness.data.schemas.config_file import ModelSection
    from harness.release_config import release_config

    return release_config(name="small-rel", model=ModelSection(spec="small"), candidates=(2, 4))


@pytest.fixture(scope="session")
def recorded_golden(tmp_path_factory, small_corpus, backend, small_config):
    """A golden of the small model over 12 synthetic blocks (read-only for tests: copy to modify)."""
    from harness.pipeline.record import record_golden

    root = tmp_path_factory.mktemp("goldens")
    golden, _ = record_golden(root, "small-rel", small_corpus.rows(), backend, small_config)
    return golden


@pytest.fixture
def golden_copy(recorded_golden, tmp_path) -> Path:
    dest = tmp_path / "goldens" / recorded_golden.path.name
    shutil.copytree(recorded_golden.path, dest)
    return dest


@pytest.fixture
def no_model_building(monkeypatch):
    """Building the model (or running a lane) is the work a refusal must come before."""
    from harness.pipeline import record
    from harness.pipeline.commands import audit, golden, job, lane

    def refuse(*_a, **_k):
        raise AssertionError("the model was built / a lane ran before the refusal")

    for commands in (audit, golden, job, lane):  # every command module that builds a backend
        monkeypatch.setattr(commands, "make_backend", refuse)
    monkeypatch.setattr(record, "run_lanes", refuse)
