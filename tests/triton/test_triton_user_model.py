"""A team's own server and model repository: a ``diar_nn_g`` without MODEL_INFO, served as it is.

``user_repository/`` stands for a team's repository: the contract's inputs and outputs, no
``MODEL_INFO``, no parameters (its model wraps the small reference model, so answers can be
checked bitwise). The harness must serve it unchanged, refuse to run it without a label, take
the fingerprint from the server's config, version(s) and the label, check the configured
geometry against one answer, say in every result that the weights are not verified, and record,
run and score through it end to end.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from triton_support import CONFIG, packed_calls, run_shapes, serving

from golden.runs import load_run
from golden.store import load_golden
from harness.base.errors import BackendError, GoldenError
from harness.data.ops import Op
from harness.data.tolerances import Tolerances
from harness.pipeline.record import record_golden
from harness.pipeline.score import score_run
from lanes.backends.triton.model_identity import WEIGHTS_NOTE, unverified_fingerprint
from lanes.backends.triton.server import ServerOptions, TritonServer
from lanes.backends.triton.triton_backend import TritonBackend
from lanes.models.diar_nn_g.config import CONFIGS

pytestmark = pytest.mark.triton

USER_REPOSITORY = Path(__file__).parent / "user_repository"
SMALL = CONFIGS["small"].geometry()
LABEL = "team-diar-2026.10"


@pytest.fixture(scope="module")
def user_server() -> Iterator[TritonServer]:
    with serving(ServerOptions(repository=USER_REPOSITORY, verbatim=True)) as server:
        yield server


@pytest.fixture(scope="module")
def user_backend(user_server: TritonServer) -> Iterator[TritonBackend]:
    with TritonBackend(user_server.url, model_label=LABEL, geometry=SMALL) as backend:
        yield backend


def one_line(err: pytest.ExceptionInfo, *parts: str) -> None:
    message = str(err.value)
    assert "\n" not in message, message
    for part in parts:
        assert part in message, f"{part!r} not in {message!r}"


def test_the_repository_is_served_verbatim(user_server, user_backend):
    served = user_server._repo
    files = sorted(
        p.relative_to(USER_REPOSITORY)
        for p in USER_REPOSITORY.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert [str(f) for f in files] == ["diar_nn_g/1/model.py", "diar_nn_g/config.pbtxt"]
    assert all(filecmp.cmp(USER_REPOSITORY / f, served / f, shallow=False) for f in files)
    config = user_backend._client_now().get_model_config("diar_nn_g")
    assert not config.get("parameters") and [o["name"] for o in config["output"]] == ["SEGMENTATION", "EMBEDDINGS"]


def test_without_a_label_it_is_one_clear_error(user_server):
    with pytest.raises(BackendError) as err:
        TritonBackend(user_server.url, geometry=SMALL)
    one_line(
        err, user_server.url, "no MODEL_INFO output", "cannot be verified remotely", "--set backend.model_label=NAME"
    )


def test_without_a_geometry_it_is_one_clear_error(user_server):
    with pytest.raises(BackendError) as err:
        TritonBackend(user_server.url, model_label=LABEL)
    one_line(err, "no MODEL_INFO output", "its geometry must come from the configuration")


def test_a_geometry_that_does_not_match_the_answers_is_refused(user_server):
    """The configured spec is 'full' while the server runs a small model: caught by one answer."""
    with pytest.raises(BackendError) as err:
        TritonBackend(user_server.url, model_label=LABEL, geometry=CONFIGS["full"].geometry())
    small, full = SMALL, CONFIGS["full"].geometry()
    one_line(
        err,
        "geometry probe",
        f"[1, {small.frames_per_window}, {small.classes}]",
        f"[1, {full.frames_per_window}, {full.classes}]",
        "configure the model spec",
    )


def test_fingerprint_comes_from_config_versions_and_label(user_backend, inprocess_backend):
    client = user_backend._client_now()
    config = client.get_model_config("diar_nn_g")
    assert user_backend.fingerprint == unverified_fingerprint("diar_nn_g", config, ["1"], LABEL)
    assert user_backend.fingerprint != inprocess_backend.fingerprint
    assert not user_backend.weights_verified and user_backend.geometry == SMALL
    with TritonBackend(user_backend.url, model_label=LABEL + "-b", geometry=lambda: SMALL) as other:
        assert other.fingerprint != user_backend.fingerprint  # the label is part of it
    changed = {**config, "parameters": {"X": {"string_value": "1"}}}
    assert unverified_fingerprint("diar_nn_g", changed, ["1"], LABEL) != user_backend.fingerprint
    assert unverified_fingerprint("diar_nn_g", config, ["2"], LABEL) != user_backend.fingerprint
    env = user_backend.environment()
    assert env["weights_verified"] is False and env["warning"] == WEIGHTS_NOTE
    assert env["model"]["weights_verified"] is False and env["model"]["label"] == LABEL
    assert env["model"]["name"] == LABEL and "cannot be verified remotely" in env["model"]["note"]
    assert env["device_kind"] == "unknown" and env["environment"]["device_name"] == "unknown"


def test_the_same_repository_served_again_has_the_same_fingerprint(user_backend, tmp_path):
    copy = tmp_path / "elsewhere"
    shutil.copytree(USER_REPOSITORY, copy)
    with (
        serving(ServerOptions(repository=copy, verbatim=True)) as again,
        TritonBackend(again.url, model_label=LABEL, geometry=SMALL) as backend,
    ):
        assert backend.fingerprint == user_backend.fingerprint


def test_record_run_and_score_through_a_model_without_model_info(user_backend, golden, tmp_path):
    """Same pipeline as the CLI: golden record, run shapes, score; answers equal the in-process golden."""
    recorded, _ = record_golden(tmp_path / "goldens", "team", golden.corpus().rows(), user_backend, CONFIG)
    assert recorded.fingerprint == user_backend.fingerprint
    model = recorded.manifest.model.model_dump(mode="json")  # ModelInfo keeps the model's own keys
    assert model["weights_verified"] is False and model["label"] == LABEL
    assert recorded.manifest.backend.weights_verified is False
    assert recorded.manifest.reproducibility.bitwise
    # it really is the served model: the in-process golden's outputs, bit for bit
    ids = golden.block_ids()
    ours, theirs = recorded.outputs().select(ids), golden.outputs().select(ids)
    assert np.array_equal(ours.segmentation.logprobs, theirs.segmentation.logprobs)
    for op, vp in theirs.voiceprint.items():
        assert np.array_equal(ours.voiceprint[op].embedding, vp.embedding), op
    load_golden(recorded.path, expect_fingerprint=user_backend.fingerprint)
    with TritonBackend(user_backend.url, model_label="another-label", geometry=SMALL) as other:
        with pytest.raises(GoldenError, match="golden of another model"):
            load_golden(recorded.path, expect_fingerprint=other.fingerprint)

    run = run_shapes(recorded, user_backend, tmp_path / "runs", (2, 4))
    assert load_run(run.path).manifest.model.model_dump(mode="json")["weights_verified"] is False
    report = score_run(recorded, run, Tolerances())
    assert report.verdict == "pass", {k: s.reasons for k, s in report.shapes.items()}
    assert sorted(report.shapes) == ["2", "4"]


def test_calls_equal_in_process_over_http_and_shm(user_server, inprocess_backend, golden):
    calls = packed_calls(golden, ks=(1, 4), ops=(Op.SEGMENTATION, Op.VOICEPRINT))
    local = inprocess_backend.call_many(calls)
    with TritonBackend(user_server.url, model_label=LABEL, geometry=SMALL, shm=True) as backend:
        remote = backend.call_many(calls)
    assert all(np.array_equal(a.output, b.output) for a, b in zip(local, remote, strict=True))


def test_cli_serves_the_repository_and_records_through_it_with_a_warning(tmp_path):
    """`harness serve --model-repository` then `harness golden record --backend URL --set backend.model_label=...`."""
    harness = [sys.executable, "-c", "from harness.cli import main; main()"]
    serve = subprocess.Popen(
        [*harness, "serve", "--model-repository", str(USER_REPOSITORY)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = serve.stdout.readline()
        assert f"model repository {USER_REPOSITORY} served at http://" in line, line + serve.stderr.read()
        url = line.split(" served at ")[1].split()[0]
        common = ["--model", "small", "--set", "numerics.threads=1", "--backend", url, "--no-progress"]
        refused = subprocess.run(
            [*harness, "golden", "record", "--goldens", str(tmp_path / "g"), *common],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert refused.returncode == 2
        assert (
            refused.stderr.strip().startswith("harness: error: ") and "--set backend.model_label=NAME" in refused.stderr
        )
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        done = subprocess.run(
            [
                *harness,
                "golden",
                "record",
                "--goldens",
                str(tmp_path / "g"),
                *common,
                "--set",
                f"backend.model_label='{LABEL}'",
                "--set",
                "backend.shm=true",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        warnings = [ln for ln in done.stderr.splitlines() if ln.startswith("harness: warning:")]
        assert len(warnings) == 1 and "cannot be verified remotely" in warnings[0] and LABEL in warnings[0]
        assert "recorded golden" in done.stdout
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=60)
    assert serve.returncode == 0, serve.stderr.read()
