"""Building what runs requests: the model in-process, or a Triton server's URL; and the packer."""

from __future__ import annotations

from harness.config import ReleaseConfig
from harness.errors import HarnessError
from harness.packing import HARNESS_PACKER, Packer

IN_PROCESS = ("in-process", "inprocess", "local")


def load_model(config: ReleaseConfig, device: str | None = None):
    """The configured model on ``device`` (default: the configured device)."""
    from lanes.model_api import load_model as load

    return load(config.model.spec, seed=config.model.seed, device=device or config.device)


def make_backend(config: ReleaseConfig, backend: str = "in-process", device: str | None = None,
                 triton_timeout_s: float = 120.0, triton_max_request_mb: float = 64.0):
    device = device or config.device
    if backend in IN_PROCESS:
        from lanes.backend import InProcessBackend

        return InProcessBackend(load_model(config, device), config.numerics, device)
    if backend.startswith(("http://", "https://")):
        try:
            from lanes.triton.backend import TritonBackend
        except ImportError as exc:
            raise HarnessError(f"--backend {backend}: the Triton lane needs tritonclient[http] "
                               f"(pip install 'diar-lane-harness[triton]'): {exc}") from None
        return TritonBackend(backend, timeout_s=triton_timeout_s, max_request_bytes=int(triton_max_request_mb * 2**20))
    raise HarnessError(f"--backend {backend!r}: expected 'in-process' or a Triton URL like http://127.0.0.1:8000")


def make_packer(packer_cmd: str | None, packer: str | None, geometry) -> Packer:
    """The packer the fast lane uses (and unpacks with): the harness's own unless the engine's is named,
    as a process speaking the wire protocol (``--packer-cmd``) or a Python callable (``--packer``).
    The caller closes it."""
    if packer_cmd is None and (packer is None or packer == "harness"):
        return HARNESS_PACKER
    from harness.packers import packer_from_options

    return packer_from_options(packer_cmd, packer, geometry)


def model_geometry(config: ReleaseConfig):
    """The configured model's geometry; the reference model's is known without building it."""
    from lanes.diar_nn_g.config import CONFIGS

    if config.model.spec in CONFIGS:
        return CONFIGS[config.model.spec].geometry()
    return load_model(config, "cpu").geometry
