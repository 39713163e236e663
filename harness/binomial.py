"""The 95 % upper confidence bound of a rate: how sure a corpus lets us be.

Exact (Clopper-Pearson, one-sided) binomial bound: the rate p at which seeing ``failures``
or fewer in ``n`` trials has probability ``alpha``. With no failure it is ``3/n`` (the rule
of three, as the release config states), so a corpus of n frames can promote a shape only
if 3/n is within the allowed rate. Pure numpy (log-space binomial CDF, bisection): no SciPy.
"""

from __future__ import annotations

import math

import numpy as np


def upper_bound(failures: int, n: int, confidence: float = 0.95) -> float:
    if n <= 0:
        return 1.0
    if failures < 0 or failures > n:
        raise ValueError(f"failures={failures} outside 0..{n}")
    if failures == 0:
        return min(1.0, 3.0 / n)
    if failures == n:
        return 1.0
    alpha = 1.0 - confidence
    lo, hi = failures / n, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if _cdf(failures, n, mid) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return hi


def _cdf(x: int, n: int, p: float) -> float:
    """P(X <= x) for X ~ Binomial(n, p), summed in log space."""
    k = np.arange(x + 1, dtype=np.float64)
    log_terms = (math.lgamma(n + 1) - _lgamma(k + 1) - _lgamma(n - k + 1)
                 + k * math.log(p) + (n - k) * math.log1p(-p))
    top = log_terms.max()
    return float(math.exp(top) * np.exp(log_terms - top).sum())


def _lgamma(values: np.ndarray) -> np.ndarray:
    return np.array([math.lgamma(v) for v in values]) if values.size < 64 else _lgamma_vec(values)


def _lgamma_vec(values: np.ndarray) -> np.ndarray:
    # Stirling series with recurrence shift: accurate to ~1e-12 for the arguments used here.
    v = values.astype(np.float64)
    shift = np.zeros_like(v)
    small = v < 8
    while small.any():
        shift[small] -= np.log(v[small])
        v[small] += 1
        small = v < 8
    inv = 1.0 / v
    inv2 = inv * inv
    series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680)))
    return shift + (v - 0.5) * np.log(v) - v + 0.5 * math.log(2 * math.pi) + series
