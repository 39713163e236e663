"""Fixtures for the tests against a real Triton server (``pytest -m triton``, ``tox -e triton``).

One server with the reference ``small`` model serves the whole session (a start costs ~7 s on
2 cores); the fault tests start their own, short-lived servers only where the fault needs one
(a control model, a server to kill). Every server, once stopped, is checked to have left
nothing behind: no process in its group, no temporary folder, no shared-memory region.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from triton_support import BLOCKS, CONFIG, MODEL, NUMERICS, serving

from golden.store import Golden
from harness.corpus.synth import synth_corpus
from harness.data.corpus_schema import Corpus
from harness.pipeline.record import record_golden
from lanes.backends.backend import InProcessBackend
from lanes.backends.triton.server import ServerOptions, TritonServer
from lanes.backends.triton.triton_backend import (  # imports without tritonclient: the main suite collects this
    CallPolicy,
    TritonBackend,
)
from lanes.models.model_api import load_model


def need_triton_extra() -> None:
    """Skip (saying why) where the 'triton' extra is not installed: outside ``tox -e triton``."""
    pytest.importorskip(
        "tritonclient.http",
        reason="the Triton tests need the 'triton' extra (tritonclient[http]; "
        "pip install -e '.[triton]' or tox -e triton)",
    )
    pytest.importorskip(
        "pytriton",
        reason="the Triton tests need nvidia-pytriton's bundled tritonserver (the "
        "'triton' extra: pip install -e '.[triton]' or tox -e triton)",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Every test marked ``triton`` skips cleanly without the extra, before any of its fixtures (a module's own
    server included) is set up: the same for every module of this folder, whatever servers it starts."""
    if item.get_closest_marker("triton") is not None:
        need_triton_extra()


@pytest.fixture(scope="session")
def triton_server() -> Iterator[TritonServer]:
    need_triton_extra()
    with serving(ServerOptions(model_spec=MODEL, numerics=NUMERICS)) as server:
        yield server


@pytest.fixture(scope="session")
def triton_backend(triton_server: TritonServer) -> Iterator[TritonBackend]:
    backend = TritonBackend(triton_server.url, policy=CallPolicy(timeout_s=60.0))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def inprocess_backend() -> InProcessBackend:
    return InProcessBackend(load_model(MODEL), NUMERICS)


@pytest.fixture(scope="session")
def corpus(inprocess_backend: InProcessBackend) -> Corpus:
    return synth_corpus(inprocess_backend.geometry, blocks=BLOCKS)


@pytest.fixture(scope="session")
def golden(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus, inprocess_backend: InProcessBackend) -> Golden:
    """Recorded in-process: the Triton lanes must reproduce it."""
    root = tmp_path_factory.mktemp("goldens")
    recorded, _ = record_golden(root, "r-test", corpus.rows(), inprocess_backend, CONFIG)
    return recorded


@pytest.fixture
def runs_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "runs"
    yield root
    shutil.rmtree(root, ignore_errors=True)
