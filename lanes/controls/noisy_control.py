"""A negative control for ``--repeats``: a packed path that does not give the same answer twice.

A nondeterministic kernel (an atomic add, an autotuned algorithm, a reduction split by timing) can
agree with the golden on the one night it ran and differ the next. This control is the null model
(batch-invariant by construction: packed and unpacked calls agree bitwise) with that defect on its
packed path: a request of more than one block is answered exactly the first ``exact`` times its
content is seen, and with tiny seeded noise (``scale``, ~1e-6: within the default tolerances, a
different draw every call) from then on. Single-block requests (the exact lane's) are never touched,
so the golden and its floor are bitwise.

``exact`` defaults to 2 because a plain lane's first request is sent twice by the old evidence (the
untimed warm-up call, then the lane's own): with one run per shape the control is promoted even in
bitwise mode, as the defect it stands for would be; its repeats (``k4.r2``, ``k4.r3``) see the noise.
Spec: ``--model lanes.controls.noisy_control:small`` (or ``...:small?exact=1&scale=1e-5``).

``one_in_three`` is the same defect as it is met in practice: the null model whose packed calls get
``+offset`` (1e-6) on every output, one call in three at random (a seeded draw per call, whatever the
request): within every tolerance, so in ``tolerance`` mode it is promoted with warnings; in ``bitwise``
mode its slots, duplicates and repeats all differ, and with ``--repeats`` the refusal's cause is "not
reproducible", not a slot dependence.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from harness.data import ops
from lanes.models.null_model import NullModel, _config_geometry


class NoisyPackedModel(NullModel):
    """The null model whose packed answers carry fresh noise from the ``exact + 1``-th time a request is seen."""

    concurrent_calls = False  # which call of a request is its n-th depends on the calls' order: one at a time

    def __init__(self, label: str, seed: int, exact: int, scale: float) -> None:
        super().__init__(_config_geometry(label), label, seed)
        self.exact, self.scale = int(exact), float(scale)
        self.seen: dict[str, int] = {}  # request digest -> times answered
        self.fingerprint = hashlib.sha256(
            f"{self.fingerprint}|control:noisy-packed|{exact}|{scale}".encode()
        ).hexdigest()
        self.name = f"{self.name}-control-noisy-packed"

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().infer(request)
        windows = int(np.asarray(request[ops.OFFSETS]).shape[0])
        if windows <= self.geometry.windows_per_block:
            return out  # one block: the release's shape, deterministic
        digest = hashlib.sha256(
            b"".join(np.ascontiguousarray(request[name]).tobytes() for name in sorted(request))
        ).hexdigest()
        times = self.seen[digest] = self.seen.get(digest, 0) + 1
        if times <= self.exact:
            return out
        rng = np.random.RandomState([self.seed, int(digest[:8], 16), times])
        noisy = {}
        for name, value in out.items():
            noise = rng.standard_normal(value.shape) * self.scale
            noisy[name] = (value + noise).astype(np.float32)
        return noisy


def small(seed: int = 0, device: str = "cpu", exact: int = 2, scale: float = 1e-6) -> NoisyPackedModel:
    """The control at the small test geometry."""
    return NoisyPackedModel("small", seed, exact, scale)


def full(seed: int = 0, device: str = "cpu", exact: int = 2, scale: float = 1e-6) -> NoisyPackedModel:
    """The control at the reference model's full geometry."""
    return NoisyPackedModel("full", seed, exact, scale)


class RandomNudgeModel(NullModel):
    """The null model whose packed calls get ``+offset`` on every output with probability ``rate`` (a seeded
    draw per call)."""

    concurrent_calls = False  # which call gets which draw depends on the calls' order: one at a time

    def __init__(self, label: str, seed: int, rate: float, offset: float) -> None:
        super().__init__(_config_geometry(label), label, seed)
        self.rate, self.offset = float(rate), float(offset)
        self.draws = np.random.RandomState([self.seed, 3])
        self.fingerprint = hashlib.sha256(
            f"{self.fingerprint}|control:random-nudge|{rate}|{offset}".encode()
        ).hexdigest()
        self.name = f"{self.name}-control-random-nudge"

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = super().infer(request)
        if int(np.asarray(request[ops.OFFSETS]).shape[0]) <= self.geometry.windows_per_block:
            return out  # one block: the release's shape, deterministic
        if self.draws.uniform() >= self.rate:
            return out
        return {name: (value + np.float32(self.offset)).astype(np.float32) for name, value in out.items()}


def one_in_three(
    seed: int = 0, device: str = "cpu", label: str = "small", rate: float = 1 / 3, offset: float = 1e-6
) -> RandomNudgeModel:
    """One packed call in three, at random, answered ``+offset`` (module doc)."""
    return RandomNudgeModel(label, seed, rate, offset)
