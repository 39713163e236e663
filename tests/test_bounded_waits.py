"""Nothing waits for ever: the module floors' passes and a lock held by another process have a bound and a line.

The example: a model whose ``infer`` takes a ``threading.Lock`` (a common way to make a model thread-safe)
deadlocked ``golden record``: the module floors run three passes in threads that meet at every module, one
pass held the lock and waited at its first module for passes that could not enter (a barrier of 3,600 s).
Now the passes must all reach a module within seconds of the first one there (or a multiple of the longest
module so far), past which the floors are measured one pass after another (the same figures), said in one
progress line and in the golden's manifest (``module_floors.serial``). The controls: the plain small model
runs side by side (no ``serial``); the unit tests pin the bound with small numbers (no timing is asserted,
only which way the floors were taken and that nothing hangs).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.base.errors import HarnessError
from harness.base.fsio import lock_path, locked
from harness.localisation import lockstep
from harness.localisation.first_divergence import INPUT
from tests.catalogue_setups import CFG
from tests.workspace_cli import harness, make_workspace, one_error_line


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("waits"))


def floors(golden: Path) -> dict:
    return json.loads((golden / "manifest.json").read_text())["module_floors"]


def test_golden_record_of_a_model_guarded_by_a_lock_falls_back_and_records_the_same_floors(ws):
    done = harness(ws, "golden", "record", "--corpus", "c.parquet", "--release", "locked", *CFG,
                   "--model", "tests.locked_models:locked", timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "measuring one pass after another (the same figures)" in done.stderr  # the one progress line
    assert "module noise floors measured one pass after another" in done.stdout
    locked_floors, plain = floors(ws / "goldens" / "locked"), floors(ws / "goldens" / "r")
    assert "did not reach" in locked_floors["serial"] and "one call in at a time" in locked_floors["serial"]
    assert locked_floors["ops"] == plain["ops"]  # the same figures: the small model's, measured the other way


def test_negative_control_a_model_three_threads_can_enter_is_measured_side_by_side(ws):
    assert "serial" not in floors(ws / "goldens" / "r")


# ------------------------------------------------------------------ the rendezvous itself, bound made small


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def _calls(net: torch.nn.Module, guard: object | None = None, runner: object | None = None):
    x = torch.ones(3, 4)

    def call():
        def forward():
            with torch.no_grad():
                return {"out": net(x).numpy()}

        if runner is not None:
            return runner.submit(forward).result()  # type: ignore[attr-defined]
        if guard is None:
            return forward()
        with guard:  # type: ignore[attr-defined]
            return forward()

    return [call] * 3


@pytest.fixture
def small_bounds(monkeypatch):
    monkeypatch.setattr(lockstep, "MIN_WAIT_S", 0.5)
    monkeypatch.setattr(lockstep, "JOIN_S", 2.0)


@pytest.mark.parametrize("guard", [threading.Lock, threading.RLock], ids=["Lock", "RLock"])
def test_a_model_that_lets_one_call_in_at_a_time_is_not_reentrant_and_every_pass_ends(small_bounds, guard):
    net, seen = _net(), []
    with pytest.raises(lockstep.NotReentrant, match="2 of 3 passes did not reach"):
        lockstep.run(_calls(net, guard()), {"net": net}, lambda name, outs: seen.append(name))
    assert not [t for t in threading.enumerate() if t.name.startswith("harness-lockstep")]  # all joined


def test_a_model_that_serialises_its_calls_on_one_thread_is_out_of_step(small_bounds):
    from concurrent.futures import ThreadPoolExecutor

    net = _net()
    with ThreadPoolExecutor(1) as runner, pytest.raises(lockstep.OutOfStep):
        lockstep.run(_calls(net, runner=runner), {"net": net}, lambda name, outs: None)


def test_negative_control_three_passes_that_can_enter_at_once_meet_at_every_module(small_bounds):
    net, seen = _net(), []
    answers = lockstep.run(_calls(net), {"net": net}, lambda name, outs: seen.append(name))
    assert len(answers) == 3 and all(np.array_equal(a, answers[0]) for a in answers)
    assert seen == [f"net {INPUT}", "net.0", "net.1", "net.2"]  # every module, in order, each once


def test_a_pass_that_never_returns_ends_the_measure_within_the_join_bound(small_bounds):
    net, release = _net(), threading.Event()
    calls = _calls(net)
    calls[1] = lambda: (release.wait(60), {"out": np.zeros(2)})[1]  # never reaches the network while we wait
    try:
        with pytest.raises(lockstep.PassStuck, match="1 of 3 passes did not return"):
            lockstep.run(calls, {"net": net}, lambda name, outs: None)
    finally:
        release.set()


# ------------------------------------------------------------------ a lock another process holds


def _hold(path: Path) -> int:
    fd = os.open(lock_path(path), os.O_CREAT | os.O_RDWR, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_a_lock_held_by_another_is_waited_for_with_a_bound_and_a_line(tmp_path, ws):
    ledger = tmp_path / "ledger.json"
    fd = _hold(ledger)
    try:
        line = one_error_line(harness(ws, "shapes", "--ledger", str(ledger), HARNESS_LOCK_WAIT_S="0.5"))
        assert f"{lock_path(ledger)}: waited 0.5 s for the lock another process holds" in line, line
    finally:
        os.close(fd)


def test_negative_control_a_free_lock_is_taken_and_the_command_goes_on(tmp_path, ws):
    ledger = tmp_path / "ledger.json"
    os.close(_hold(ledger))  # held, then released
    line = one_error_line(harness(ws, "shapes", "--ledger", str(ledger), HARNESS_LOCK_WAIT_S="0.5"))
    assert "waited" not in line and "no such ledger" in line, line


def test_an_unusable_lock_wait_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_LOCK_WAIT_S", "forever")
    with pytest.raises(HarnessError, match="HARNESS_LOCK_WAIT_S='forever'"), locked(tmp_path / "x"):
        pass
