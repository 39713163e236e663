"""What machine, software and numeric settings produced a result: recorded in every manifest,
compared on verification and merge, and part of the key a shape is promoted under.

torch is imported only inside :func:`environment` and only when a torch model already imported it
(or on a CUDA device), so reading a manifest, rendering a report or running a model that is not a
torch network never pays its start-up cost.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import harness
from harness.base.jsonio import digest
from harness.base.process_settings import in_force

if TYPE_CHECKING:
    from harness.host.backend_answer import BackendAnswer

# Environment keys whose difference can legitimately change output bits (named on drift).
NUMERIC_KEYS = ("torch", "numpy", "cuda", "cudnn", "device_name", "cpu", "driver")
# Numeric settings that are part of a result's identity (the numerics profile): a shape promoted under
# one profile is not used under another. Everything here is recorded in the manifests' numerics.in_force
# (harness.numerics.in_force), so a profile is re-derivable from any golden, run or score.
PROFILE_KEYS = (
    "threads",
    "mkldnn",
    "cudnn_benchmark",
    "cudnn_deterministic",
    "deterministic_algorithms",
    "matmul_allow_tf32",
    "cudnn_allow_tf32",
    "matmul_precision",
    # in the profile, not only in NUMERIC_KEYS, because NUMERIC_KEYS only *name* a
    # drift on verification; they do not stop a promotion made under one setting being used under
    # another, and each of these picks other GPU kernels (other output bits) for the same model:
    # the cuBLAS workspace (split-K / stream reductions), autocast (declared by the model),
    # torch.compile and CUDA graphs (fused / captured kernels, declared by the model),
    # the cuDNN, cuBLAS and driver versions (other kernels and heuristics), and the compute
    # capability (sm_80 and sm_90 run other code paths; a device name does not always pin it).
    # The device-only ones are None on CPU (device_numerics), so a CPU profile does not move
    # with the CUDA libraries a CPU run never calls.
    "cublas_workspace_config",
    "autocast_dtype",
    "torch_compile",
    "cuda_graphs",
    "cudnn_version",
    "cublas_version",
    "driver_version",
    "compute_capability",
)
# The GPU-only part of the numerics in force (device_numerics): None on CPU.
DEVICE_NUMERIC_KEYS = ("cudnn_version", "cublas_version", "driver_version", "compute_capability")


class EnvironmentRecord(TypedDict):
    """What :func:`environment` records of this machine and its software: the JSON object a manifest holds
    under ``environment`` (in this order: a manifest's digest is taken over its JSON)."""

    harness: str
    python: str
    platform: str
    machine: str
    cpu: str
    torch: str | None
    numpy: str
    pyarrow: str
    cuda: str | None
    cudnn: int | None
    device: str
    device_name: str
    driver: str | None
    process: dict[str, str]  # what the harness set for itself (OpenMP's wait, the allocator): no result bit
    compute_capability: NotRequired[str]  # on a CUDA device only


class DeviceNumerics(TypedDict):
    """The GPU's part of the numerics in force (:func:`device_numerics`), in the order a manifest records it."""

    cudnn_version: int | None
    cublas_version: str | None
    driver_version: str | None
    compute_capability: str | None


class Provenance(TypedDict):
    """The manifest fields saying what produced a result (:func:`provenance`), in the manifest's order."""

    model: dict[str, object] | None
    environment: Mapping[str, object]
    backend: dict[str, object]
    numerics: dict[str, object]
    numerics_profile: str


def environment(device: str = "cpu") -> EnvironmentRecord:
    """This machine and its software. torch's part is read from torch when a model imported it, else
    from its installed files (:func:`_torch_build`), so a model that is not a torch network never pays
    torch's start-up for a manifest; the cuDNN torch carries is known only from a loaded torch (None
    otherwise: no cuDNN was in use)."""
    import sys

    cpu = _cpu_name()
    if "torch" not in sys.modules and not device.startswith("cuda"):
        return _environment(cpu, device, *_torch_build(), cudnn=None)
    import torch

    env = _environment(
        cpu,
        device,
        torch.__version__,
        torch.version.cuda,
        # torch leaves these two unannotated
        cudnn=(
            torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
            if torch.backends.cudnn.is_available()  # type: ignore[no-untyped-call]
            else None
        ),
    )
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        name = torch.cuda.get_device_name(dev)
        major, minor = torch.cuda.get_device_capability(dev)
        return {**env, "device_name": name, "driver": _driver_version(), "compute_capability": f"{major}.{minor}"}
    return env


def _environment(cpu: str, device: str, torch: str | None, cuda: str | None, cudnn: int | None) -> EnvironmentRecord:
    """The record of a CPU (the GPU's keys are added by :func:`environment`)."""
    import numpy as np
    import pyarrow

    return {
        "harness": harness.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "torch": torch,
        "numpy": np.__version__,
        "pyarrow": pyarrow.__version__,
        "cuda": cuda,
        "cudnn": cudnn,
        "device": device,
        "device_name": "cpu",
        "driver": None,
        "process": in_force(),
    }


def _torch_build() -> tuple[str | None, str | None]:
    """(torch's version, the CUDA it was built for) from its installed ``torch/version.py``, without
    importing torch (whose ``__init__`` costs seconds); (None, None) when torch is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("torch")  # a top-level name: found, not imported
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / "version.py"
        if path.is_file():
            scope: dict[str, object] = {}  # the module's globals, as exec leaves them
            exec(compile(path.read_text(), str(path), "exec"), scope)  # a file of constants torch generates
            # its module globals by name: __version__ and cuda, as torch's build writes them
            version, cuda = scope.get("__version__"), scope.get("cuda")
            return (str(version) if version is not None else None), (str(cuda) if cuda is not None else None)
    return None, None


def device_numerics(device: str = "cpu") -> DeviceNumerics:
    """The GPU's part of the numerics in force (DEVICE_NUMERIC_KEYS), part of the numerics profile.

    All None on CPU, whatever CUDA libraries the torch build carries: a CPU run never calls them, so a
    CPU profile must not change when they do. On CUDA: cuDNN's version (when cuDNN is in use), cuBLAS's
    (torch does not expose it: :func:`_cublas_version`), the driver's, the compute capability."""
    none: DeviceNumerics = {
        "cudnn_version": None,
        "cublas_version": None,
        "driver_version": None,
        "compute_capability": None,
    }
    if not device.startswith("cuda"):
        return none
    import torch

    if not torch.cuda.is_available():
        return none
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    cudnn = (
        torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
        if torch.backends.cudnn.is_available()  # type: ignore[no-untyped-call]
        else None
    )
    cublas = _cublas_version()
    return {
        "cudnn_version": cudnn,
        "cublas_version": cublas,
        "driver_version": _driver_version(),
        "compute_capability": f"{major}.{minor}",
    }


def device_kind(device_name: str | None) -> str:
    """The key promotion is per: 'cpu' or the GPU's name (an H200 is not an A100), from an environment's
    ``device_name``."""
    return device_name or "cpu"


# The four below compare what two manifests recorded, as their JSON holds it: an environment and the numerics
# in force are open objects (a remote server's keys, a key a newer harness adds), compared key by key.
def numerics_profile(in_force: dict[str, Any] | None) -> str:  # the numerics in force, as recorded (open keys)
    """A short id of the numeric settings in force: shapes are promoted per profile, because a
    shape that matches with TF32 off may not with it on (and the thread count picks kernels)."""
    settings = {k: (in_force or {}).get(k) for k in PROFILE_KEYS}
    return "np-" + digest(settings)[:10]


def differences(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...] = NUMERIC_KEYS) -> list[str]:  # as above
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


