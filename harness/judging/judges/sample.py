"""A fixed-size, seeded sample of a stream of values (for the error-distribution plots).

Every value gets a pseudo-random key from a seeded generator; the sample keeps the values with the
smallest keys. It is deterministic for a given order of values, never holds more than ``size``
values, and is exact (every value) while the stream is shorter than ``size``.
"""

from __future__ import annotations

import numpy as np


class Sample:
    def __init__(self, size: int = 20_000, seed: int = 0) -> None:
        self.size = size
        self._rng = np.random.RandomState(seed)
        self._keys = np.zeros(0)
        self._values = np.zeros(0)

    def add(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if values.size == 0:
            return
        keys = self._rng.random_sample(values.size)
        keys_all = np.concatenate([self._keys, keys])
        values_all = np.concatenate([self._values, values])
        if keys_all.size > self.size:
            keep = np.argpartition(keys_all, self.size - 1)[: self.size]
            keys_all, values_all = keys_all[keep], values_all[keep]
        self._keys, self._values = keys_all, values_all

    def values(self) -> list[float | None]:
        """Sorted ascending; non-finite values (NaN/Inf) as None, last."""
        v = np.sort(self._values)
        out: list[float | None] = v.tolist()
        for i in np.flatnonzero(~np.isfinite(v)).tolist():
            out[i] = None
        return out
