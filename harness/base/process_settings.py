"""What the harness sets for its own processes on start, and why: the cores shared, the memory churned.

Two defaults cost a CPU user dearly and change no result bit, so the command line sets them before it
imports torch or starts a thread, unless the user set them (their value wins):

- ``OMP_WAIT_POLICY=PASSIVE``: torch's OpenMP threads otherwise spin while they wait for work, taking
  the cores from every other process (a CI runner's neighbours, the other half of ``tox p``): measured
  here, a small ``golden record`` beside two CPU-bound neighbours took 1.7x as long without it.
- ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=16777216`` (glibc 2.35 or later,
  where the kernel gives transparent huge pages on request): a network's activations are tens to hundreds
  of MiB each, allocated and freed per call. Faulting their 4 KiB pages in cost as much system time as the
  network took user time (the full voiceprint network at k = 4: 43 s of system time for 50 s of user; 15 s
  with huge pages). glibc's own threshold between heap and mappings grows with every freed mapping (up to
  32 MiB), after which such blocks stay in the heap as fragments no later call fits, and the resident
  memory depends on how the threads interleave, so on the machine's load (the README's first command:
  2.9 GiB quiet, 3.2 GiB beside two busy processes). A fixed threshold of 16 MiB gives every block that
  large back to the system when freed, the huge pages keep taking it again cheap, and smaller blocks (the
  harness's own buffers, a small network's activations) stay in the heap: at 128 KiB the small networks
  spent as much time in the kernel as in user code.
  glibc reads its tunables when a process starts: the command line starts itself again (``exec``, the
  same process id) with the variable set, once.

Both go into the environment, so the processes the harness starts (``harness serve``'s Triton server,
a Ray worker) inherit them. :func:`in_force` says what holds, for the environment each golden and run
records (``process``). The mark (``HARNESS_PROCESS_SET``) names each variable the harness set *with a digest
of the value it set*: a process that inherits the mark (a harness started by a harness, a packer's script that
runs one) and finds another value there (the user's ``OMP_WAIT_POLICY=ACTIVE``) records that value as the
environment's, never as set by the harness.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import os
import sys
from pathlib import Path
from typing import Final

OMP_VARIABLE: Final = "OMP_WAIT_POLICY"
OMP_DEFAULT: Final = "PASSIVE"
TUNABLES: Final = "GLIBC_TUNABLES"
ALLOCATOR: Final = "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=16777216"
MARK: Final = "HARNESS_PROCESS_SET"  # which of the variables the harness set (and the exec done): ","-separated
USER_MALLOC = ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", TUNABLES)
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def tune_process() -> None:
    """Set the defaults (module doc) unless the user set them; may replace this process by itself (``exec``)
    with the allocator's variable set. Call first thing in the command line's process, before torch is
    imported and any thread starts. Once done (the variable says so), it changes nothing."""
    done = os.environ.get(MARK)
    if done is not None:
        return
    ours: list[str] = []
    if OMP_VARIABLE not in os.environ and "torch" not in sys.modules:
        os.environ[OMP_VARIABLE] = OMP_DEFAULT
        ours.append(OMP_VARIABLE)
    restart = not any(name in os.environ for name in USER_MALLOC) and _huge_pages_on_request()
    if restart:
        os.environ[TUNABLES] = ALLOCATOR
        ours.append(TUNABLES)
    os.environ[MARK] = _mark(ours)
    if restart:
        try:
            os.execv(sys.executable, list(sys.orig_argv))
        except OSError:  # no exec here (a frozen or embedded interpreter): run on with glibc's defaults
            os.environ.pop(TUNABLES)
            os.environ[MARK] = _mark([name for name in ours if name != TUNABLES])


def _value_digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def _mark(names: list[str]) -> str:
    """``NAME=<digest of the value set>,...``: what the harness set, and to what."""
    return ",".join(f"{name}={_value_digest(os.environ[name])}" for name in names)


def set_by_harness() -> set[str]:
    """The variables whose value is the one the harness set (the mark's digest matches the value there now)."""
    ours = set()
    for item in filter(None, os.environ.get(MARK, "").split(",")):
        name, _, digest = item.partition("=")
        value = os.environ.get(name)
        if digest and value is not None and _value_digest(value) == digest:
            ours.add(name)
    return ours


def _huge_pages_on_request() -> bool:
    """glibc 2.35 or later (its ``hugetlb`` tunable) on a Linux kernel that gives transparent huge pages."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mode = THP.read_text()
    except OSError:
        return False
    if "[never]" in mode:
        return False
    version = _glibc_version()
    return version is not None and version >= (2, 35)


def _glibc_version() -> tuple[int, int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        get = libc.gnu_get_libc_version
    except (OSError, AttributeError):  # musl and others have no gnu_get_libc_version
        return None
    get.restype = ctypes.c_char_p
    try:
        major, minor = (int(part) for part in get().decode().split(".")[:2])
    except ValueError:
        return None
    return major, minor


def in_force() -> dict[str, str]:
    """What holds in this process, for the environment a golden or run records: each variable's value and who
    set it (the harness, the user, or nobody)."""
    ours = set_by_harness()

    def said(name: str) -> str:
        value = os.environ.get(name)
        if value is None:
            return "unset"
        return f"{value} ({'set by the harness' if name in ours else 'the environment'})"

    given = [name for name in USER_MALLOC if name in os.environ and name not in ours]
    malloc = (
        said(TUNABLES)
        if TUNABLES in ours
        else (f"the environment's ({', '.join(given)})" if given else "the C library's defaults")
    )
    return {"omp_wait_policy": said(OMP_VARIABLE), "malloc": malloc}


def release_free_memory() -> None:
    """Give the C library's free heap pages back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    A long phase that allocates and frees tens of MiB per step (a network's activations, module by module)
    leaves free pages scattered in the heap that no later step may fit: the resident memory then grows with
    the number of steps, not with what is alive. Called between such steps (each sampled request of the
    module floors), it keeps the peak the size of one step."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def _libc() -> ctypes.CDLL | None:
    if _glibc_version() is None:
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
