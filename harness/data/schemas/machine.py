"""What a file records of the machine a golden or a run was made on: the backend, the environment, the
numeric settings requested and those in force."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

from harness.data.schemas.base import (
    Count,
    Open,
    OptionalKeys,
    Positive,
    Strict,
)


@with_config(ConfigDict(extra="allow", strict=True))
class InForce(TypedDict, total=False):
    """``numerics.in_force``: what was in force when the model ran (``harness.numerics.in_force``); the
    keys in ``PROFILE_KEYS`` make the numerics profile. A plain JSON object (read by key); a manifest
    recorded before a key existed lacks it (and so is another profile); other keys are kept."""

    threads: Annotated[int, Field(description="torch intra-op threads")]
    mkldnn: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    deterministic_algorithms: bool
    matmul_allow_tf32: bool
    cudnn_allow_tf32: bool
    matmul_precision: str
    cublas_workspace_config: Annotated[
        str | None, Field(description="CUBLAS_WORKSPACE_CONFIG (None: unset); part of the numerics profile")
    ]
    autocast_dtype: Annotated[
        str | None, Field(description="the dtype the model declares it runs torch.autocast with (None: no autocast)")
    ]
    torch_compile: Annotated[bool, Field(description="the model declares it runs through torch.compile")]
    cuda_graphs: Annotated[bool, Field(description="the model declares it replays captured CUDA graphs")]
    cudnn_version: Annotated[int | None, Field(description="cuDNN's version on a CUDA device (None on CPU)")]
    cublas_version: Annotated[
        str | None, Field(description="cuBLAS's version on a CUDA device (None on CPU, or when it cannot be read)")
    ]
    driver_version: Annotated[str | None, Field(description="the NVIDIA driver's version (None on CPU)")]
    compute_capability: Annotated[
        str | None, Field(pattern=r"^[0-9]+\.[0-9]+$", description="the GPU's compute capability, '9.0' (None on CPU)")
    ]
    torch_loaded: Annotated[
        bool,
        Field(
            description=(
                "present only as false: the model is not a torch network and the process never imported torch, so "
                "torch's flags (threads to matmul_precision) were in force nowhere and are absent (harness.numerics)"
            )
        ),
    ]


class NumericsRequested(OptionalKeys, Open):
    """``numerics.requested``: the release configuration's ``[numerics]`` settings as recorded
    (``harness.data.numeric_settings.NumericSettings``). A key is absent from a manifest recorded before the
    setting existed (and stays absent when the manifest is written again); other keys are kept."""

    optional_keys: ClassVar[frozenset[str]] = frozenset(
        {
            "threads",
            "mkldnn",
            "cudnn_benchmark",
            "cudnn_deterministic",
            "deterministic_algorithms",
            "allow_tf32",
            "matmul_precision",
        }
    )

    threads: Count | None = Field(None, description="torch intra-op threads; 0 = one per CPU")
    mkldnn: bool | None = Field(None, description="false: CPU convolutions through NNPACK")
    cudnn_benchmark: bool | None = Field(None, description="cuDNN autotuning (picks kernels per shape)")
    cudnn_deterministic: bool | None = Field(None, description="deterministic cuDNN kernels only")
    deterministic_algorithms: bool | None = Field(None, description="torch.use_deterministic_algorithms")
    allow_tf32: bool | None = Field(None, description="TF32 for matmul and cuDNN")
    matmul_precision: str | None = Field(None, description="float32 matmul precision: highest, high or medium")


class NumericsRecord(Strict):
    requested: NumericsRequested | None = Field(description="the release configuration's numeric settings")
    in_force: InForce = Field(
        description=(
            "what was in force when the model ran: torch's flags, CUBLAS_WORKSPACE_CONFIG, the model's declared "
            "autocast dtype / torch.compile / CUDA graphs and, on CUDA, the cuDNN, cuBLAS and driver versions and "
            "the compute capability (None/False on CPU); each key is typed in the JSON Schema (InForce)"
        )
    )


class EnvironmentModel(OptionalKeys, Open):
    optional_keys: ClassVar[frozenset[str]] = frozenset({"cuda", "cudnn", "driver", "compute_capability"})

    device_name: str = Field(description="'cpu' or the GPU's name")
    cuda: str | None = Field(None, description="torch's CUDA version (None: a CPU build)")
    cudnn: int | None = Field(None, description="the cuDNN torch carries (None: none)")
    driver: str | None = Field(None, description="the NVIDIA driver (None on CPU)")
    compute_capability: str | None = Field(
        None, description="the GPU's compute capability, on CUDA only (also in numerics.in_force)"
    )


class BackendRecord(OptionalKeys, Open):
    """``backend`` of a golden or run manifest: the backend's own description (``Backend.environment()`` less its
    model and environment). Each key is absent where the backend does not write it (in-process: no server; a
    manifest recorded before the key existed); a plug-in backend's own keys, and the numeric settings as the
    backend reports them (typed in ``numerics``), are kept as written."""

    optional_keys: ClassVar[frozenset[str]] = frozenset(
        {
            "backend",
            "device",
            "device_kind",
            "calls_in_flight",
            "url",
            "transport",
            "concurrency",
            "server_version",
            "model_name",
            "weights_verified",
        }
    )

    backend: str = Field("in-process", description="'in-process' (the model in the harness's process) or 'triton'")
    device: str | None = Field(None, description="the device the model ran on ('cpu', 'cuda:0'; a server's)")
    device_kind: str | None = Field(None, description="the kind of that device (the ledger's device key)")
    calls_in_flight: Positive | None = Field(None, description="in-process: calls inside the model at once")
    url: str | None = Field(None, description="the Triton server's URL (absent in-process)")
    transport: Literal["http", "shm"] | None = Field(
        None, description="how tensors travel to the server: http or shm (system shared memory)"
    )
    concurrency: Positive | None = Field(None, description="requests in flight at once (a server's)")
    server_version: str | None = Field(None, description="the Triton server's version")
    model_name: str | None = Field(None, description="the model's name on the server")
    weights_verified: bool | None = Field(
        None, description="the server's model reports its fingerprint (False: a label only)"
    )
