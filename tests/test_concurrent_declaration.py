"""A model's ``concurrent_calls`` (lanes/models/model_api.py, lanes/running/calls_in_flight.py): trusted by the lanes,
refused
when it is not a bool, and judged by ``harness model check`` against the two-threads probe (a declaration of two
calls that answer differently fails; a lock behind it is a note; False is not asked)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from harness.base.errors import ModelError
from lanes.running.calls_in_flight import decide
from tests.contract_models import Locked, Wrapped
from tests.test_two_in_flight import LockedButDeclared


class Racy(Wrapped):
    """Declares two calls may be inside, but answers by how many are: a shared state the probe must catch."""

    concurrent_calls = True

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0
        self.lock = threading.Lock()

    def infer(self, request):
        with self.lock:
            self.inside += 1
        try:
            request["OP"]  # the first read: where the probe's two calls meet
            with self.lock:
                others = self.inside - 1
            out = super().infer(request)
            return {k: (v + np.float32(1e-3 * others)).astype(np.float32) for k, v in out.items()}
        finally:
            with self.lock:
                self.inside -= 1


def racy() -> Racy:
    return Racy()


def locked_declared() -> LockedButDeclared:
    return LockedButDeclared()


def declared_serial() -> Locked:
    model = Locked()
    model.concurrent_calls = False  # type: ignore[attr-defined]
    return model


def test_a_declaration_is_trusted_and_one_that_is_not_a_bool_is_refused():
    class Declares(Wrapped):
        def __init__(self, value):
            super().__init__()
            self.concurrent_calls = value

    never = []
    assert decide(Declares(False), Wrapped().geometry, never.append, "m").calls == 1
    assert decide(Declares(True), Wrapped().geometry, never.append, "m").calls == 2
    assert never == [], "a declared model is not called"
    with pytest.raises(ModelError, match=r"concurrent_calls must be True .* got 'yes'"):
        decide(Declares("yes"), Wrapped().geometry, never.append, "m")
    from lanes.models.model_api import check_model

    with pytest.raises(ModelError, match="concurrent_calls must be"):
        check_model(Declares(1), "spec")


# ------------------------------------------------------------------------------------------ harness model check


def test_the_model_check_fails_a_declaration_of_two_calls_that_answer_differently(capsys, monkeypatch):
    from tests.test_model_check import check

    code, found, lines, _ = check(capsys, monkeypatch, "tests.test_concurrent_declaration:racy")
    status, text = found["two threads at once"]
    assert code == 1 and status == "FAIL", lines
    assert "declares concurrent_calls = True, but two calls were inside at once" in text, text
    assert "declare concurrent_calls = False" in text


@pytest.mark.parametrize(
    "spec, status, says",
    [
        ("tests.test_concurrent_declaration:locked_declared", "note", "the two calls wait for each other"),
        (
            "tests.test_concurrent_declaration:declared_serial",
            "ok",
            "declares concurrent_calls = False: the lanes send it one",
        ),
    ],
)
def test_the_model_check_notes_a_lock_behind_a_declaration_and_trusts_one_call_at_a_time(
    capsys, monkeypatch, spec, status, says
):
    """Negative controls of the failure above: a lock is harmless (the calls wait), and False is not probed."""
    from tests.test_model_check import check

    code, found, lines, _ = check(capsys, monkeypatch, spec)
    assert code == 0, lines
    assert found["two threads at once"][0] == status and says in found["two threads at once"][1], found
