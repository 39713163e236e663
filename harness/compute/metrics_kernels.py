"""Compiled (numba) loops behind ``harness.compute.metrics``: one pass over both arrays per row.

Why compiled: a row difference needs about ten reductions per element (float difference, its
max and sum, bit difference, its max, a count, sign and finiteness checks). As numpy passes,
even in cache-sized chunks, they cost three to four times one plain read of the two arrays;
fused into one vectorised loop they cost about one read (benchmarks/bench_scoring.py).

Exactness: the fast loop works on the int32 bit patterns. Where the two signs agree, the
int32 difference of the patterns is exactly the ULP distance (it cannot wrap). A row where
some sign differs, or some value is NaN/Inf (then ``|x - y|`` is not finite), is done again
by an exact loop (int64 ordered bits, non-finite elements counted and left out). The max of
``|x - y|`` is taken over its bit pattern as an integer, which orders non-negative floats as
floats do and vectorises without NaN-aware compares.

Compiled on first use and cached beside this file (``cache=True``); importing this module
imports numba, so ``harness.compute.metrics`` imports it only when a difference is computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numba
import numpy as np
import numpy.typing as npt
from numba import types
from numba.core.typing.templates import Signature
from numba.extending import intrinsic

# The annotations are for readers and mypy only: numba types the compiled functions from their arguments.
F32 = npt.NDArray[np.float32]
I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


class RowOutputs(NamedTuple):
    """The per-row outputs :func:`row_stats` fills, handed down as one value (a named tuple: what a compiled
    function takes whole; a dataclass it does not): the largest ``|x - y|`` as float32 bits, the sum of
    ``|x - y|``, the largest ULP distance, the non-finite elements and the elements whose bits differ."""

    top_bits: I32
    sum_abs: F64
    max_ulp: I64
    non_finite: I64
    differing: I64


# Reassociation lets the float64 sum vectorise; nothing here depends on a NaN-aware compare.
_FAST = {"reassoc", "nsz", "contract"}
_SEGMENT = 1 << 24  # per-row int32 counters stay exact: a row is walked in segments of this size
_EXP = 0x7F800000  # exponent bits all set: Inf or NaN


@intrinsic
def _bits(typingctx: object, x: types.Type) -> tuple[Signature, Callable[..., Any]] | None:
    """float32 -> its int32 bit pattern (a register reinterpretation, no memory round trip)."""
    if x != types.float32:
        return None

    # llvmlite (the builder, the values) has no type information: Any
    def codegen(context: Any, builder: Any, signature: Signature, args: Sequence[Any]) -> Any:
        return builder.bitcast(args[0], context.get_value_type(types.int32))

    return types.int32(types.float32), codegen


@numba.njit(nogil=True, boundscheck=False, fastmath=_FAST, cache=True)
def _fast_segment(x: F32, y: F32, xi: I32, yi: I32) -> tuple[np.int32, np.int32, np.int32, np.int32, float]:
    """(max |int32 bit diff|, bits differing, max bits of |x - y|, OR of sign xors, sum |x - y|)."""
    ulp = np.int32(0)
    count = np.int32(0)
    top = np.int32(0)
    signs = np.int32(0)
    total = 0.0
    for j in range(xi.shape[0]):
        a = xi[j]
        b = yi[j]
        u = np.int32(a - b)
        signs |= np.int32(a ^ b)
        count += np.int32(u != 0)
        ulp = max(ulp, np.int32(abs(u)))
        d = abs(x[j] - y[j])
        top = max(top, _bits(d))  # type: ignore[call-arg]  # numba passes typingctx itself when compiling
        total += np.float64(d)
    return ulp, count, top, signs, total


@numba.njit(nogil=True, boundscheck=False, fastmath=_FAST, cache=True)
def _exact_segment(x: F32, y: F32, xi: I32, yi: I32) -> tuple[np.int64, np.int64, np.int32, float]:
    """(max ULP int64, non-finite elements, max bits of |x - y|, sum |x - y|) over finite pairs.

    Branch-free (selects), so it vectorises like the fast loop.
    """
    ulp = np.int64(0)
    non_finite = np.int64(0)
    top = np.int32(0)
    total = 0.0
    for j in range(xi.shape[0]):
        a = np.int64(xi[j])
        b = np.int64(yi[j])
        bad = ((a & _EXP) == _EXP) | ((b & _EXP) == _EXP)
        non_finite += np.int64(bad)
        oa = a if a >= 0 else -(a & 0x7FFFFFFF)  # ordered line: +0 and -0 both 0
        ob = b if b >= 0 else -(b & 0x7FFFFFFF)
        ulp = max(ulp, np.int64(0) if bad else abs(oa - ob))
        d = abs(x[j] - y[j])
        d = np.float32(0.0) if bad else d
        top = max(top, _bits(d))  # type: ignore[call-arg]  # numba passes typingctx itself when compiling
        total += np.float64(d)
    return ulp, non_finite, top, total


@numba.njit(nogil=True, boundscheck=False, cache=True)
def row_stats(x: F32, y: F32, xi: I32, yi: I32, out: RowOutputs) -> None:
    """Fill the per-row outputs ``out`` for 2-D C-contiguous float32 ``x``, ``y`` (``xi``, ``yi``: int32 views)."""
    top_bits, sum_abs, max_ulp, non_finite, differing = out
    rows, n = x.shape
    for r in range(rows):
        ulp = np.int64(0)
        count = np.int64(0)
        top = np.int32(0)
        signs = np.int32(0)
        total = 0.0
        for s in range(0, n, _SEGMENT):
            e = min(n, s + _SEGMENT)
            su, sc, st, ss, sm = _fast_segment(x[r, s:e], y[r, s:e], xi[r, s:e], yi[r, s:e])
            ulp = max(ulp, np.int64(su))
            count += sc
            top = max(top, st)
            signs |= ss
            total += sm
        differing[r] = count
        if signs < 0 or top >= _EXP:  # a sign differs, or |x - y| is not finite (equal Inf/NaN too)
            ulp = np.int64(0)
            nf = np.int64(0)
            top = np.int32(0)
            total = 0.0
            for s in range(0, n, _SEGMENT):
                e = min(n, s + _SEGMENT)
                xu, xn, xt, xm = _exact_segment(x[r, s:e], y[r, s:e], xi[r, s:e], yi[r, s:e])
                ulp = max(ulp, xu)
                nf += xn
                top = max(top, xt)
                total += xm
            non_finite[r] = nf
        top_bits[r] = top
        sum_abs[r] = total
        max_ulp[r] = ulp


_TOP_CHUNK = 4096  # frames whose running top-two state stays in L1 while the columns stream by


@numba.njit(nogil=True, boundscheck=False, cache=True)
def top_two(frames: F32, argmax: I64, margin: F32) -> None:
    """Per row of float32 ``frames`` [n, C]: first index of the max (strict ``>``) and top1 - top2.

    The same recurrence as the numpy version it replaces, NaN included (what NaN gives is that
    recurrence's result, see :func:`harness.compute.metrics.top_two`; goldens hold no NaN). Column by column over
    chunks of frames (each column gathered into a contiguous buffer first), branch-free, so
    the inner loop vectorises: argmax is data-dependent, and branches on it would be
    mispredicted about half the time.
    """
    n, classes = frames.shape
    inf = np.float32(np.inf)
    nan = np.float32(np.nan)
    m1 = np.empty(_TOP_CHUNK, np.float32)
    m2 = np.empty(_TOP_CHUNK, np.float32)
    col = np.empty(_TOP_CHUNK, np.float32)
    best = np.empty(_TOP_CHUNK, np.int64)
    for s in range(0, n, _TOP_CHUNK):
        k = min(n, s + _TOP_CHUNK) - s
        block = frames[s : s + k]
        for i in range(k):
            m1[i] = block[i, 0]
            m2[i] = -inf
            best[i] = 0
        for c in range(1, classes):
            for i in range(k):
                col[i] = block[i, c]
            for i in range(k):
                v = col[i]
                top = m1[i]
                second = m2[i]
                better = v > top
                runner = v if v > second else second
                runner = nan if (v != v) | (second != second) else runner
                m2[i] = top if better else runner
                m1[i] = v if better else top
                best[i] = c if better else best[i]
        for i in range(k):
            argmax[s + i] = best[i]
            margin[s + i] = m1[i] - m2[i]
