"""What machine and software produced a result: recorded in every manifest, compared on verify."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import numpy as np
import pyarrow
import torch

import harness

# Keys whose difference can legitimately change output bits (named on drift).
NUMERIC_KEYS = ("torch", "numpy", "cuda", "cudnn", "device_name", "cpu", "driver")


def environment(device: str = "cpu") -> dict:
    env = {
        "harness": harness.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "pyarrow": pyarrow.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
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


def machine_environment(backend_env: dict) -> dict:
    """The environment of the machine that ran the model: a remote backend (Triton) reports its
    own; an in-process backend is this process."""
    return backend_env.get("environment") or environment(backend_env.get("device", "cpu"))


def provenance(backend_env: dict) -> dict:
    """The manifest fields saying what produced a result, from ``Backend.environment()``."""
    return {
        "model": backend_env["model"],
        "environment": machine_environment(backend_env),
        "backend": {k: v for k, v in backend_env.items() if k != "model"},
        "numerics": {"requested": backend_env.get("numerics_requested"),
                     "in_force": backend_env.get("numerics_in_force")},
    }


def device_kind(env: dict) -> str:
    """The key promotion is per: 'cpu' or the GPU's name (an H200 is not an A100)."""
    return "cpu" if env.get("device_name", "cpu") == "cpu" else str(env["device_name"])


def differences(a: dict, b: dict, keys: tuple[str, ...] = NUMERIC_KEYS) -> list[str]:
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


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
