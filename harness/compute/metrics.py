"""Elementwise difference metrics for float32 arrays, at about the speed of reading them.

``row_diff`` reduces |a - b| per row in one compiled pass over both arrays
(``harness.compute.metrics_kernels``, numba); where numba cannot be imported it falls back to numpy
passes over cache-sized chunks (``row_diff_numpy``), exact as well, 1.5x slower on equal
arrays and 4x slower on arrays a few ULP apart (benchmarks/bench_scoring.py measures both
against a plain numpy read of the two arrays).

ULP distance: float32 bit patterns mapped to a monotonic integer line (+0 and -0 both 0),
so the distance counts representable floats between two values. NaN or Inf on either side
is counted, never compared: a non-finite element can never pass.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from harness.base.overlap import meanwhile

CHUNK_ELEMENTS = 1 << 18  # numpy fallback: 1 MiB per float32 temporary, stays in L2


def ordered_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> int64 on a line where adjacent floats differ by 1 (+0 == -0 == 0)."""
    i = np.ascontiguousarray(x, dtype=np.float32).view(np.int32)
    sign = np.right_shift(i, 31)  # 0, or -1 where the sign bit is set
    o = np.bitwise_and(sign, 0x7FFFFFFF)
    np.bitwise_xor(o, i, out=o)  # negative: -1 - magnitude (branch-free; fits int32)
    np.subtract(o, sign, out=o)  # negative: -magnitude
    return o.astype(np.int64)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = ordered_bits(a)
    np.subtract(d, ordered_bits(b), out=d)
    np.abs(d, out=d)
    return d


@dataclass
class RowDiff:
    """Per-row (first axis) reductions of |a - b| over all other axes."""

    max_abs: np.ndarray  # float64 [rows]; NaN where a row has a non-finite element
    sum_abs: np.ndarray  # float64 [rows] (non-finite elements excluded)
    max_ulp: np.ndarray  # int64 [rows] (non-finite elements excluded)
    differs: np.ndarray  # bool [rows]: some element's bits differ
    non_finite: np.ndarray  # int64 [rows]: elements non-finite on either side
    differing: int  # elements whose bits differ, over all rows
    elements_per_row: int


def row_diff(a: np.ndarray, b: np.ndarray) -> RowDiff:
    """Reduce |a - b| per row of the first axis (the compiled loop; numpy where numba is missing)."""
    a2, b2 = _rows(a, b)
    kernels = _kernels()
    if kernels is None:
        return row_diff_numpy(a2, b2)
    return _row_diff_compiled(kernels, a2, b2)


def _rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    rows = a.shape[0] if a.ndim else 1
    per_row = int(np.prod(a.shape[1:], dtype=np.int64)) if a.ndim > 1 else 1
    return (
        np.ascontiguousarray(a, dtype=np.float32).reshape(rows, per_row),
        np.ascontiguousarray(b, dtype=np.float32).reshape(rows, per_row),
    )


def _kernels() -> ModuleType | None:
    """The numba kernels module, or None where numba cannot be imported (numpy fallback).

    While :func:`warm_kernels` runs (a background thread, :func:`start_warming`) this waits for it:
    the kernels are published only once warm, so the first use never compiles beside the warmer."""
    if not _KERNELS_TRIED:
        with _LOCK:
            if not _KERNELS_TRIED:
                _publish(_import_kernels())
    return _KERNELS


def _import_kernels() -> ModuleType | None:
    try:
        from harness.compute import metrics_kernels  # deferred: imports numba (start-up)
    except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install scoring
        return None
    return metrics_kernels


def _publish(kernels: ModuleType | None) -> None:
    global _KERNELS, _KERNELS_TRIED
    _KERNELS = kernels
    _KERNELS_TRIED = True


_KERNELS: ModuleType | None = None  # harness.compute.metrics_kernels once imported
_KERNELS_TRIED = False
_LOCK = threading.Lock()  # held by whoever imports (and warms) the kernels: one compiler at a time


def warm_kernels() -> None:
    """Import the kernels and call each once on tiny arrays, in every argument layout the sinks and
    scorers pass (writable, and read-only inputs as read back from files: numba compiles one
    specialisation per layout), so their first real call neither imports numba nor compiles.

    Why: the first sink of ``golden record`` / ``run`` calls ``top_two``, and importing numba (and
    scipy, llvmlite) and loading or compiling the kernels takes 2-12 s in the main thread while the
    device waits for the next request. Idempotent; a failure here is left for the first real use to
    raise in its own thread."""
    if _KERNELS_TRIED:
        return
    with _LOCK:
        if _KERNELS_TRIED:
            return
        kernels = _import_kernels()
        if kernels is not None:
            _call_each(kernels)
        _publish(kernels)


