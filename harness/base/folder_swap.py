"""A folder replaced by another in one step: a reader sees the old folder whole or the new one whole.

Used where a command rewrites a folder that others read as a unit (the packing test vectors an engine
commits and reads in its ``cargo test``). The new content is written in a temporary sibling
(``.<name>.tmp-<pid>-<hex>``, a name every reader ignores), flushed to disk, then swapped with the old
folder by one ``renameat2(RENAME_EXCHANGE)``; the old content, now at the temporary name, is removed.
A kill before the swap leaves the old folder and a temporary sibling; a kill after it, the new folder
and a temporary sibling. Either sibling is removed by the next replacement (:func:`remove_stale_stages`:
those of processes that are gone). A file system without the exchange (or another OS) is refused, and
nothing changes: two plain renames would leave, for a moment or after a kill, no folder at its name.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from harness.base.errors import OutputError, check_interrupted
from harness.base.fsio import fault, fsync_path, remove_path
from harness.base.outputset import process_alive, swap_paths


def swap_in(stage: Path, target: Path, what: str) -> None:
    """Make the folder ``stage`` (a sibling of ``target``) the folder at ``target`` in one step, and remove the
    content it replaces. ``target`` must exist; nothing moves when the exchange is not available."""
    for dirpath, _dirs, files in os.walk(stage):
        for name in files:
            fsync_path(Path(dirpath) / name)
        fsync_path(Path(dirpath))
    check_interrupted()  # a signal before the swap: the old folder stays
    fault(f"swap:{target.name}")
    if not swap_paths(stage, target):
        raise OutputError(
            f"{target}: cannot replace the {what} in one step: this file system has no renameat2 "
            f"RENAME_EXCHANGE; nothing changed (remove {target} and write it again)"
        )
    fsync_path(target.parent)
    fault(f"swapped:{target.name}")
    shutil.rmtree(stage, ignore_errors=True)  # the old content, at the temporary name


def remove_stale_stages(target: Path) -> list[Path]:
    """Remove the temporary siblings of ``target`` that processes now gone left (a kill during a write or a
    swap); returns them. A live process's stage is left alone: it may still be writing."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.tmp-(\d+)-[0-9a-f]+")
    removed = []
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return []
    for p in siblings:
        match = pattern.fullmatch(p.name)
        if match and int(match.group(1)) != os.getpid() and not process_alive(int(match.group(1))):
            remove_path(p)
            removed.append(p)
    return removed
