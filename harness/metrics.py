"""Elementwise difference metrics for float32 arrays, vectorised and chunked.

Chunking keeps every temporary in cache (a quarter million elements at a time) instead of
allocating several arrays as large as the inputs, which is what makes a full score of 10^8
elements cost about as much as one bare ``max(abs(a - b))`` pass (benchmarks/bench_scoring.py).

ULP distance: float32 bit patterns mapped to a monotonic integer line (+0 and -0 both 0),
so the distance counts representable floats between two values. NaN or Inf on either side
is counted, never compared: a non-finite element can never pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CHUNK_ELEMENTS = 1 << 18  # 1 MiB per float32 temporary: stays in L2


def ordered_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> int64 on a line where adjacent floats differ by 1 (+0 == -0 == 0)."""
    i = np.ascontiguousarray(x, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(ordered_bits(a) - ordered_bits(b))


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
    """Reduce |a - b| per row of the first axis, chunk by chunk.

    The fast path is ten in-cache passes per chunk (float32 difference, its max and sum;
    int32 bit difference, its max, sign check, count). Rows where a sign differs (the int32
    difference may wrap) or a value is non-finite take an exact int64 path; they are rare
    in outputs that agree, and a row that disagrees that much is already failing.
    """
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    rows = a.shape[0]
    per_row = int(np.prod(a.shape[1:], dtype=np.int64)) if a.ndim > 1 else 1
    a2 = np.ascontiguousarray(a, dtype=np.float32).reshape(rows, per_row)
    b2 = np.ascontiguousarray(b, dtype=np.float32).reshape(rows, per_row)
    out = RowDiff(np.zeros(rows), np.zeros(rows), np.zeros(rows, np.int64), np.zeros(rows, bool),
                  np.zeros(rows, np.int64), 0, per_row)
    step = max(1, CHUNK_ELEMENTS // max(per_row, 1))
    for s in range(0, rows, step):
        x, y = a2[s : s + step], b2[s : s + step]
        xi, yi = x.view(np.int32), y.view(np.int32)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.subtract(x, y)
            np.abs(d, out=d)
            rmax = d.max(axis=1)
            out.sum_abs[s : s + step] = d.sum(axis=1)
        out.max_abs[s : s + step] = rmax
        u = np.subtract(xi, yi)  # exact ULP distance where the signs agree (no wrap possible)
        np.abs(u, out=u)
        umax = u.max(axis=1)
        out.max_ulp[s : s + step] = umax
        out.differs[s : s + step] = umax > 0
        count = int(np.count_nonzero(u))
        slow = ~np.isfinite(rmax) | (np.bitwise_xor(xi, yi).min(axis=1) < 0)
        for r in np.flatnonzero(slow):
            count -= int(np.count_nonzero(u[r]))
            count += _exact_row(x[r], y[r], out, s + r)
        out.differing += count
    out.max_abs[out.non_finite > 0] = np.nan
    return out


def _exact_row(x: np.ndarray, y: np.ndarray, out: RowDiff, r: int) -> int:
    """One row the fast path cannot do: sign changes (int64 ULP) or non-finite values."""
    finite = np.isfinite(x) & np.isfinite(y)
    out.non_finite[r] = int((~finite).sum())
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(x[finite] - y[finite])
    out.max_abs[r] = d.max() if d.size else 0.0
    out.sum_abs[r] = d.sum(dtype=np.float64)
    ulp = ulp_distance(x[finite], y[finite])
    out.max_ulp[r] = int(ulp.max()) if ulp.size else 0
    differing = int((x.view(np.int32) != y.view(np.int32)).sum())
    out.differs[r] = differing > 0
    return differing


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
