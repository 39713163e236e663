"""In process, the harness leaves torch as it found it: a golden record, a run, a verify and a nightly each hold
their backend's numeric settings for their whole work (the module floors included) and give the process's own
state back when they end, on an error or a KeyboardInterrupt too (a team's pytest session, a notebook).

The settings are checked where the work happens (the corpus is read and the model called inside the scope),
so a scope that set nothing could not pass; the process's state is moved at random first (both of torch's
TF32 APIs), so a restore to torch's defaults could not pass either.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import EXIT_FAIL, EXIT_PASS
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import EvidenceSection, LocaliseSection, ModelSection, PackerSection
from harness.host.numerics_scope import CUBLAS_VARIABLE, open_scopes
from harness.host.torch_state import TorchState
from harness.pipeline.nightly import nightly
from harness.pipeline.nightly_job import NightlyJob
from harness.pipeline.record import record_golden, verify_golden
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.models.model_api import load_model
from tests import torch_moves
from tests.pipeline import run_shapes
from tests.torch_moves import in_force_of, kept, moved, observed

NULL = "lanes.models.null_model:small"
FAILURES = (None, "corpus", "interrupt", "model")


class _Watching:
    """A model reading torch's state in every call; ``fail_at``: the call (1-based) that raises."""

    def __init__(self, model: Any, fail_at: int | None = None) -> None:
        self.inner, self.fail_at, self.seen = model, fail_at, []
        self.fingerprint, self.geometry = model.fingerprint, model.geometry

    def infer(self, request: Any) -> Any:
        self.seen.append(TorchState.read())
        if self.fail_at is not None and len(self.seen) >= self.fail_at:
            raise RuntimeError("the model failed")
        return self.inner.infer(request)

    def __getattr__(self, name: str) -> Any:  # torch_modules() and the rest, where the model has them
        return getattr(self.inner, name)


def _rows(corpus: Any, failure: str | None, seen: list[TorchState]) -> Iterator[Any]:
    """The corpus as the record reads it, torch's state read at every block; a failure after the first."""
    for i, row in enumerate(corpus.rows()):
        seen.append(TorchState.read())
        if i == 1 and failure == "corpus":
            raise ValueError("the corpus broke")
        if i == 1 and failure == "interrupt":
            raise KeyboardInterrupt
        yield row


def _record(model: Any, numerics: NumericSettings, failure: str | None, root: Path, floors: int = 0) -> Any:
    """A golden record of ``model`` in this process; returns the golden or the exception that ended it."""
    watching = _Watching(model, fail_at=3 if failure == "model" else None)
    corpus = synth_corpus(model.geometry, 2, seed=0)
    cfg = release_config(
        name="rel", model=ModelSection(spec="small"), numerics=numerics, localise=LocaliseSection(floor_blocks=floors)
    )
    seen: list[TorchState] = []
    try:
        golden, _ = record_golden(root, "rel", _rows(corpus, failure, seen), InProcessBackend(watching, numerics), cfg)  # type: ignore[arg-type]
    except (Exception, KeyboardInterrupt) as exc:
        outcome: Any = exc
    else:
        outcome = golden
    during = [observed(s, numerics) for s in seen + watching.seen]
    assert during and all(d == in_force_of(numerics) for d in during), (
        f"the settings were not in force while the record worked: {during} != {in_force_of(numerics)}"
    )
    return outcome


def _check_outcome(outcome: Any, failure: str | None, numerics: NumericSettings) -> None:
    if failure is None:
        in_force = outcome.manifest.numerics.in_force
        assert {k: in_force[k] for k in ("threads", "mkldnn", "deterministic_algorithms", "matmul_precision")} == {
            "threads": numerics.resolved_threads(),
            "mkldnn": numerics.mkldnn,
            "deterministic_algorithms": numerics.deterministic_algorithms,
            "matmul_precision": numerics.matmul_precision,
        }, in_force
    else:
        expected = KeyboardInterrupt if failure == "interrupt" else Exception
        assert isinstance(outcome, expected), f"{failure}: the record ended with {outcome!r}"