def _call_each(kernels: ModuleType) -> None:
    def layout(dtype: type, read_only: bool) -> np.ndarray:
        a: np.ndarray = np.ones((1, 2), dtype)
        a.setflags(write=not read_only)
        return a

    for read_only in (False, True):
        frames = layout(np.float32, read_only)
        kernels.top_two(frames, np.zeros(1, np.int64), np.zeros(1, np.float32))
    for x_read_only in (False, True):
        for y_read_only in (False, True):
            x, y = layout(np.float32, x_read_only), layout(np.float32, y_read_only)
            outputs = kernels.RowOutputs(
                np.zeros(1, np.int32), np.zeros(1), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
            )
            kernels.row_stats(x, y, x.view(np.int32), y.view(np.int32), outputs)


def start_warming() -> threading.Thread:
    """:func:`warm_kernels` in a daemon thread, so that the import and compilation overlap the device's
    calls (``golden record`` starts it at its start, the nightly once its first calls are queued, the audit
    once its first are staged: at a command's start it took the GIL from the start-up itself); the first use
    waits for it, and imports again if it failed."""
    return meanwhile(warm_kernels, "metrics-kernels-warm")


def _row_diff_compiled(kernels: ModuleType, a2: np.ndarray, b2: np.ndarray) -> RowDiff:
    rows, per_row = a2.shape
    top = np.zeros(rows, np.int32)
    out = RowDiff(
        np.zeros(rows),
        np.zeros(rows),
        np.zeros(rows, np.int64),
        np.zeros(rows, bool),
        np.zeros(rows, np.int64),
        0,
        per_row,
    )
    counts = np.zeros(rows, np.int64)
    kernels.row_stats(
        a2,
        b2,
        a2.view(np.int32),
        b2.view(np.int32),
        kernels.RowOutputs(top, out.sum_abs, out.max_ulp, out.non_finite, counts),
    )
    out.max_abs = top.view(np.float32).astype(np.float64)
    out.max_abs[out.non_finite > 0] = np.nan
    out.differs = counts > 0
    out.differing = int(counts.sum())
    return out


# Two non-NaN floats of opposite signs are at least 2**23 apart as int32 bit patterns, wrapped
# or not (their magnitude bits stay at or below 0x7F800000). So a row whose int32 differences
# all stay inside (-2**23, 2**23) and whose |a - b| is finite has no sign change, and those
# differences are its exact ULP distances.
_SAME_SIGN_LIMIT = 1 << 23
_EXP = 0x7F800000  # magnitude bits at or above this: Inf or NaN


