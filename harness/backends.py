"""Building the backend a command asked for: the model in-process, or a Triton server's URL."""

from __future__ import annotations

import sys
from collections.abc import Callable

from harness.config import ReleaseConfig
from harness.errors import HarnessError
from harness.geometry import Geometry
from lanes.backend import Backend, InProcessBackend

IN_PROCESS = ("in-process", "inprocess", "local")


def make_backend(config: ReleaseConfig, backend: str = "in-process", device: str | None = None,
                 triton_timeout_s: float = 120.0, triton_max_request_mb: float = 64.0, *,
                 concurrency: int | None = None, shm: bool = False, model_label: str | None = None,
                 geometry: Geometry | None = None) -> Backend:
    """``concurrency`` (Triton only; default 2), ``shm`` (Triton on this host) and ``model_label``
    (a Triton model without MODEL_INFO) are refused for the in-process backend, where they mean
    nothing. ``geometry`` is used only for a Triton model without MODEL_INFO; by default it is the
    configured model spec's (for the reference specs without building any weights)."""
    device = device or config.device
    if backend in IN_PROCESS:
        for option, value in (("--concurrency", concurrency not in (None, 1)), ("--shm", shm),
                              ("--model-label", model_label is not None)):
            if value:
                raise HarnessError(f"{option}: applies to a Triton backend (--backend http://host:port), "
                                   "not to the in-process one")
        return InProcessBackend(config.model.load(device), config.numerics, device)
    if backend.startswith(("http://", "https://")) or ":" in backend:
        try:
            from lanes.triton.backend import DEFAULT_CONCURRENCY, TritonBackend
        except ImportError as exc:
            raise HarnessError(f"--backend {backend}: the Triton lane needs tritonclient[http] "
                               f"(pip install 'diar-lane-harness[triton]'): {exc}") from None
        if concurrency is not None and concurrency < 1:
            raise HarnessError(f"--concurrency {concurrency}: expected a whole number >= 1")
        be = TritonBackend(backend, timeout_s=triton_timeout_s, max_request_bytes=int(triton_max_request_mb * 2**20),
                           concurrency=DEFAULT_CONCURRENCY if concurrency is None else concurrency, shm=shm,
                           model_label=model_label, geometry=geometry or spec_geometry(config))
        if not be.weights_verified:
            print(f"harness: warning: {backend} model {be.model_name!r} (label {be.model_label!r}): "
                  "its weights cannot be verified remotely (no MODEL_INFO output); results name the label, "
                  "the server's config and version(s) only", file=sys.stderr, flush=True)
        return be
    raise HarnessError(f"--backend {backend!r}: expected 'in-process' or a Triton URL like http://127.0.0.1:8000")


def spec_geometry(config: ReleaseConfig) -> Callable[[], Geometry]:
    """The configured model's geometry, computed only when asked: for the reference specs from
    their configuration (no weights built), for any other spec by loading the model on the CPU."""

    def geometry() -> Geometry:
        from lanes.diar_nn_g.config import CONFIGS

        if config.model.spec in CONFIGS:
            return CONFIGS[config.model.spec].geometry()
        return config.model.load("cpu").geometry

    return geometry
