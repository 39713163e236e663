"""Numeric settings: the process-wide torch flags that change a network's output bits.

The lanes set every one of these from the release configuration before a network runs,
and the golden manifest records what was in force, so that a golden never depends on a
flag inherited by accident from the environment (a CI image with TF32 on, a different
thread count, oneDNN off).

torch's flags are torch's process state, so they are set and read only once torch is imported
(:func:`torch_loaded`): a model that is not a torch network (the null model, the simulated
device, a plug-in without torch) never pays torch's start-up (2.5-3 s, and 3 s more for the
inductor config ``torch.use_deterministic_algorithms`` imports), and its manifests say that
torch's flags were not in force (``torch_loaded: false``) rather than record flags nothing read.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Literal, TypedDict

from harness.base.errors import ModelError
from harness.data.numeric_settings import torch_loaded
from harness.host.environment import DeviceNumerics, device_numerics

AUTOCAST_DTYPES = ("float16", "bfloat16", "float32")


class DeclaredExecution(TypedDict):
    """What a model may declare about how it runs (lanes/models/model_api.py), in the order the numerics in
    force record it; a model that declares nothing runs with None, False, False."""

    autocast_dtype: str | None
    torch_compile: bool
    cuda_graphs: bool


class _Declared(DeclaredExecution, DeviceNumerics):
    """What every reading of the numerics in force starts with: the model's declarations, the GPU's part."""


class NoTorchInForce(_Declared):
    """The numerics in force in a process that never imported torch (``torch_loaded: false``): no torch flag."""

    cublas_workspace_config: str | None
    torch_loaded: Literal[False]


class TorchInForce(_Declared):
    """The numerics in force with torch loaded: its flags too (``harness.data.schemas.machine.InForce`` types
    them as a manifest holds them)."""

    threads: int
    mkldnn: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    deterministic_algorithms: bool
    matmul_allow_tf32: bool
    cudnn_allow_tf32: bool
    matmul_precision: str
    cublas_workspace_config: str | None


def declared_execution(model: object | None, where: str = "model") -> DeclaredExecution:
    """How the model runs, as it declares it: ``autocast_dtype`` (None: not under torch.autocast),
    ``torch_compile`` and ``cuda_graphs`` (default False).

    The harness cannot see inside a plug-in's ``infer`` whether it wraps itself in autocast, was
    compiled or replays a captured CUDA graph, and each changes the output bits (so each is part of
    the numerics profile). The reference model declares nothing: None, False, False. A declaration
    of the wrong type is refused (ModelError) rather than recorded as something it is not."""
    if model is None:
        return {"autocast_dtype": None, "torch_compile": False, "cuda_graphs": False}
    declared = getattr(model, "autocast_dtype", None)
    autocast = declared if declared is None or isinstance(declared, str) else str(declared).removeprefix("torch.")
    if autocast is not None and autocast not in AUTOCAST_DTYPES:  # str(torch.float16) is 'torch.float16'
        raise ModelError(
            f"{where}: autocast_dtype {declared!r} is not one of "
            f"{list(AUTOCAST_DTYPES)} (None: the model does not run under torch.autocast)"
        )
    compiled = _declared_flag(model, "torch_compile", where)
    return {
        "autocast_dtype": autocast,
        "torch_compile": compiled,
        "cuda_graphs": _declared_flag(model, "cuda_graphs", where),
    }


def _declared_flag(model: object, name: str, where: str) -> bool:
    """A flag the model may declare as an attribute of its own (the model API), False when it does not."""
    value = getattr(model, name, False)
    if not isinstance(value, bool):
        raise ModelError(f"{where}: {name} must be true or false, got {value!r}")
    return value


class LazyModule:
    """A module imported on its first attribute access: ``torch = LazyModule("torch")`` lets code that
    touches torch only on some paths (a CUDA device) name it at module level without importing it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def in_force(device: str = "cpu", model: object | None = None) -> TorchInForce | NoTorchInForce:
    """What torch actually has now (recorded in manifests next to the requested settings): its
    flags, how ``model`` declares it runs (:func:`declared_execution`) and, on a CUDA ``device``,
    the GPU's libraries and compute capability (``harness.host.environment.device_numerics``; None
    on CPU). Every key here that is in PROFILE_KEYS is part of the numerics profile.

    In a process that has not imported torch (a model that is not a torch network) torch's flags
    were in force nowhere: they are left out and ``torch_loaded: false`` says why (so its numerics
    profile is not a torch model's), with the rest as for any model."""
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")  # the environment variable cuBLAS reads
    if not torch_loaded():
        return {
            **declared_execution(model),
            **device_numerics(device),
            "cublas_workspace_config": workspace,
            "torch_loaded": False,
        }
    import torch

    return {
        **declared_execution(model),
        **device_numerics(device),
        "threads": torch.get_num_threads(),
        "mkldnn": bool(torch.backends.mkldnn.enabled),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "cublas_workspace_config": workspace,
    }
