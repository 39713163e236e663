"""``[numerics]``: the process-wide torch flags that change a network's output bits, as the configuration and
every manifest hold them, and how they are set for a scope and given back after it (:meth:`NumericSettings.applied`;
torch's only once torch is imported, :func:`torch_loaded`). What was in force is read by :mod:`harness.numerics`."""

from __future__ import annotations

import os
from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from harness.base.errors import ConfigError
from harness.host.numerics_scope import NumericsScope
from harness.host.torch_state import torch_loaded


class NumericSettingsRecord(TypedDict):
    """The settings as their JSON object (:meth:`NumericSettings.to_dict`), in the order a manifest records them."""

    threads: int
    mkldnn: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    deterministic_algorithms: bool
    allow_tf32: bool
    matmul_precision: Literal["highest", "high", "medium"]


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

    def applied(self) -> NumericsScope:
        """``with settings.applied() as scope:`` every setting in force until the block ends, then the
        process's own flags back, however the block ends (:mod:`harness.host.numerics_scope`); ``scope.apply()``
        sets them again inside it. The only way the harness sets torch's flags: nothing it runs in process
        leaves them changed.

        torch's flags are set only once torch is imported: a process without torch runs no torch network, and
        importing torch to set flags nothing reads costs seconds. A backend applies them around every call, so
        a plug-in that imports torch inside its first ``infer`` has them from the next call on (the lanes'
        first call of every lane is an untimed warm-up whose answer is not kept: ``RunPlan.warmup``).
        Whoever loads a model applies them again once it is built (its factory may be what imports torch):
        the Triton backend's ``model.py`` does, and the in-process backend applies them around every call and
        every reading of what is in force, so the first call and the recorded ``in_force`` have them
        (tests/test_numerics_order.py)."""
        return NumericsScope(self)

    def to_dict(self) -> NumericSettingsRecord:
        """The settings as their JSON object: what a manifest records and Triton's model is handed."""
        return {
            "threads": self.threads,
            "mkldnn": self.mkldnn,
            "cudnn_benchmark": self.cudnn_benchmark,
            "cudnn_deterministic": self.cudnn_deterministic,
            "deterministic_algorithms": self.deterministic_algorithms,
            "allow_tf32": self.allow_tf32,
            "matmul_precision": self.matmul_precision,
        }

    @classmethod
    def from_dict(cls, data: object) -> NumericSettings:
        """From their JSON object (Triton's model parameters), refused with one line naming what is wrong."""
        from pydantic import ValidationError

        from harness.data.schemas import (  # deferred: imports a lazy attribute of harness.data.schemas (start-up)
            describe_error,
        )

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"numerics: {describe_error(exc)}") from None


__all__ = ["NumericSettings", "NumericSettingsRecord", "torch_loaded"]
