"""A second Ctrl-C never leaves a worker thread writing into a file its clean-up closes (harness.base.workers).

CI crashed (a segmentation fault) on ``corpus synth`` given SIGTERM at every row group: the second signal,
raised by the command line's handler inside the writer's join, made CPython 3.11 mark the still running
writer thread stopped, the abort's second join returned at once, and the Parquet file was closed under the
writer. Each test below plays that sequence exactly (the signal sent to the main thread while it waits, the
writer held in its write until the main thread has had every chance to go on), and each has its negative
control: the plain ``Thread.join`` that was there, which the same sequence gets past while the thread works.
No timing decides a verdict: the pauses only give a wrong implementation the time to show itself.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.base.errors import Interrupted, clean_up, clear_interrupt, interrupt_requested
from harness.base.overlap import WriteBehind, prefetch
from harness.base.workers import SettlingPool, Worker, outlast
from harness.cli import _on_signal
from harness.data.corpus_schema import CorpusWriter
from harness.data.parquet import ParquetSink
from lanes.running.device_queue import DeviceQueue

MAIN = threading.main_thread()
GIVE_A_WRONG_JOIN_TIME = 0.5  # s the held thread waits once the main thread was interrupted


@pytest.fixture
def command_line_handler():
    """The command line's SIGTERM handler (the first signal recorded, a second raised where it lands)."""
    before = signal.getsignal(signal.SIGTERM)
    clear_interrupt()
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
        clear_interrupt()


def _signal_main() -> None:
    signal.pthread_kill(MAIN.ident, signal.SIGTERM)  # type: ignore[arg-type]


def _waiting(thread: threading.Thread) -> bool:
    """Is ``thread`` in a wait of :mod:`threading` (a join, an event, a condition: a queue's, a future's)?
    Read from its innermost frame."""
    frame = sys._current_frames().get(thread.ident)  # type: ignore[arg-type]
    return (
        frame is not None
        and frame.f_code.co_filename == threading.__file__
        and frame.f_code.co_name in ("wait", "_wait_for_tstate_lock")
    )


def _interrupt_main_while_it_waits() -> None:
    """From a worker: a signal to the main thread once it is blocked waiting (for this worker)."""
    deadline = time.monotonic() + 60
    while not _waiting(MAIN):
        assert time.monotonic() < deadline, "the main thread never waited"
        time.sleep(0.005)
    _signal_main()


class HeldWork:
    """Work that signals the main thread twice (the first is recorded, the second raised where the main
    thread waits), then holds on for a while; it notes when it ended."""

    def __init__(self) -> None:
        self.ended_at: float | None = None

    def __call__(self, *_: object) -> None:
        _signal_main()
        deadline = time.monotonic() + 60
        while interrupt_requested() is None:  # the first signal seen by the handler
            assert time.monotonic() < deadline
            time.sleep(0.005)
        _interrupt_main_while_it_waits()
        time.sleep(GIVE_A_WRONG_JOIN_TIME)
        self.ended_at = time.monotonic()


def test_a_plain_join_is_got_past_while_its_thread_works(command_line_handler):
    """The negative control of every test here: ``Thread.join``, interrupted, leaves with the thread
    working (and CPython 3.11 then says it is not alive: the second join returned at once)."""
    work = HeldWork()
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    with pytest.raises(Interrupted):
        thread.join()
    assert work.ended_at is None  # the thread still works: a clean-up now closes what it writes
    while work.ended_at is None:
        time.sleep(0.01)


def test_a_worker_is_joined_through_the_interruption_and_it_is_raised_after(command_line_handler):
    work = HeldWork()
    worker = Worker(work, "held")
    with pytest.raises(Interrupted):
        worker.join()
    assert work.ended_at is not None and not worker.alive  # raised only once the work had ended


def test_a_held_join_drops_the_interruption_the_handler_recorded(command_line_handler):
    work = HeldWork()
    worker = Worker(work, "held")
    worker.join(hold=True)
    assert work.ended_at is not None and interrupt_requested() == "SIGTERM"


def test_outlast_raises_the_first_interruption_only():
    calls = []

    def wait() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise KeyboardInterrupt(f"number {len(calls)}")

    with pytest.raises(KeyboardInterrupt, match="number 1"):
        outlast(wait)
    assert len(calls) == 3


