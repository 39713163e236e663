"""`harness audit` pipelined: the re-run's calls go to a device-queue worker while the host decodes,
splits and judges the requests around them; the capture is read a row group ahead and hashed in a thread.

What must not change: the calls (their order, what they carry) and every file the audit writes, bitwise. What
must hold on a failure: one error, nothing after the failing call runs, no thread left behind, nothing written.
Small model, 4 blocks served 2 a request, the capture cut in row groups of 2 requests (so reading ahead crosses
row groups).
"""

from __future__ import annotations

import datetime as real_dt
import threading
import types
from pathlib import Path

import numpy as np
import pytest

import harness.capture.schema as capture_schema
import harness.pipeline.audit as audit_mod
from harness.base.errors import BackendError
from harness.capture import CaptureReader
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas.config_file import ModelSection
from harness.pipeline.audit import audit_capture
from harness.pipeline.capture import serve_and_capture
from harness.release_config import release_config
from lanes.backends.backend import InProcessBackend

NUMERICS = NumericSettings(threads=1)
CFG = release_config(model=ModelSection(spec="small"), numerics=NUMERICS)
OURS = ("device-queue", "capture-reader", "sha256")  # the threads the audit starts


class Recording(InProcessBackend):
    """The in-process backend (it keeps ``pipelined()``): records each model call (its request, in order,
    and the thread it ran in); ``fail_at``: the call (0-based) whose model raises."""

    def __init__(self, model, fail_at: int | None = None) -> None:
        super().__init__(model, NUMERICS)
        self.calls: list[str] = []
        self.threads: set[str] = set()
        self.fail_at = fail_at

    def _execute(self, request, where):
        self.calls.append(where)
        self.threads.add(threading.current_thread().name)
        if self.fail_at is not None and len(self.calls) == self.fail_at + 1:
            raise BackendError(f"{where}: model raised ValueError: boom")
        return super()._execute(request, where)


@pytest.fixture(scope="module")
def capture(tmp_path_factory, small_model) -> Path:
    path = tmp_path_factory.mktemp("capture") / "good.parquet"
    backend = InProcessBackend(small_model, NUMERICS)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(capture_schema, "GROUP_REQUESTS", 2)
        serve_and_capture(path, synth_corpus(backend.geometry, 4).blocks, backend, 2)
    assert CaptureReader(path).file.metadata.num_row_groups == 3  # 6 requests: reading ahead crosses groups
    return path


class _Fixed(real_dt.datetime):
    @classmethod
    def now(cls, tz=None):
        return real_dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".")}


def _ours() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith(OURS)]


def test_pipelined_audit_sends_the_serial_calls_and_writes_the_serial_files_bitwise(
    capture, small_model, tmp_path, monkeypatch
):
    monkeypatch.setattr(audit_mod, "dt", types.SimpleNamespace(UTC=real_dt.UTC, datetime=_Fixed))  # one `created`
    runs = {}
    for pipeline in (False, True):
        backend = Recording(small_model)
        outcome = audit_capture(capture, tmp_path / str(pipeline), CFG, lambda b=backend: b, pipeline=pipeline)
        assert outcome.result.laws.passed  # (4 blocks are too few for the flip-rate bound: the verdict may fail)
        runs[pipeline] = backend, _files(tmp_path / str(pipeline))
    (serial, serial_files), (piped, piped_files) = runs[False], runs[True]
    assert len(serial.calls) == 12 and piped.calls == serial.calls  # 4 blocks x 3 OPs, one call each, same order
    assert serial.threads == {"MainThread"}
    assert len(piped.threads) == 1 and next(iter(piped.threads)).startswith("device-queue")  # really pipelined
    assert set(piped_files) == {"audit.json", "junit.xml", "report.html", "report.md"}
    different = [name for name in serial_files if piped_files.get(name) != serial_files[name]]
    assert not different, f"pipelined audit wrote other bytes than the serial one in {different}"
    assert not _ours(), f"threads left running: {_ours()}"


def test_reading_ahead_gives_the_requests_of_reading_in_place(capture):
    reader = CaptureReader(capture)
    here, ahead = list(reader.requests()), list(reader.requests(ahead=True))
    assert [r.request_id for r in ahead] == [r.request_id for r in here] == [f"r{i:06d}" for i in range(6)]
    assert all(
        np.array_equal(a.output, b.output) and np.array_equal(a.packed.span, b.packed.span)
        for a, b in zip(ahead, here, strict=True)
    )
    assert [r.request_id for r in reader.requests(range(1, 4), ahead=True)] == ["r000001", "r000002", "r000003"]
    assert not _ours()


@pytest.mark.parametrize("pipeline", [False, True])
def test_a_failing_call_stops_the_audit_at_that_call_leaving_no_thread_and_no_file(
    capture, small_model, tmp_path, pipeline
):
    backend = Recording(small_model, fail_at=3)
    out = tmp_path / "audit"
    with pytest.raises(BackendError, match=r"^exact lane k=1 OP \d block .*: model raised ValueError: boom$"):
        audit_capture(capture, out, CFG, lambda: backend, pipeline=pipeline)
    assert len(backend.calls) == 4  # nothing after the failing call ran on the device
    assert not _ours(), f"threads left running: {_ours()}"
    assert not out.exists() or not any(out.iterdir())