@pytest.fixture(scope="module")
def null_model() -> Any:
    return load_model(NULL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.lists(torch_moves.moves, max_size=4), numerics=torch_moves.settings, failure=st.sampled_from(FAILURES))
def test_torch_flags_equal_before_and_after_a_golden_record(null_model, start, numerics, failure):
    """A golden record in process, ended by its own end, a failing corpus, a failing model or a
    KeyboardInterrupt: every flag, the thread count and CUBLAS_WORKSPACE_CONFIG are what they were before."""
    with kept(), tempfile.TemporaryDirectory() as tmp:
        moved(start)
        before, cublas = TorchState.read(), os.environ.get(CUBLAS_VARIABLE)
        outcome = _record(null_model, numerics, failure, Path(tmp))
        _check_outcome(outcome, failure, numerics)
        assert before.unrestored(TorchState.read()) == [], f"{failure}: {before.unrestored(TorchState.read())}"
        assert os.environ.get(CUBLAS_VARIABLE) == cublas and open_scopes() == 0


@pytest.mark.parametrize("failure", [None, "interrupt"])
def test_a_record_with_module_floors_of_a_torch_model_gives_the_state_back(small_model, tmp_path, failure):
    """The small reference model with its module floors (its modules hooked between calls, under the record's
    scope); the interrupt lands inside the floors' passes."""
    numerics = NumericSettings(threads=1, mkldnn=False, deterministic_algorithms=False)
    phases: list[str] = []

    def progress(n: int) -> None:
        pass

    def phase(text: str | None) -> None:
        if text is not None and text.startswith("module noise floors"):
            phases.append(text)
            assert TorchState.read().mkldnn is False, "the module floors run under the record's settings"
            if failure == "interrupt":
                raise KeyboardInterrupt

    progress.phase = phase  # type: ignore[attr-defined]
    with kept() as before:
        cfg = release_config(
            name="rel", model=ModelSection(spec="small"), numerics=numerics, localise=LocaliseSection(floor_blocks=1)
        )
        backend = InProcessBackend(small_model, numerics)
        rows = synth_corpus(small_model.geometry, 1, seed=0).rows()
        if failure is None:
            golden, _ = record_golden(tmp_path, "rel", rows, backend, cfg, progress=progress)
            assert golden.manifest.module_floors is not None and not golden.manifest.module_floors.skipped
        else:
            with pytest.raises(KeyboardInterrupt):
                record_golden(tmp_path, "rel", rows, backend, cfg, progress=progress)
        assert phases, "the module floors ran"
        assert before.unrestored(TorchState.read()) == [] and open_scopes() == 0


def test_a_run_a_verify_and_a_nightly_in_process_give_the_state_back(null_model, tmp_path):
    numerics = NumericSettings(threads=1, mkldnn=False, cudnn_benchmark=True, matmul_precision="high")
    cfg = release_config(
        name="rel",
        model=ModelSection(spec=NULL),
        numerics=numerics,
        candidates=(2,),
        packer=PackerSection(laws_examples=0),
        evidence=EvidenceSection(arrangements=1),
    )
    with kept():
        moved([("threads", 3), ("fp32", "", "tf32"), ("deterministic", True, True)])
        before = TorchState.read()
        watching = _Watching(null_model)
        backend = InProcessBackend(watching, numerics)  # type: ignore[arg-type]
        golden, _ = record_golden(
            tmp_path / "goldens", "rel", synth_corpus(null_model.geometry, 2).rows(), backend, cfg
        )
        steps = {"record": before.unrestored(TorchState.read())}
        run_shapes(backend, golden, tmp_path, (2,), cfg)
        steps["run"] = before.unrestored(TorchState.read())
        assert verify_golden(golden, backend, cfg).passed
        steps["verify"] = before.unrestored(TorchState.read())
        night = nightly(NightlyJob(cfg, golden.path, tmp_path / "night", progress=False), backend)
        assert night.exit_code in (EXIT_PASS, EXIT_FAIL), night.summary  # 2 blocks: too few to pass, judged
        steps["nightly"] = before.unrestored(TorchState.read())
        assert steps == dict.fromkeys(steps, []), steps
        assert {str(observed(s, numerics)) for s in watching.seen} == {str(in_force_of(numerics))}