def test_inside_a_clean_up_a_second_signal_is_recorded_not_raised(command_line_handler):
    _signal_main()
    _wait_for(lambda: interrupt_requested() is not None)
    with clean_up():
        _signal_main()
        time.sleep(0.05)  # the handler runs at the next bytecode: here, inside the clean-up
    with pytest.raises(Interrupted):  # negative control: outside it, the second one raises where it lands
        _signal_main()
        for _ in range(1000):
            time.sleep(0.01)


def _wait_for(condition) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_write_behind_abort_after_an_interrupted_close_waits_for_the_write(command_line_handler):
    """The CI's sequence: close() interrupted in its join, then abort(), then the file is removed."""
    work = HeldWork()
    behind: WriteBehind[int] = WriteBehind(work, name="held-writer")
    behind.submit(1)
    with pytest.raises(Interrupted):
        behind.close()
    assert work.ended_at is not None  # close waited out its write before raising
    removed_at = time.monotonic()
    behind.abort()
    assert work.ended_at <= removed_at


def test_write_behind_abort_itself_outlasts_a_second_signal(command_line_handler):
    work = HeldWork()
    behind: WriteBehind[int] = WriteBehind(work, name="held-writer")
    behind.submit(1)
    time.sleep(0.01)
    behind.abort()  # raises nothing: the handler only records the signal inside the abort
    assert work.ended_at is not None


def test_corpus_writer_interrupted_twice_while_writing_leaves_no_file(
    command_line_handler, tmp_path: Path, monkeypatch, geometry, small_corpus
):
    """The crash itself: the corpus's writer thread is in its last row group, the main thread in close()
    waiting for it, when the two signals come; the file is removed only once the writer is done with it."""
    rows = list(small_corpus.rows())[:3]
    written: list[int] = []
    real_write = ParquetSink.write
    work = HeldWork()

    def write(self: ParquetSink, table) -> None:
        if len(written) == len(rows) - 1:  # the last row group: everything is submitted, close() is waiting
            work()
            assert self._tmp.exists(), "the file was removed under its writer"
        real_write(self, table)
        written.append(table.num_rows)

    monkeypatch.setattr(ParquetSink, "write", write)
    with pytest.raises(Interrupted):
        with CorpusWriter(tmp_path / "x.parquet", geometry, group_blocks=1) as writer:
            for block, source, provenance in rows:
                writer.add(block, source, provenance)
            writer.close()
    assert work.ended_at is not None and written == [1, 1, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # neither the file nor its temporary


def test_prefetch_closed_early_waits_for_its_reader_through_a_signal(command_line_handler):
    work = HeldWork()

    def items():
        yield 1
        work()
        yield 2

    reader = prefetch(items(), name="held-reader")
    assert next(reader) == 1
    reader.close()  # the consumer stops early (an error in the caller): the reader is joined, not abandoned
    assert work.ended_at is not None


def test_settling_pool_waits_for_its_tasks_through_a_signal(command_line_handler):
    work = HeldWork()
    with SettlingPool(1, "held-pool") as pool:
        pool.submit(work)
    assert work.ended_at is not None


def test_a_plain_thread_pool_is_left_while_its_task_works(command_line_handler):
    """The negative control: ``ThreadPoolExecutor``'s exit joins with ``Thread.join``."""
    work = HeldWork()
    with pytest.raises(Interrupted):
        with ThreadPoolExecutor(1, "plain-pool") as pool:
            pool.submit(work)
    assert work.ended_at is None
    _wait_for(lambda: work.ended_at is not None)


def test_device_queue_close_waits_for_the_call_in_hand(command_line_handler):
    work = HeldWork()
    queue = DeviceQueue("held-device")
    future = queue.submit(work)
    _wait_for(lambda: interrupt_requested() is not None)  # the call has started (a queued one is dropped)
    queue.close()
    assert work.ended_at is not None and future.done() and not queue.alive


def test_a_clean_up_in_another_thread_does_not_hold_the_main_threads_second_signal(command_line_handler):
    """The deferral is the main thread's own: a writer thread cleaning up does not make a stuck main thread
    deaf to the second Ctrl-C."""
    inside, leave = threading.Event(), threading.Event()

    def writer_cleaning_up() -> None:
        with clean_up():
            inside.set()
            leave.wait(60)

    worker = Worker(writer_cleaning_up, "cleaning-writer")
    try:
        inside.wait(60)
        _signal_main()
        _wait_for(lambda: interrupt_requested() is not None)
        with pytest.raises(Interrupted):
            _signal_main()
            for _ in range(1000):
                time.sleep(0.01)
    finally:
        leave.set()
        worker.join()
