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
from typing import Any

from harness.base.errors import ModelError
from harness.data.numeric_settings import torch_loaded
from harness.host.environment import device_numerics

# What a model may declare about how it runs (lanes/models/model_api.py), and the values when it does not.
EXECUTION_DEFAULTS: dict[str, Any] = {"autocast_dtype": None, "torch_compile": False, "cuda_graphs": False}
AUTOCAST_DTYPES = ("float16", "bfloat16", "float32")


def declared_execution(model: object | None, where: str = "model") -> dict[str, Any]:
    """How the model runs, as it declares it: ``autocast_dtype`` (None: not under torch.autocast),
    ``torch_compile`` and ``cuda_graphs`` (default False).

    The harness cannot see inside a plug-in's ``infer`` whether it wraps itself in autocast, was
    compiled or replays a captured CUDA graph, and each changes the output bits (so each is part of
    the numerics profile). The reference model declares nothing: None, False, False. A declaration
    of the wrong type is refused (ModelError) rather than recorded as something it is not."""
    out = dict(EXECUTION_DEFAULTS)
    if model is None:
        return out
    declared = getattr(model, "autocast_dtype", None)
    autocast = declared if declared is None or isinstance(declared, str) else str(declared).removeprefix("torch.")
    if autocast is not None and autocast not in AUTOCAST_DTYPES:  # str(torch.float16) is 'torch.float16'
        raise ModelError(
            f"{where}: autocast_dtype {declared!r} is not one of "
            f"{list(AUTOCAST_DTYPES)} (None: the model does not run under torch.autocast)"
        )
    out["autocast_dtype"] = autocast
    for key in ("torch_compile", "cuda_graphs"):
        value = getattr(model, key, False)
        if not isinstance(value, bool):
            raise ModelError(f"{where}: {key} must be true or false, got {value!r}")
        out[key] = value
    return out


class LazyModule:
    """A module imported on its first attribute access: ``torch = LazyModule("torch")`` lets code that
    touches torch only on some paths (a CUDA device) name it at module level without importing it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def in_force(device: str = "cpu", model: object | None = None) -> dict[str, Any]:
    """What torch actually has now (recorded in manifests next to the requested settings): its
    flags, how ``model`` declares it runs (:func:`declared_execution`) and, on a CUDA ``device``,
    the GPU's libraries and compute capability (``harness.host.environment.device_numerics``; None
    on CPU). Every key here that is in PROFILE_KEYS is part of the numerics profile.

    In a process that has not imported torch (a model that is not a torch network) torch's flags
    were in force nowhere: they are left out and ``torch_loaded: false`` says why (so its numerics
    profile is not a torch model's), with the rest as for any model."""
    if not torch_loaded():
        return {
            **declared_execution(model),
            **device_numerics(device),
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
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
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
