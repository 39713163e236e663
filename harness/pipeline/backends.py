"""Building what runs requests: the model in-process, or a Triton server's URL; and the packer."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.base.errors import HarnessError
from harness.data.geometry import Geometry, geometry_of
from harness.data.schemas.config_file import ConfigFile
from harness.packers import packer_from_options
from harness.packers.packing import HARNESS_PACKER, Packer
from lanes.backends.backend import InProcessBackend
from lanes.backends.triton.url import parse_triton_url
from lanes.models.diar_nn_g.config import CONFIGS
from lanes.models.model_api import load_model as load
from lanes.models.model_contract import refuse_broken_model

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend
    from lanes.models.model_api import Model

IN_PROCESS = ("in-process", "inprocess", "local")


def load_model(config: ConfigFile, device: str | None = None) -> Model:
    """The configured model on ``device`` (default: the configured device), refused (one line naming the spec and
    the part it breaks: :func:`lanes.models.model_contract.refuse_broken_model`) when its description breaks the
    contract, before any work: every command that builds the model in this process builds it here."""

    model = load(config.model.spec, seed=config.model.seed, device=device or config.release.device)
    refuse_broken_model(model, config.model.spec)
    return model


@dataclass(frozen=True)
class BackendChoice:
    """What runs requests, as the command line says: ``url`` 'in-process' or a Triton server's URL;
    ``concurrency`` (Triton; default 2, as the engine keeps two requests in flight), ``shm`` (Triton on
    this host: tensors through system shared memory), ``model_label`` (a Triton model without
    MODEL_INFO, whose weights cannot be verified remotely: the name of what it serves)."""

    url: str = "in-process"
    concurrency: int | None = None
    shm: bool = False
    model_label: str | None = None

    @classmethod
    def of(cls, config: ConfigFile) -> BackendChoice:
        """The configuration's ``[backend]`` (``--backend`` and the hidden Triton flags merged in)."""
        b = config.backend
        return cls(b.url, b.concurrency, b.shm, b.model_label)


def make_backend(
    config: ConfigFile,
    choice: BackendChoice | str = "in-process",
    device: str | None = None,
    triton_timeout_s: float = 120.0,
    triton_max_request_mb: float = 64.0,
) -> Backend:
    choice = BackendChoice(choice) if isinstance(choice, str) else choice
    backend = choice.url
    device = device or config.release.device
    if backend in IN_PROCESS:
        for option, given in (
            ("backend.concurrency", choice.concurrency not in (None, 1)),
            ("backend.shm", choice.shm),
            ("backend.model_label", choice.model_label is not None),
        ):
            if given:
                raise HarnessError(
                    f"{option}: applies to a Triton backend (--backend http://host:port), not to the in-process one"
                )
        return InProcessBackend(load_model(config, device), config.numerics, device)
    if backend.startswith(("http://", "https://")):
        parse_triton_url(backend)  # bad input in words, before tritonclient is imported (lanes.backends.triton.url)
        try:
            from lanes.backends.triton.triton_backend import (  # deferred: imports gevent, tritonclient (start-up)
                DEFAULT_CONCURRENCY,
                CallPolicy,
                TritonBackend,
            )
        except ImportError as exc:
            raise HarnessError(
                f"--backend {backend}: the Triton lane needs tritonclient[http] "
                f"(pip install 'diar-lane-harness[triton]'): {exc}"
            ) from None
        policy = CallPolicy(timeout_s=triton_timeout_s, max_request_bytes=int(triton_max_request_mb * 2**20))
        be = TritonBackend(
            backend,
            policy=policy,
            concurrency=DEFAULT_CONCURRENCY if choice.concurrency is None else choice.concurrency,
            shm=choice.shm,
            model_label=choice.model_label,
            geometry=lambda: model_geometry(config),
        )
        if not be.weights_verified:
            print(
                f"harness: warning: {backend} model {be.model_name!r} (label {be.model_label!r}): its weights cannot "
                "be verified remotely (no MODEL_INFO output); results name the label, the server's config and "
                "version(s) only",
                file=sys.stderr,
                flush=True,
            )
        return be
    raise HarnessError(f"--backend {backend!r}: expected 'in-process' or a Triton URL like http://127.0.0.1:8000")


def make_packer(packer_cmd: str | None, packer: str | None, geometry: Geometry, digest: str | None = None) -> Packer:
    """The packer the fast lane uses (and unpacks with): the harness's own unless the engine's is named,
    as a process speaking the wire protocol (``--packer-cmd``) or a Python callable (``--packer``).
    The caller closes it."""
    if packer_cmd is None and (packer is None or packer == "harness") and digest is None:
        return HARNESS_PACKER

    return packer_from_options(packer_cmd, packer, geometry, digest=digest)


def model_geometry(config: ConfigFile) -> Geometry:
    """The configured model's geometry; the reference model's is known without building it."""

    if config.model.spec in CONFIGS:
        return CONFIGS[config.model.spec].geometry()
    return geometry_of(load_model(config, "cpu"))
