"""Building the backend a command asked for: the model in-process, or a Triton server's URL."""

from __future__ import annotations

from harness.config import ReleaseConfig
from harness.errors import HarnessError
from lanes.backend import Backend, InProcessBackend

IN_PROCESS = ("in-process", "inprocess", "local")


def make_backend(config: ReleaseConfig, backend: str = "in-process", device: str | None = None,
                 triton_timeout_s: float = 120.0, triton_max_request_mb: float = 64.0) -> Backend:
    device = device or config.device
    if backend in IN_PROCESS:
        return InProcessBackend(config.model.load(device), config.numerics, device)
    if backend.startswith(("http://", "https://")) or ":" in backend:
        try:
            from lanes.triton.backend import TritonBackend
        except ImportError as exc:
            raise HarnessError(f"--backend {backend}: the Triton lane needs tritonclient[http] "
                               f"(pip install 'diar-lane-harness[triton]'): {exc}") from None
        return TritonBackend(backend, timeout_s=triton_timeout_s, max_request_bytes=int(triton_max_request_mb * 2**20))
    raise HarnessError(f"--backend {backend!r}: expected 'in-process' or a Triton URL like http://127.0.0.1:8000")