# two manifests' JSON objects (a run's or a golden's, as dumped, or a shard's in that shape)
def shard_conflict(kind_a: str, a: dict[str, Any], kind_b: str, b: dict[str, Any]) -> str | None:
    """Why two shards' manifests (runs or goldens) came from different numerics, None when they did
    not: device kind, the environment's numeric keys, the numeric settings in force."""
    if kind_a != kind_b:
        return f"device kind differs ({kind_a!r} vs {kind_b!r})"
    ea, eb = a["environment"], b["environment"]  # the manifests' recorded environments
    for key in NUMERIC_KEYS:
        if ea.get(key) != eb.get(key):
            return f"environment {key} differs ({ea.get(key)!r} vs {eb.get(key)!r})"
    na, nb = a["numerics"]["in_force"], b["numerics"]["in_force"]  # and their numerics in force
    for key in sorted(set(na) | set(nb)):
        if na.get(key) != nb.get(key):
            return f"numerics.{key} differs ({na.get(key)!r} vs {nb.get(key)!r})"
    return None


# the numerics in force then and now, as recorded (open keys: every key either side has is compared)
def numerics_differences(then: dict[str, Any] | None, now: dict[str, Any] | None) -> list[str]:
    then, now = then or {}, now or {}
    return [
        f"numerics.{k}: {then.get(k)!r} -> {now.get(k)!r}"
        for k in sorted(set(then) | set(now))
        if then.get(k) != now.get(k)
    ]


def _cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
        if match:
            return match.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _driver_version() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+([\d.]+)", text)
    return match.group(1) if match else text.splitlines()[0].strip()


def _cublas_version(maps: Path = Path("/proc/self/maps")) -> str | None:
    """cuBLAS's version: torch has no call for it, so ask the libcublas this process loaded
    (``cublasGetProperty``, no handle needed), else the pip wheel that ships it; None when neither
    answers (a missing version is recorded as unknown rather than guessed)."""
    path = _loaded_library("libcublas.so", maps)
    if path is not None:
        try:
            lib = ctypes.CDLL(path)
            parts = []
            for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
                value = ctypes.c_int()
                if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                    raise OSError("cublasGetProperty failed")
                parts.append(str(value.value))
            return ".".join(parts)
        except (OSError, AttributeError):
            pass
    for dist in ("nvidia-cublas-cu13", "nvidia-cublas-cu12", "nvidia-cublas-cu11", "nvidia-cublas"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _loaded_library(stem: str, maps: Path) -> str | None:
    """The path of a shared library this process has mapped whose file name starts with ``stem``."""
    try:
        text = maps.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split(maxsplit=5)  # address perms offset dev inode [path]
        if len(fields) == 6 and Path(fields[5]).name.startswith(stem):
            return fields[5]
    return None


def machine_environment(answer: BackendAnswer) -> Mapping[str, object]:
    """The environment of the machine that ran the model: a remote backend (Triton) reports its
    own; an in-process backend is this process."""
    return answer.environment or environment(answer.device)


def provenance(backend_env: Mapping[str, object]) -> Provenance:
    """The manifest fields saying what produced a result, from ``Backend.environment()``'s answer."""
    from harness.host.backend_answer import BackendAnswer  # deferred: pydantic, only where an answer is read

    answer = BackendAnswer.of(backend_env)
    in_force = answer.numerics_in_force or {}
    return {
        "model": answer.model,
        "environment": machine_environment(answer),
        "backend": {k: v for k, v in backend_env.items() if k not in ("model", "environment")},
        "numerics": {"requested": answer.numerics_requested, "in_force": in_force},
        "numerics_profile": numerics_profile(in_force),
    }
