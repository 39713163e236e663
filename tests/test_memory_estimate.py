"""The memory estimate that refuses a packed shape too large for the device.

The catalogue shows the refusal end to end (k = 100000 padded, on the CPU); these show the parts:
the measurement sees what a call allocates (and not what it does not), and the refusal follows
the estimate both ways.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.base.errors import LaneError
from lanes.running import memory

MIB = 2**20


def test_the_cpu_measurement_sees_what_a_call_touches():
    def allocate() -> list:
        a = np.ones(64 * MIB // 4, dtype=np.float32)  # 64 MiB, every page touched
        return [int(a[-1])]

    seen = memory.measure_peak(allocate, "cpu")
    idle = memory.measure_peak(lambda: [], "cpu")
    assert seen is not None and idle is not None
    assert 56 * MIB <= seen <= 80 * MIB, seen / MIB
    assert idle < 8 * MIB, idle / MIB


def test_largest_request_blocks():
    assert memory.largest_request_blocks([2, 8], pad_to_fixed=False, group_blocks=4) == 4  # a group holds 4
    assert memory.largest_request_blocks([2, 8], pad_to_fixed=True, group_blocks=4) == 8  # padded to 8
    assert memory.largest_request_blocks([], pad_to_fixed=True, group_blocks=4) == 0


@pytest.fixture
def available(monkeypatch):
    def set_to(n: int) -> None:
        monkeypatch.setattr(memory, "available_bytes", lambda device: n)

    return set_to


def test_a_plan_that_fits_is_not_refused_nor_measured_twice(available):
    available(1000 * MIB)
    again = []
    memory.check_fits([2, 4], False, 4, "cpu", 10 * MIB, lambda: again.append(1) or [])
    assert again == []  # 40 MiB of 1000: the first call's figure suffices


def test_a_first_calls_one_off_costs_are_not_multiplied(available, monkeypatch):
    """A first call that looks too big (one-off costs x k) is measured again before a refusal."""
    available(100 * MIB)
    monkeypatch.setattr(memory, "measure_peak", lambda fn, device: 5 * MIB)
    memory.check_fits([16], True, 4, "cpu", 20 * MIB, lambda: [])  # 320 MiB at first sight, 80 MiB steady


def test_a_plan_that_cannot_fit_is_refused_with_the_estimate(available, monkeypatch):
    available(100 * MIB)
    monkeypatch.setattr(memory, "measure_peak", lambda fn, device: 10 * MIB)
    with pytest.raises(LaneError) as err:
        memory.check_fits([2, 64], True, 4, "cuda:0", 12 * MIB, lambda: [])
    text = str(err.value)
    assert "shape k=64 cannot fit the cuda:0 memory" in text and "640.0 MiB" in text and "10.0 MiB per block" in text
    assert "100.0 MiB is available" in text and "at most about 10 blocks per call fit" in text


def test_nothing_is_refused_when_memory_cannot_be_measured(available):
    available(1)
    memory.check_fits([1000], True, 4, "cpu", None, lambda: [])
    assert memory.in_process_device(object()) is None  # a server's memory is not this process's