def row_diff_numpy(a: np.ndarray, b: np.ndarray) -> RowDiff:
    """The same reductions in numpy passes over cache-sized chunks (the fallback, and a baseline).

    Per chunk: the int32 bit difference (one read of both inputs); if it is all zero and the
    chunk's max and min are finite, the chunk is bitwise equal and nothing else is done.
    Otherwise its per-row max and min, and the float ``|a - b|`` with its per-row max and sum.
    A row whose bit differences reach 2**23 or whose ``|a - b|`` is not finite (a sign change,
    NaN/Inf, or values a binade apart) is redone exactly, all such rows of a chunk at once.
    """
    a2, b2 = _rows(a, b)
    rows, per_row = a2.shape
    out = RowDiff(
        np.zeros(rows),
        np.zeros(rows),
        np.zeros(rows, np.int64),
        np.zeros(rows, bool),
        np.zeros(rows, np.int64),
        0,
        per_row,
    )
    step = max(1, CHUNK_ELEMENTS // max(per_row, 1))
    ubuf = np.empty((min(step, rows), per_row), np.int32)
    dbuf = np.empty((min(step, rows), per_row), np.float32)
    for s in range(0, rows, step):
        x, y = a2[s : s + step], b2[s : s + step]
        n = x.shape[0]
        u, d = ubuf[:n], dbuf[:n]
        np.subtract(x.view(np.int32), y.view(np.int32), out=u)  # wraps where signs differ: checked below
        count = int(np.count_nonzero(u))  # exact even when wrapped: zero exactly when the bits agree
        if per_row == 0 or (count == 0 and np.isfinite(x.max()) and np.isfinite(x.min())):
            continue  # bitwise equal and finite (max and min propagate NaN, and see +-Inf)
        out.differing += count
        umax, umin = u.max(axis=1), u.min(axis=1)
        with np.errstate(invalid="ignore", over="ignore"):
            np.subtract(x, y, out=d)
            np.abs(d, out=d)
            rmax = d.max(axis=1)
            out.sum_abs[s : s + n] = d.sum(axis=1, dtype=np.float64)
        out.max_abs[s : s + n] = rmax
        out.max_ulp[s : s + n] = np.maximum(umax.astype(np.int64), -umin.astype(np.int64))
        out.differs[s : s + n] = (umax != 0) | (umin != 0)
        slow = ~np.isfinite(rmax) | (umax >= _SAME_SIGN_LIMIT) | (umin <= -_SAME_SIGN_LIMIT)
        if slow.any():
            _exact_rows(x[slow], y[slow], out, s + np.flatnonzero(slow))
    out.max_abs[out.non_finite > 0] = np.nan
    return out


def _exact_rows(x: np.ndarray, y: np.ndarray, out: RowDiff, rows: np.ndarray) -> None:
    """Rows the int32 shortcut cannot do: exact ULP across signs, non-finite pairs left out.

    On the ordered line two floats of the same sign are ``|m_x - m_y|`` apart and two of
    opposite signs ``m_x + m_y`` (m: the 31 magnitude bits); both fit uint32, so no int64 pass.
    """
    mx = np.bitwise_and(x.view(np.int32), 0x7FFFFFFF)
    my = np.bitwise_and(y.view(np.int32), 0x7FFFFFFF)
    finite = (mx < _EXP) & (my < _EXP)
    out.non_finite[rows] = finite.shape[1] - np.count_nonzero(finite, axis=1)
    opposite = np.bitwise_xor(x.view(np.int32), y.view(np.int32)) < 0
    ulp = np.abs(mx - my).view(np.uint32)
    np.add(mx.view(np.uint32), my.view(np.uint32), out=ulp, where=opposite)
    ulp[~finite] = 0
    out.max_ulp[rows] = ulp.max(axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(x - y)
    d[~finite] = 0
    out.max_abs[rows] = d.max(axis=1)
    out.sum_abs[rows] = d.sum(axis=1, dtype=np.float64)


def top_two(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[n, C] -> (argmax int64 [n], top1 - top2 float32 [n]): the golden's per-frame decisions.

    For finite frames, argmax is the first index of the maximum. With NaN the result is the
    recurrence's, not a rule (a NaN in column 0 wins with margin NaN; a NaN before a larger
    value is dropped): decisions are taken on goldens only, and a golden with a non-finite
    output is refused when it is recorded (``refuse_non_finite``). Compiled; ``top_two_numpy``
    where numba is missing, with the same recurrence (tests compare them, NaN included).
    """
    kernels = _kernels()
    if kernels is None:
        return top_two_numpy(frames)
    frames = np.ascontiguousarray(frames, dtype=np.float32)
    argmax = np.zeros(frames.shape[0], dtype=np.int64)
    margin = np.zeros(frames.shape[0], dtype=np.float32)
    if frames.shape[1]:
        kernels.top_two(frames, argmax, margin)
    return argmax, margin


def top_two_numpy(frames: np.ndarray, chunk: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """``top_two`` column by column in numpy, chunked (the fallback)."""
    n, classes = frames.shape
    argmax = np.zeros(n, dtype=np.int64)
    margin = np.zeros(n, dtype=np.float32)
    for s in range(0, n, chunk):
        x = frames[s : s + chunk]
        m1 = x[:, 0].copy()
        m2 = np.full_like(m1, -np.inf)
        a1 = np.zeros(m1.shape[0], dtype=np.int64)
        for c in range(1, classes):
            col = x[:, c]
            better = col > m1
            np.copyto(m2, np.where(better, m1, np.maximum(m2, col)))
            np.copyto(m1, col, where=better)
            a1[better] = c
        argmax[s : s + chunk] = a1
        with np.errstate(invalid="ignore", over="ignore"):
            margin[s : s + chunk] = m1 - m2
    return argmax, margin


def cosine_and_rel_l2(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row cosine(a, b) and ||a - b|| / ||b|| (b = golden), in float64.

    Conventions: two zero rows have cosine 1 and relative error 0; a zero golden row
    against a non-zero row has relative error inf; non-finite rows give NaN (fails).
    """
    x = a.astype(np.float64)
    y = b.astype(np.float64)
    dot = np.einsum("rd,rd->r", x, y)
    nx = np.sqrt(np.einsum("rd,rd->r", x, x))
    ny = np.sqrt(np.einsum("rd,rd->r", y, y))
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = dot / (nx * ny)
        cos = np.where((nx == 0) & (ny == 0), 1.0, cos)
        cos = np.where((nx == 0) ^ (ny == 0), 0.0, cos)
        err = np.sqrt(np.einsum("rd,rd->r", x - y, x - y))
        rel = np.where(ny == 0, np.where(err == 0, 0.0, np.inf), err / ny)
    bad = ~(np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1))
    cos[bad] = np.nan
    rel[bad] = np.nan
    return np.clip(cos, -1.0, 1.0, where=~np.isnan(cos), out=cos), rel
