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
from harness.corpus.schema import Corpus
from harness.corpus.synth import synth_corpus
from harness.pipeline.record import record_golden
from lanes.backend import InProcessBackend
from lanes.model_api import load_model
from lanes.triton.backend import TritonBackend  # imports without tritonclient: the main suite collects this
from lanes.triton.server import ServerOptions, TritonServer


@pytest.fixture(scope="session")
def triton_server() -> Iterator[TritonServer]:
    pytest.importorskip("tritonclient.http", reason="the Triton tests need the 'triton' extra")
    pytest.importorskip("pytriton", reason="the Triton tests need nvidia-pytriton's bundled tritonserver")
    with serving(ServerOptions(model_spec=MODEL, numerics=NUMERICS)) as server:
        yield server


@pytest.fixture(scope="session")
def triton_backend(triton_server: TritonServer) -> Iterator[TritonBackend]:
    backend = TritonBackend(triton_server.url, timeout_s=60.0)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def inprocess_backend() -> InProcessBackend:
    return InProcessBackend(load_model(MODEL), NUMERICS)


@pytest.fixture(scope="session")
def corpus(inprocess_backend: InProcessBackend) -> Corpus:
    return synth_corpus(inprocess_backend.geometry, blocks=BLOCKS)


@pytest.fixture(scope="session")
def golden(tmp_path_factory: pytest.TempPathFactory, corpus: Corpus,
           inprocess_backend: InProcessBackend) -> Golden:
    """Recorded in-process: the Triton lanes must reproduce it."""
    root = tmp_path_factory.mktemp("goldens")
    recorded, _ = record_golden(root, "r-test", corpus.rows(), inprocess_backend, CONFIG)
    return recorded


@pytest.fixture
def runs_root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "runs"
    yield root
    shutil.rmtree(root, ignore_errors=True)
