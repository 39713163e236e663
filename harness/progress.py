"""Progress on long work, as a ``tick(n)`` callable the lanes call (with a ``phase(label)`` for the warm-up).

On a terminal: a rich progress bar. Elsewhere (CI logs): one plain line at least every
``HARNESS_PROGRESS_SECONDS`` (default 10) seconds with calls done, elapsed time and an estimate of
the time left, and a last line when done, so a 12-minute job shows it is alive. The lines come from
a ticker thread, so they keep coming while one long call (a warm-up of a large shape, minutes on a
CPU) holds the main thread.

The warm-up (every lane's first call, run once untimed: :func:`lanes.running.runner._warm_up`) is its own
phase: ``warm-up: OP 0 k=4 (3 of 12)``. It is not per-block work, so the estimate of the time left
is measured from the end of the warm-up over the calls counted since (counting the warm-up's
minutes as if they were per-call work made the nightly's first estimate 3.5x too long).
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from harness.base.env_vars import variables
from harness.base.errors import HarnessError, clean_up
from harness.base.workers import Worker


class Ticks:
    """What a progress bar yields: ``tick(n)`` counts n calls done; ``phase(label)`` names a phase that
    is not counted work (the warm-up), ``phase(None)`` ends it. The default does nothing."""

    def __call__(self, n: int) -> None:
        """Count ``n`` calls (blocks, shards) done."""

    def phase(self, label: str | None) -> None:
        """Enter an uncounted phase (``label``) or leave it (None)."""

    def note(self, text: str) -> None:
        """Say one thing the job decided on its own as it went (one line now, not a label that the next replaces)."""


@contextlib.contextmanager
def progress_bar(
    description: str, total: int, enabled: bool = True, unit: str = "calls", announce: str | None = None
) -> Iterator[Ticks]:
    """``unit`` names what ``total`` counts (network calls; shards for a distributed job). ``announce``: a line
    said first (where the output goes), as the long work starts: after the checks that refuse bad input at once,
    so a refusal stays one line."""
    plain = enabled and total > 0 and not sys.stderr.isatty()
    interval = interval_seconds() if plain else 0.0  # refused before anything is said
    if enabled and announce:
        print(announce, file=sys.stderr, flush=True)
    if not enabled or total <= 0:
        yield Ticks()
        return
    if not plain:
        with _rich_bar(description, total, unit) as ticks:
            yield ticks
        return
    lines = PlainLines(description, total, unit)
    with lines.ticker(interval):
        yield lines
    lines.emit(final=True)


def interval_seconds() -> float:
    """``HARNESS_PROGRESS_SECONDS`` (default 10): seconds between two plain lines, refused in one line unless a
    finite number > 0 (0 would print without pause)."""
    set_to = variables().HARNESS_PROGRESS_SECONDS
    text = "10" if set_to is None else set_to
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise HarnessError(
            f"HARNESS_PROGRESS_SECONDS={text!r}: expected seconds between progress lines, a number > 0 (default 10)"
        )
    return value


class PlainLines(Ticks):
    """The plain lines of a CI log. ``clock`` and ``out`` are seams for the tests (a fake clock)."""

    def __init__(
        self,
        description: str,
        total: int,
        unit: str = "calls",
        clock: Callable[[], float] = time.monotonic,
        out: TextIO | None = None,
    ) -> None:
        self.description, self.total, self.unit, self.clock = description, total, unit, clock
        self.out = out
        self.start = clock()
        self.work_start = self.start  # when counted work began: the start, or the end of the warm-up
        self.last = self.start  # when the last call was counted
        self.done = 0
        self.label: str | None = None
        self._lock = threading.Lock()

    def __call__(self, n: int) -> None:
        with self._lock:
            self.done += n
            if n:
                self.last = self.clock()

    def phase(self, label: str | None) -> None:
        with self._lock:
            self.label = label
            if label is None:
                self.work_start = self.last = self.clock()

    def line(self, final: bool = False) -> str:
        """The current line: done of total, elapsed (the warm-up included), the time left estimated from the
        counted work alone."""
        with self._lock:
            now, done, total, label = self.clock(), self.done, self.total, self.label
            work_start = self.work_start
            last = self.last
        elapsed = now - self.start
        if final:
            return f"{self.description}: {done} {self.unit}, done ({100 * done / total:.0f} %), {elapsed:.0f} s elapsed"
        text = f"{self.description}: {done}/{total} {self.unit} ({100 * done / total:.0f} %)"
        if label is not None:
            text += f", {label}"
        text += f", {elapsed:.0f} s elapsed"
        if label is None and done and done < total:
            per_call = (last - work_start) / done
            waiting = now - last
            if waiting > max(2.0 * per_call, 1.0):  # a call outstanding longer than calls took: say so, no guess
                text += (
                    f", waiting for the next of the {total - done} {self.unit} left ({waiting:.0f} s so far; "
                    f"{per_call:.1f} s each until now)"
                )
            else:
                text += f", about {per_call * (total - done):.0f} s left"
        return text

    def emit(self, final: bool = False) -> None:
        print(self.line(final), file=self.out or sys.stderr, flush=True)

    def note(self, text: str) -> None:
        print(f"{self.description}: {text}", file=self.out or sys.stderr, flush=True)

    @contextlib.contextmanager
    def ticker(self, interval: float) -> Iterator[None]:
        """A daemon thread printing :meth:`line` every ``interval`` seconds until the block ends: lines keep
        coming while one long call holds the main thread."""
        stop = threading.Event()

        def run() -> None:
            while not stop.wait(interval):
                self.emit()

        worker = Worker(run, "harness-progress")
        try:
            yield
        finally:
            with clean_up():  # no line printed after the block, even if a second Ctrl-C comes now
                stop.set()
                worker.join()


@contextlib.contextmanager
def _rich_bar(description: str, total: int, unit: str) -> Iterator[Ticks]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:  # refreshes in its own thread
        yield _RichTicks(bar, bar.add_task(description, total=total), description)


class _RichTicks(Ticks):
    def __init__(self, bar: Any, task: Any, description: str) -> None:
        self.bar, self.task, self.description = bar, task, description

    def __call__(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def phase(self, label: str | None) -> None:
        self.bar.update(self.task, description=self.description + (f" ({label})" if label else ""))

    def note(self, text: str) -> None:
        self.bar.console.print(f"{self.description}: {text}", markup=False, highlight=False)
