"""The load sweep against real Triton servers: the figures, the server's statistics, and the racing control.

The reference ``small`` model on the session server must stay accurate at every concurrency, with every
response checked and the server's statistics counting exactly the requests sent; the racing control
(``lanes.controls.load_control``: two instances, an answer perturbed when another request is in flight) must pass at
concurrency 1 and be refused at 2. One server of this module's own (the control's), started once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from triton_support import CONFIG, NUMERICS, serving

from golden.store import Golden
from harness.corpus.synth import synth_corpus
from harness.data.schemas.config_file import ConfigFile, LoadSection, ModelSection, PackerSection
from harness.evidence.load_evidence import load_refusals
from harness.pipeline.load_sweep import sweep
from harness.pipeline.nightly import nightly
from harness.pipeline.nightly_job import NightlyJob
from harness.pipeline.record import record_golden
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend
from lanes.backends.triton.server import ServerOptions, TritonServer
from lanes.backends.triton.triton_backend import CallPolicy, TritonBackend
from lanes.models.model_api import load_model

pytestmark = pytest.mark.triton
RACING = "lanes.controls.load_control:racing"


def _with_load(
    config: ConfigFile, shapes: tuple[int, ...], concurrency: list[int], blocks: int, budget: float | None = None
) -> ConfigFile:
    load = LoadSection(concurrency=concurrency, blocks=blocks, p99_budget_ms=budget)
    return config.with_overrides(candidates=shapes, load=load)


def test_nightly_sweep_checks_every_response_and_reads_the_server_statistics(
    triton_backend, golden: Golden, tmp_path: Path
):
    cfg = _with_load(CONFIG, (2,), [1, 2], blocks=4, budget=1e6)  # the lanes on the golden's 12 blocks, k=2
    job = NightlyJob(
        cfg.with_overrides(packer=PackerSection(laws_examples=20)),
        golden.path,
        tmp_path / "out",
        localise=False,
        progress=False,
        no_promote=True,
    )
    outcome = nightly(job, triton_backend)
    score = outcome.score
    assert score is not None and score.load is not None
    assert score.verdict == "pass", {k: s.reasons for k, s in score.shapes.items()}
    load = score.load
    assert sorted(load.shapes) == ["2"] and load.blocks == 4 and load.concurrency == [1, 2]
    for key, entry in load.shapes.items():
        assert [p.concurrency for p in entry.points] == [1, 2]
        for p in entry.points:
            where = f"k={key} c={p.concurrency}"
            assert p.accurate and p.reasons == [], where
            assert p.requests > 0 and p.checked == p.requests, where  # every response checked
            assert p.blocks == 4 and set(p.ops_passed) == {"0", "1", "2"}, where
            figures = (p.p50_ms, p.p99_ms, p.blocks_per_s, p.wall_s, p.queue_ms, p.compute_ms)
            assert all(f is not None and math.isfinite(f) and f >= 0 for f in figures), (where, figures)
            assert 0 < p.p50_ms <= p.p99_ms and p.blocks_per_s > 0, where
            assert p.stats is not None and p.stats.requests == p.requests, where  # the server counted ours only
            assert min(p.stats.model_dump().values()) >= 0 and p.stats.compute_infer_ns > 0, where
    # the budget's pick, re-derived: the fastest accurate point within it (every point is, at 1e6 ms)
    best = max(((e.shape, p) for e in load.shapes.values() for p in e.points), key=lambda sp: sp[1].blocks_per_s)
    assert load.budget is not None and (load.budget.shape, load.budget.concurrency) == (best[0], best[1].concurrency)
    assert len(load.meets_budget) == 2
    written = json.loads((tmp_path / "out" / "score.json").read_text())
    assert written["load"]["budget"]["shape"] == best[0]
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert len(report["load"]["points"]) == 2
    assert 'id="load-frontier"' in (tmp_path / "out" / "report" / "report.html").read_text()


@pytest.fixture(scope="module")
def racing_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """The racing control served by two instances (two stub processes), meeting in one folder."""
    meeting = tmp_path_factory.mktemp("rendezvous")
    spec = f"{RACING}?rendezvous='{meeting}'"
    with serving(ServerOptions(model_spec=spec, numerics=NUMERICS, instances=2)) as server:
        yield server


@pytest.fixture(scope="module")
def racing_golden(tmp_path_factory: pytest.TempPathFactory) -> Golden:
    """Recorded in-process, where no request ever meets another: the control's answers alone."""
    model = load_model(RACING)
    cfg = release_config(name="r-race", model=ModelSection(spec=RACING), numerics=NUMERICS)
    corpus = synth_corpus(model.geometry, blocks=4)
    recorded, _ = record_golden(
        tmp_path_factory.mktemp("goldens"), "r-race", corpus.rows(), InProcessBackend(model, NUMERICS), cfg
    )
    return recorded


def test_racing_control_passes_at_concurrency_1_and_is_refused_at_2(racing_server, racing_golden: Golden):
    cfg = _with_load(
        release_config(name="r-race", model=ModelSection(spec=RACING), numerics=NUMERICS), (2,), [1, 2], blocks=4
    )
    with TritonBackend(racing_server.url, concurrency=1, policy=CallPolicy(timeout_s=60.0)) as backend:
        measured = sweep(cfg, racing_golden, backend)
    alone, loaded = measured.shapes["2"].points
    assert alone.concurrency == 1 and alone.accurate, alone.reasons  # the old evidence (one at a time) passes it
    assert loaded.concurrency == 2 and not loaded.accurate
    assert loaded.checked == loaded.requests and loaded.ops_passed["0"] is False
    assert (
        loaded.reasons[0].startswith("k=2 at concurrency 2: OP 0 max_abs: 0.01")
        and "> 0.0001 allowed" in loaded.reasons[0]
    ), loaded.reasons
    from harness.data.schemas.load import LoadEvidence

    evidence = LoadEvidence(
        url=measured.url,
        model_name=measured.model_name,
        blocks=4,
        concurrency=[1, 2],
        shapes=measured.shapes,
        p99_budget_ms=None,
        meets_budget=[],
        budget=None,
    )
    (line,) = load_refusals(evidence, 2)
    assert line.startswith("k=2 is not accurate under load (concurrency 2 of the sweep [1, 2])")
