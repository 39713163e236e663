"""The Triton lane end to end: the same golden as in-process, and packed shapes that pass scoring."""

from __future__ import annotations

import numpy as np
import pytest
from triton_support import CONFIG, blocks_of, run_shapes

from golden.runs import load_run
from harness.data.ops import ALL_OPS
from harness.data.tolerances import Tolerances
from harness.pipeline.record import verify_golden
from harness.pipeline.score import score_run

pytestmark = pytest.mark.triton


def test_server_reports_the_in_process_model(triton_backend, inprocess_backend):
    assert triton_backend.fingerprint == inprocess_backend.fingerprint
    assert triton_backend.geometry == inprocess_backend.geometry
    env = triton_backend.environment()
    assert env["backend"] == "triton" and env["url"] == triton_backend.url
    assert env["server_version"] and env["model_name"] == "diar_nn_g"
    assert env["device"] == "cpu" and env["device_kind"] == "cpu" == triton_backend.device_kind
    assert env["model"]["fingerprint"] == inprocess_backend.fingerprint
    assert env["model"]["name"] == "diar_nn_g-small-seed0"
    assert env["numerics_requested"] == inprocess_backend.numerics.to_dict()
    assert env["numerics_in_force"]["threads"] == inprocess_backend.numerics.resolved_threads()


def test_exact_lane_through_triton_reproduces_the_in_process_golden_bitwise(triton_backend, golden):
    check = verify_golden(golden, triton_backend, CONFIG)
    assert check.status == "bitwise", check
    assert all(op.metrics["bitwise"] for op in check.ops.values())
    assert sorted(check.ops) == [str(int(op)) for op in ALL_OPS]


@pytest.mark.parametrize("concurrency", [1, 2])
def test_fast_lane_through_triton_passes_scoring_at_k_2_4_8(triton_server, golden, runs_root, concurrency):
    from lanes.backends.triton.triton_backend import TritonBackend

    backend = TritonBackend(triton_server.url, concurrency=concurrency)
    run = run_shapes(golden, backend, runs_root, (2, 4, 8))
    calls = [c for c in run.calls() if c["lane"] == "fast"]
    assert {c["shape"] for c in calls} == {2, 4, 8}
    assert max(c["windows"] for c in calls) == 8 * golden.geometry.windows_per_block
    manifest = load_run(run.path).manifest
    assert manifest.backend.backend == "triton" and manifest.backend.concurrency == concurrency
    report = score_run(golden, run, Tolerances())
    assert report.verification.status == "bitwise"  # the run's own exact lane, through Triton
    assert report.verdict == "pass", {k: s.reasons for k, s in report.shapes.items()}
    assert sorted(report.shapes) == ["2", "4", "8"]
    backend.close()


def test_a_nightly_through_triton_names_the_server_in_the_report_and_junit(triton_backend, golden, tmp_path):
    """The sign-off of a night run through Triton says so: backend, URL, transport, shared memory and requests in
    flight in its table, the same in JUnit's suite properties; at concurrency 2 no share of the wall is claimed.
    Its canaries are sent through the server like its lanes, and each is refused."""
    import json
    import xml.etree.ElementTree as ET

    from harness.data.schemas.config_file import PackerSection
    from harness.pipeline.nightly import nightly
    from harness.pipeline.nightly_job import NightlyJob

    cfg = CONFIG.with_overrides(candidates=(2,), packer=PackerSection(laws_examples=20))
    outcome = nightly(
        NightlyJob(cfg, golden.path, tmp_path / "out", localise=False, progress=False, no_promote=True), triton_backend
    )
    score = outcome.score
    assert score is not None and score.backend is not None
    # the night's canaries, planted through the server: each refused with its expected cause
    assert score.canaries is not None and score.canaries.planted and score.canaries.seen, score.canaries
    assert [c.name for c in score.canaries.canaries] == ["leak", "rebasing", "exchange", "shift"]
    assert all(c.shape.cause is not None and c.shape.cause.kind == c.expected for c in score.canaries.canaries)
    assert (score.backend.name, score.backend.url, score.backend.transport, score.backend.concurrency) == (
        "triton",
        triton_backend.url,
        "http",
        triton_backend.concurrency,
    )
    report = json.loads((tmp_path / "out" / "report" / "report.json").read_text())
    assert report["backend"]["backend"] == f"triton server {triton_backend.url}"
    assert report["backend"]["transport"] == "http" and report["backend"]["shared memory"] == "no"
    assert report["backend"]["requests in flight"] == str(triton_backend.concurrency)
    assert triton_backend.url in (tmp_path / "out" / "report" / "report.html").read_text()
    if triton_backend.concurrency > 1:
        assert "requests were in flight at once" in report["timing_line"] and "%" not in report["timing_line"]
    props = ET.parse(tmp_path / "out" / "junit.xml").getroot().find("testsuite/properties")
    assert props is not None
    named = {p.get("name"): p.get("value") for p in props.findall("property")}
    assert (named["backend"], named["backend_url"], named["backend_transport"]) == (
        "triton",
        triton_backend.url,
        "http",
    )
    assert named["backend_concurrency"] == str(triton_backend.concurrency)


def test_call_many_keeps_order_and_matches_call(triton_server, golden):
    from harness.packers.packing import pack
    from lanes.backends.triton.triton_backend import TritonBackend

    blocks = blocks_of(golden)
    packs = [pack(blocks[i : i + 2]) for i in range(0, 8, 2)]
    calls = [(p.op, p.tensors(), p.windows, p.rows, f"pack {i}") for i, p in enumerate(packs)]
    with TritonBackend(triton_server.url, concurrency=3) as backend:
        many = backend.call_many(calls)
        one_by_one = [backend.call(*c) for c in calls]
    assert len(many) == len(calls)
    for a, b in zip(many, one_by_one, strict=True):
        assert np.array_equal(a.output, b.output)
        assert a.peak_device_bytes is None and a.wall_s > 0
