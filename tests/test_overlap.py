"""Reading ahead and writing behind (harness.base.overlap): order kept, failures raised in order, bounded."""

from __future__ import annotations

import threading
import time

import pytest

from harness.base.overlap import WriteBehind, prefetch


def numbers(n, fail_at=None, produced=None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"item {i} is bad")
        if produced is not None:
            produced.append(i)
        yield i


def test_prefetch_keeps_order_and_runs_in_another_thread():
    where = []

    def items():
        for i in range(5):
            where.append(threading.current_thread().name)
            yield i

    assert list(prefetch(items(), name="reader")) == [0, 1, 2, 3, 4]
    assert set(where) == {"reader"}


def test_prefetch_raises_a_failure_after_every_item_before_it():
    got = []
    with pytest.raises(ValueError, match="item 3 is bad"):
        for x in prefetch(numbers(10, fail_at=3)):
            got.append(x)
    assert got == [0, 1, 2]


def test_prefetch_reads_at_most_depth_ahead_and_stops_when_the_caller_does():
    produced = []
    it = prefetch(numbers(1000, produced=produced), depth=2)
    assert next(it) == 0
    time.sleep(0.3)
    assert len(produced) <= 1 + 2 + 1  # the item handed over, the queue, the one being put
    it.close()
    time.sleep(0.3)
    assert len(produced) <= 5


def test_write_behind_writes_in_order_in_its_thread():
    written, where = [], []

    def write(x):
        where.append(threading.current_thread().name)
        written.append(x)

    w = WriteBehind(write, name="writer")
    for i in range(20):
        w.submit(i)
    w.close()
    assert written == list(range(20)) and set(where) == {"writer"}


def test_write_behind_raises_a_failure_at_the_next_call_and_drops_the_rest():
    written = []

    def write(x):
        if x == 2:
            raise OSError("disk full")
        written.append(x)

    w = WriteBehind(write)
    with pytest.raises(OSError, match="disk full"):
        for i in range(50):
            w.submit(i)
            time.sleep(0.01)
        w.close()
    w.abort()
    assert written == [0, 1]


def test_write_behind_abort_stops_quietly():
    w = WriteBehind(lambda x: time.sleep(0.01))
    for i in range(3):
        w.submit(i)
    w.abort()
