"""What machine, software and numeric settings produced a result: recorded in every manifest,
compared on verification and merge, and part of the key a shape is promoted under.

torch is imported only inside :func:`environment` (a model is running then anyway), so reading a
manifest or rendering a report never pays its start-up cost.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Any

from harness.data.jsonio import digest

# Environment keys whose difference can legitimately change output bits (named on drift).
NUMERIC_KEYS = ("torch", "numpy", "cuda", "cudnn", "device_name", "cpu", "driver")
# Numeric settings that are part of a result's identity (the numerics profile).
PROFILE_KEYS = ("threads", "mkldnn", "cudnn_benchmark", "cudnn_deterministic", "deterministic_algorithms",
                "matmul_allow_tf32", "cudnn_allow_tf32", "matmul_precision")


def environment(device: str = "cpu") -> dict[str, Any]:
    import numpy as np
    import pyarrow
    import torch

    import harness

    env: dict[str, Any] = {
        "harness": harness.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pyarrow": pyarrow.__version__,
        "cuda": torch.version.cuda,
        # torch leaves these two unannotated
        "cudnn": (torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
                  if torch.backends.cudnn.is_available() else None),  # type: ignore[no-untyped-call]
        "device": device,
        "device_name": "cpu",
        "driver": None,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        dev = torch.device(device)
        env["device_name"] = torch.cuda.get_device_name(dev)
        major, minor = torch.cuda.get_device_capability(dev)
        env["compute_capability"] = f"{major}.{minor}"
        env["driver"] = _driver_version()
    return env


def device_kind(env: dict[str, Any]) -> str:
    """The key promotion is per: 'cpu' or the GPU's name (an H200 is not an A100)."""
    name = env.get("device_name") or "cpu"
    return "cpu" if name == "cpu" else str(name)


def numerics_profile(in_force: dict[str, Any] | None) -> str:
    """A short id of the numeric settings in force: shapes are promoted per profile, because a
    shape that matches with TF32 off may not with it on (and the thread count picks kernels)."""
    settings = {k: (in_force or {}).get(k) for k in PROFILE_KEYS}
    return "np-" + digest(settings)[:10]


def differences(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...] = NUMERIC_KEYS) -> list[str]:
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def shard_conflict(kind_a: str, a: dict[str, Any], kind_b: str, b: dict[str, Any]) -> str | None:
    """Why two shards' manifests (runs or goldens) came from different numerics, None when they did
    not: device kind, the environment's numeric keys, the numeric settings in force."""
    if kind_a != kind_b:
        return f"device kind differs ({kind_a!r} vs {kind_b!r})"
    ea, eb = a["environment"], b["environment"]
    for key in NUMERIC_KEYS:
        if ea.get(key) != eb.get(key):
            return f"environment {key} differs ({ea.get(key)!r} vs {eb.get(key)!r})"
    na, nb = a["numerics"]["in_force"], b["numerics"]["in_force"]
    for key in sorted(set(na) | set(nb)):
        if na.get(key) != nb.get(key):
            return f"numerics.{key} differs ({na.get(key)!r} vs {nb.get(key)!r})"
    return None


def numerics_differences(then: dict[str, Any] | None, now: dict[str, Any] | None) -> list[str]:
    then, now = then or {}, now or {}
    return [f"numerics.{k}: {then.get(k)!r} -> {now.get(k)!r}" for k in sorted(set(then) | set(now))
            if then.get(k) != now.get(k)]


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


def machine_environment(backend_env: dict[str, Any]) -> dict[str, Any]:
    """The environment of the machine that ran the model: a remote backend (Triton) reports its
    own; an in-process backend is this process."""
    return backend_env.get("environment") or environment(backend_env.get("device", "cpu"))


def provenance(backend_env: dict[str, Any]) -> dict[str, Any]:
    """The manifest fields saying what produced a result, from ``Backend.environment()``."""
    in_force = backend_env.get("numerics_in_force") or {}
    return {
        "model": backend_env["model"],
        "environment": machine_environment(backend_env),
        "backend": {k: v for k, v in backend_env.items() if k not in ("model", "environment")},
        "numerics": {"requested": backend_env.get("numerics_requested"), "in_force": in_force},
        "numerics_profile": numerics_profile(in_force),
    }
