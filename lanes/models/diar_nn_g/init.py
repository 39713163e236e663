"""Seeded, machine-independent weights and the model fingerprint.

Weights come from numpy's legacy ``RandomState``, whose streams numpy freezes across
versions and platforms, drawn parameter by parameter in sorted name order, in float64 and
cast to float32 on the CPU. So the same seed gives the same weights (and fingerprint) on
every machine and every numpy/torch version, before the model ever moves to a device.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import math
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

FIXED_INIT_ATTR = "_fixed_init_params"  # parameter names a module initialises itself (e.g. sinc bands)


def seeded_init(module: nn.Module, seed: int, gains: Mapping[str, float] | None = None) -> None:
    """Draw every parameter from ``seed``; ``gains`` scales parameters whose names match a
    glob pattern (first match wins), so an untrained network still has a trained one's
    character: confident, input-dependent segmentation; O(10)-norm embeddings."""
    rng = np.random.RandomState(seed)
    gains = dict(gains or {})
    fixed: set[str] = set()
    for prefix, sub in module.named_modules():
        for name in getattr(sub, FIXED_INIT_ATTR, ()):
            fixed.add(f"{prefix}.{name}" if prefix else name)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            if name in fixed:
                continue
            p = params[name]
            values = _draw(rng, name, tuple(p.shape))
            gain = next((g for pattern, g in gains.items() if fnmatch.fnmatchcase(name, pattern)), 1.0)
            values = values * gain
            p.copy_(torch.from_numpy(values.astype(np.float32)))
        for name, buf in sorted(module.named_buffers()):
            if name.endswith("running_mean"):
                buf.zero_()
            elif name.endswith("running_var"):
                buf.fill_(1.0)


def _draw(rng: np.random.RandomState, name: str, shape: tuple[int, ...]) -> np.ndarray:
    leaf = name.rsplit(".", 1)[-1]
    if "lstm" in name.lower() or leaf.startswith(("weight_ih", "weight_hh", "bias_ih", "bias_hh")):
        hidden = shape[0] // 4
        bound = 1.0 / math.sqrt(hidden)
        return rng.uniform(-bound, bound, size=shape)
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        bound = math.sqrt(6.0 / fan_in)  # He-uniform: keeps activations O(1) through ReLU stacks
        return rng.uniform(-bound, bound, size=shape)
    if leaf == "weight":  # norm layers' scale
        return 1.0 + 0.1 * rng.uniform(-1.0, 1.0, size=shape)
    return 0.05 * rng.uniform(-1.0, 1.0, size=shape)


def fingerprint(architecture: str, config: dict, module: nn.Module) -> str:
    """sha256 over the architecture's name, its config and every weight/buffer, in name order."""
    h = hashlib.sha256()
    state = module.state_dict()
    layout = [(k, list(v.shape), str(v.dtype)) for k, v in sorted(state.items())]
    h.update(
        json.dumps(
            {"architecture": architecture, "config": config, "layout": layout}, sort_keys=True, default=str
        ).encode()
    )
    for _, tensor in sorted(state.items()):
        data = tensor.detach().to("cpu").contiguous()
        if data.dtype.is_floating_point:
            data = data.to(torch.float32)
        h.update(data.numpy().astype(data.numpy().dtype.newbyteorder("<"), copy=False).tobytes())
    return h.hexdigest()
