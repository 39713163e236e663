"""Where a command's time and memory go, step by step: what the benchmarks of a whole job read.

With ``HARNESS_PHASES=<file>`` set, every pipeline step (:func:`harness.base.errors.step`: "exact lane
x2", "module floors", "lanes", "score", "report", ...) appends one JSON line to that file when it ends:
its name (the enclosing steps' too), wall seconds, this process's user and system CPU seconds over it,
and its peak resident memory (Linux: the kernel's high-water mark, reset as the step starts through
``/proc/self/clear_refs``; a step's peak includes the steps inside it). Unset, nothing is measured.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

VARIABLE = "HARNESS_PHASES"
_lock = threading.Lock()


@dataclass
class Phase:
    name: str
    wall: float
    user: float
    system: float
    peak_kib: int = 0  # the largest high-water mark seen inside it so far (its own, and of the steps it holds)


_stack: list[Phase] = []


def _hwm_kib() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _reset_hwm() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def enabled() -> bool:
    return bool(os.environ.get(VARIABLE)) and threading.current_thread() is threading.main_thread()


def enter(name: str) -> None:
    if not enabled():
        return
    with _lock:
        if _stack:
            _stack[-1].peak_kib = max(_stack[-1].peak_kib, _hwm_kib())
        _reset_hwm()
        times = os.times()
        _stack.append(Phase(name, time.perf_counter(), times.user, times.system))


def leave(path: str) -> None:
    if not enabled():
        return
    with _lock:
        if not _stack:
            return
        phase = _stack.pop()
        times = os.times()
        peak = max(phase.peak_kib, _hwm_kib())
        if _stack:
            _stack[-1].peak_kib = max(_stack[-1].peak_kib, peak)
        record = {
            "step": path,
            "wall_s": round(time.perf_counter() - phase.wall, 3),
            "user_s": round(times.user - phase.user, 3),
            "sys_s": round(times.system - phase.system, 3),
            "peak_rss_mib": round(peak / 1024, 1),
        }
        with open(os.environ[VARIABLE], "a") as out:
            out.write(json.dumps(record) + "\n")
