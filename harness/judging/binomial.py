"""The 95 % upper confidence bound of a rate: how sure a corpus lets us be.

Exact one-sided Clopper-Pearson bound (``scipy.stats.beta.ppf``); with no failure it is ``3/n``
(the rule of three, as the release configuration states), so a corpus of n frames can promote a
shape only if 3/n is within the allowed rate. :func:`half_binomial_cdf` gives the speedup
median's interval (:mod:`harness.throughput.timing`) without importing scipy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def upper_bound(failures: int, n: int, confidence: float = 0.95) -> float:
    if n <= 0:
        return 1.0
    if failures < 0 or failures > n:
        raise ValueError(f"failures={failures} outside 0..{n}")
    if failures == 0:
        return min(1.0, 3.0 / n)
    if failures == n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(confidence, failures + 1, n - failures))


def needed_at_zero(allowed: float) -> int | None:
    """Units a corpus needs for 3/n to reach ``allowed`` when nothing fails."""
    if allowed <= 0:
        return None
    import math

    return int(math.ceil(3.0 / allowed))


def half_binomial_cdf(n: int) -> npt.NDArray[np.float64]:
    """P(Binomial(n, 1/2) <= k) for k = 0..n, in float64 (log-space binomial coefficients: no
    overflow for any n; no scipy, whose import costs a second per command)."""
    k = np.arange(n, dtype=np.float64)
    log_choose = np.concatenate([[0.0], np.cumsum(np.log((n - k) / (k + 1)))])  # log C(n, k)
    cdf: npt.NDArray[np.float64] = np.minimum(np.cumsum(np.exp(log_choose - n * np.log(2.0))), 1.0)
    return cdf
