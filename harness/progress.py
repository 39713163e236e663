"""Progress on long work, as a plain ``tick(n)`` callable the lanes call.

On a terminal: a rich progress bar. Elsewhere (CI logs): one plain line every
``HARNESS_PROGRESS_SECONDS`` (default 10) seconds with calls done, elapsed time and an estimate of
the time left, and a last line when done, so a 12-minute job shows it is alive.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def progress_bar(description: str, total: int, enabled: bool = True, unit: str = "calls"
                 ) -> Iterator[Callable[[int], None]]:
    """``unit`` names what ``total`` counts (network calls; shards for a distributed job)."""
    if not enabled or total <= 0:
        yield lambda n: None
        return
    if sys.stderr.isatty():
        with _rich_bar(description, total, unit) as tick:
            yield tick
        return
    yield from _plain_lines(description, total, unit)


@contextlib.contextmanager
def _rich_bar(description: str, total: int, unit: str) -> Iterator[Callable[[int], None]]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def _plain_lines(description: str, total: int, unit: str) -> Iterator[Callable[[int], None]]:
    interval = float(os.environ.get("HARNESS_PROGRESS_SECONDS", "10"))
    start = time.monotonic()
    state = {"done": 0, "next": start + interval}

    def line(done: int) -> str:
        elapsed = time.monotonic() - start
        eta = elapsed / done * (total - done) if done else float("nan")
        return (f"{description}: {done}/{total} {unit} ({100 * done / total:.0f} %), {elapsed:.0f} s elapsed"
                + (f", about {eta:.0f} s left" if done and done < total else ""))

    def tick(n: int) -> None:
        state["done"] += n
        now = time.monotonic()
        if now >= state["next"]:
            print(line(state["done"]), file=sys.stderr, flush=True)
            state["next"] = now + interval

    yield tick
    print(line(state["done"]).replace(f"{state['done']}/{total} {unit}", f"{state['done']} {unit}, done"),
          file=sys.stderr, flush=True)
