"""Will the largest packed request fit the device? Estimated before any packed call is sent.

A packed shape k sends k blocks in one request, and the networks' working memory grows with it:
k = 1000 padded took 7.9 GB for a 4-block corpus, and a request that does not fit ends in an
out-of-memory error deep inside the first packed call (or in the kernel's OOM killer, which leaves
no line at all). So before the packed lanes' first call, the runner measures what one block costs
and refuses a plan whose largest request cannot fit, with the estimate:

- **measured**: the peak memory of the exact lane's warm-up (one block per call, every OP), above
  what was in use before it: ``torch.cuda`` peak statistics on a GPU; on the CPU the growth of
  the resident set (freed heap memory is first returned to the system with ``malloc_trim`` and
  the kernel's peak counter reset through ``/proc/self/clear_refs``, so the peak is this call's);
- **extrapolated linearly** to the largest request of the plan (k blocks when padded to a fixed
  batch, else at most the blocks a group holds) — measured on this machine: 2.7 MiB per block
  for the small model at k = 1..16 (OP 0), 90 MiB for the full one at k = 1..8, linear within 2 %;
- **compared** with what the device has: free GPU memory (plus what torch's caching allocator
  holds unused), or ``MemAvailable`` (and the cgroup's limit) on the CPU.

A first call also pays one-off costs (allocator pools, oneDNN primitives: about 15 MiB here),
which k would multiply; so when the first call's figure does not fit, a second one-block call
(without those costs) decides. Only the in-process backend is estimated: a Triton server's
memory is not this process's (its request size limit is checked instead, see
:func:`lanes.running.runner.check_request_sizes`).
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Sequence
from pathlib import Path

from harness.base.errors import LaneError

_MIB, _GIB = 2**20, 2**30


def in_process_device(backend: object) -> str | None:
    """The device of an in-process backend (None for a server: its memory is not ours to measure)."""
    if getattr(backend, "name", None) != "in-process":
        return None
    return str(getattr(backend, "device", "cpu"))


def measure_peak(fn: Callable[[], Sequence[int | None]], device: str) -> int | None:
    """Bytes the calls of ``fn`` needed at their peak above what was in use before (None: cannot
    tell). ``fn`` returns the device peak of each call it made (``CallResult.peak_device_bytes``:
    the in-process backend resets torch's peak counter at the start of every call, so one reading
    at the end would see the last call only)."""
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)
        allocated = torch.cuda.memory_allocated(device)
        peaks = [p for p in fn() if p is not None]
        return max(0, max(peaks) - allocated) if peaks else None
    if not _reset_peak():
        return None
    base = _proc_kib("/proc/self/status", "VmRSS:")
    fn()
    peak = _proc_kib("/proc/self/status", "VmHWM:")
    if base is None or peak is None:
        return None
    return max(0, peak - base)


def available_bytes(device: str) -> int | None:
    """Memory a request may still take on ``device`` (None: unknown)."""
    if device.startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    avail = _proc_kib("/proc/meminfo", "MemAvailable:")
    limit = _cgroup_headroom()
    known = [v for v in (avail, limit) if v is not None]
    return min(known) if known else None


def largest_request_blocks(shapes: Sequence[int], pad_to_fixed: bool, group_blocks: int) -> int:
    """Blocks in the plan's largest request: k when padded, else at most the blocks of a group."""
    return max((k if pad_to_fixed else min(k, group_blocks) for k in shapes), default=0)


def check_fits(
    shapes: Sequence[int],
    pad_to_fixed: bool,
    group_blocks: int,
    device: str,
    first_peak: int | None,
    again: Callable[[], Sequence[int | None]],
) -> None:
    """Refuse a plan whose largest packed request cannot fit ``device`` (see module doc)."""
    if first_peak is None or not shapes:
        return
    avail = available_bytes(device)
    blocks = largest_request_blocks(shapes, pad_to_fixed, group_blocks)
    if avail is None or first_peak * blocks <= avail:
        return
    steady = measure_peak(again, device)  # without a first call's one-off costs
    per_block = min(first_peak, steady) if steady is not None else first_peak
    per_block = max(per_block, 1)
    if per_block * blocks <= avail:
        return
    worst = max(shapes, key=lambda k: k if pad_to_fixed else min(k, group_blocks))
    fit = max(0, avail // per_block)
    raise LaneError(
        f"shape k={worst} cannot fit the {device} memory: its requests hold {blocks} blocks"
        f"{' (padded to a fixed batch)' if pad_to_fixed else ''} and need about {_size(per_block * blocks)} "
        f"({_size(per_block)} per block, measured on a one-block call and extrapolated linearly), but "
        f"{_size(avail)} is available: at most about {fit} blocks per call fit; choose smaller shapes (--shapes) "
        "or a device with more memory"
    )


def _size(n: float) -> str:
    return f"{n / _GIB:.1f} GiB" if n >= _GIB else f"{n / _MIB:.1f} MiB"


# ------------------------------------------------------------------------------------------ CPU (Linux)


def _proc_kib(path: str, key: str) -> int | None:
    """A ``key: <n> kB`` line of a /proc file, in bytes (None off Linux or when absent)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return None


def _cgroup_headroom() -> int | None:
    """cgroup v2 limit minus usage of this process's group (None when unlimited or unknown)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        rel = Path("/proc/self/cgroup").read_text().strip().splitlines()[0].split(":", 2)[2]
        root = Path("/sys/fs/cgroup") / rel.lstrip("/")
        limit = (root / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return max(0, int(limit) - int((root / "memory.current").read_text().strip()))
    return None


def _reset_peak() -> bool:
    """Give freed heap memory back to the system and reset the kernel's peak resident set counter."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True
