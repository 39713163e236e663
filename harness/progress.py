"""Progress bars for long work (rich), as a plain ``tick(n)`` callable the lanes can call."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


@contextlib.contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    if not enabled or total <= 0:
        yield lambda n: None
        return
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("calls"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False, disable=not sys.stderr.isatty()) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)
    if not sys.stderr.isatty():
        console.print(f"{description}: {total} calls done")
