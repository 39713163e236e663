"""Numeric settings: the process-wide torch flags that change a network's output bits.

The lanes set every one of these from the release configuration before a network runs,
and the golden manifest records what was in force, so that a golden never depends on a
flag inherited by accident from the environment (a CI image with TF32 on, a different
thread count, oneDNN off).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

import torch

from harness.errors import ConfigError

_PRECISIONS = ("highest", "high", "medium")


@dataclass(frozen=True)
class NumericSettings:
    """``threads = 0`` means one per CPU the process may use (``os.sched_getaffinity``)."""

    threads: int = 0
    mkldnn: bool = True
    cudnn_benchmark: bool = False
    cudnn_deterministic: bool = True
    deterministic_algorithms: bool = True
    allow_tf32: bool = False
    matmul_precision: str = "highest"

    def __post_init__(self) -> None:
        if not isinstance(self.threads, int) or isinstance(self.threads, bool) or self.threads < 0:
            raise ConfigError(f"numerics.threads: expected an integer >= 0, got {self.threads!r}")
        if self.matmul_precision not in _PRECISIONS:
            raise ConfigError(f"numerics.matmul_precision: expected one of {_PRECISIONS}, "
                              f"got {self.matmul_precision!r}")

    def resolved_threads(self) -> int:
        if self.threads:
            return self.threads
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            return os.cpu_count() or 1

    def apply(self) -> None:
        """Set every flag, whatever the process had before."""
        if self.deterministic_algorithms:
            # cuBLAS needs this before its first handle is created to be deterministic.
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.set_num_threads(self.resolved_threads())
        torch.backends.mkldnn.enabled = self.mkldnn
        torch.backends.cudnn.benchmark = self.cudnn_benchmark
        torch.backends.cudnn.deterministic = self.cudnn_deterministic
        torch.use_deterministic_algorithms(self.deterministic_algorithms)
        torch.backends.cuda.matmul.allow_tf32 = self.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allow_tf32
        torch.set_float32_matmul_precision(self.matmul_precision)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> NumericSettings:
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(f"numerics.{unknown[0]}: unknown key (known: {sorted(cls.__dataclass_fields__)})")
        return cls(**data)


def in_force() -> dict:
    """What torch actually has now (recorded in manifests next to the requested settings)."""
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
