"""``[numerics]``: the process-wide torch flags that change a network's output bits, as the configuration and
every manifest hold them, and how they are set (:meth:`NumericSettings.apply`; torch's only once torch is
imported, :func:`torch_loaded`). What was in force is read by :mod:`harness.numerics`."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.data.errors import ConfigError


class NumericSettings(BaseModel):
    """``[numerics]``: set before every call, recorded with every result.

    ``threads = 0`` means one per CPU the process may use (``os.sched_getaffinity``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    threads: Annotated[int, Field(ge=0, le=4096)] = Field(
        default=0, description="torch intra-op threads; 0 = one per CPU"
    )
    mkldnn: bool = Field(default=True, description="false: CPU convolutions through NNPACK (a real non-bitwise case)")
    cudnn_benchmark: bool = Field(default=False, description="cuDNN autotuning (picks kernels per shape)")
    cudnn_deterministic: bool = Field(default=True, description="deterministic cuDNN kernels only")
    deterministic_algorithms: bool = Field(default=True, description="torch.use_deterministic_algorithms")
    allow_tf32: bool = Field(default=False, description="TF32 for matmul and cuDNN")
    matmul_precision: Literal["highest", "high", "medium"] = Field(
        default="highest", description="float32 matmul precision"
    )

    def resolved_threads(self) -> int:
        if self.threads:
            return self.threads
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            return os.cpu_count() or 1

    def apply(self) -> None:
        """Set every flag, whatever the process had before; torch's only when torch is imported.

        A process without torch runs no torch network, and importing torch to set flags nothing
        reads costs seconds. The backend applies these before every call, so a plug-in that
        imports torch inside its first ``infer`` has them from the next call on (the lanes' first
        call of every lane is an untimed warm-up whose answer is not kept: ``RunPlan.warmup``).
        Whoever loads a model applies them again once it is built (its factory may be what imports
        torch): the in-process backend's ``__init__`` and the Triton backend's ``model.py`` do, so the
        first call and the recorded ``in_force`` have them (tests/test_numerics_order.py)."""
        if self.deterministic_algorithms:
            # cuBLAS needs this before its first handle is created to be deterministic (any cuBLAS user).
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        if not torch_loaded():
            return
        import torch

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

        from harness.data.schemas import (  # deferred: imports a lazy attribute of harness.data.schemas (start-up)
            describe_error,
        )

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"numerics: {describe_error(exc)}") from None


def torch_loaded() -> bool:
    """Whether this process has imported torch (a torch model is built, or a plug-in imported it)."""
    return "torch" in sys.modules
