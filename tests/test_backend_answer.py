"""A backend's ``environment()`` answer is parsed once: the keys the harness reads are typed, the backend's own
kept; one that is not the protocol's is refused in one line naming each wrong key, as a BackendError."""

from __future__ import annotations

import pytest

from harness.base.errors import BackendError
from harness.host.backend_answer import BackendAnswer


def test_an_answer_of_the_protocol_reads_by_attribute():
    answer = BackendAnswer.of({"device": "cuda:0", "model": {"name": "m"}, "url": "http://x"})
    assert answer.device == "cuda:0" and answer.model == {"name": "m"} and answer.environment is None
    assert BackendAnswer.of({}).device == "cpu"  # absent: the in-process default


@pytest.mark.parametrize(
    ("answer", "keys"),
    [({"device": 3}, ["device"]), ({"model": "m", "numerics_in_force": []}, ["model", "numerics_in_force"])],
)
def test_an_answer_not_of_the_protocol_is_refused_naming_its_keys(answer, keys):
    with pytest.raises(BackendError) as caught:
        BackendAnswer.of(answer)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("the backend's environment() answer is not")
    assert all(f"{key}: " in message for key in keys)
