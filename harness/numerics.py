"""Numeric settings: the process-wide torch flags that change a network's output bits.

The lanes set every one of these from the release configuration before a network runs,
and the golden manifest records what was in force, so that a golden never depends on a
flag inherited by accident from the environment (a CI image with TF32 on, a different
thread count, oneDNN off).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.data.errors import ConfigError


class NumericSettings(BaseModel):
    """``[numerics]``: set before every call, recorded with every result.

    ``threads = 0`` means one per CPU the process may use (``os.sched_getaffinity``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    threads: Annotated[int, Field(ge=0, le=4096)] = Field(
        default=0, description="torch intra-op threads; 0 = one per CPU")
    mkldnn: bool = Field(default=True, description="false: CPU convolutions through NNPACK (a real non-bitwise case)")
    cudnn_benchmark: bool = Field(default=False, description="cuDNN autotuning (picks kernels per shape)")
    cudnn_deterministic: bool = Field(default=True, description="deterministic cuDNN kernels only")
    deterministic_algorithms: bool = Field(default=True, description="torch.use_deterministic_algorithms")
    allow_tf32: bool = Field(default=False, description="TF32 for matmul and cuDNN")
    matmul_precision: Literal["highest", "high", "medium"] = Field(
        default="highest", description="float32 matmul precision")

    def resolved_threads(self) -> int:
        if self.threads:
            return self.threads
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            return os.cpu_count() or 1

    def apply(self) -> None:
        """Set every flag, whatever the process had before."""
        import torch

        if self.deterministic_algorithms:
            # cuBLAS needs this before its first handle is created to be deterministic.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.set_num_threads(self.resolved_threads())
        # torch swaps this module's class at import: ``enabled`` is a ContextProp descriptor taking a bool
        torch.backends.mkldnn.enabled = self.mkldnn  # type: ignore[assignment]
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.backends.cudnn.deterministic = self.cudnn_deterministic
        torch.use_deterministic_algorithms(self.deterministic_algorithms)
        torch.backends.cuda.matmul.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allow_tf32
        torch.set_float32_matmul_precision(self.matmul_precision)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NumericSettings:
        from pydantic import ValidationError

        from harness.data.schemas import describe_error

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"numerics: {describe_error(exc)}") from None


def in_force() -> dict[str, Any]:
    """What torch actually has now (recorded in manifests next to the requested settings)."""
    import torch

    return {
        "threads": torch.get_num_threads(),
        "mkldnn": bool(torch.backends.mkldnn.enabled),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
