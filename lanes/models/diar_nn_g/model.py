"""The reference ``diar_nn_g`` model object: the request contract on top of the two networks.

``infer`` accepts a packed or an unpacked request alike; windows are cut with the one
isolation function, so what a window sees is defined in exactly one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch

from harness.base.errors import ModelError
from harness.data import ops
from harness.data.blocks import check_request
from harness.data.geometry import Geometry
from harness.data.isolation import cut_windows
from harness.data.ops import Op
from lanes.models.diar_nn_g.config import CONFIGS, DiarConfig
from lanes.models.diar_nn_g.init import fingerprint, seeded_init
from lanes.models.diar_nn_g.segmentation import PyanNet
from lanes.models.diar_nn_g.voiceprint import VoiceprintNet
from lanes.running.staging import ToDevice, host_tensors

# Scales on the seeded draw (see init.seeded_init): measured on the synthetic corpus, they give
# segmentation a median top log-probability of about -0.1 with speaker changes inside windows,
# and embeddings of norm ~15 instead of ~1000.
INIT_GAINS = {
    "segmentation.lstm.*": 3.0,
    "segmentation.linear.*.weight": 1.5,
    "segmentation.classifier.weight": 8.0,
    "voiceprint.trunk.*.bn2.weight": 0.25,
    "voiceprint.embedding.weight": 0.3,
}


class DiarNNG:
    """Segmentation (OP 0) and voiceprint (OP 1/2) networks behind one ``infer`` call."""

    def __init__(self, config: DiarConfig | str = "full", seed: int = 0, device: str = "cpu") -> None:
        if isinstance(config, str):
            if config not in CONFIGS:
                raise ModelError(f"unknown reference model configuration {config!r} (known: {sorted(CONFIGS)})")
            config = CONFIGS[config]
        self.config = config
        self.seed = int(seed)
        self.geometry: Geometry = config.geometry()
        self.name = f"diar_nn_g-{config.name}-seed{self.seed}"
        self.segmentation = PyanNet(config.segmentation, config.sample_rate, self.geometry.classes)
        self.voiceprint = VoiceprintNet(config.voiceprint, config.sample_rate)
        net = torch.nn.ModuleDict({"segmentation": self.segmentation, "voiceprint": self.voiceprint})
        seeded_init(net, self.seed, INIT_GAINS)
        self.fingerprint = fingerprint("lanes.diar_nn_g.DiarNNG/1", {**config.to_dict(), "seed": self.seed}, net)
        self.device = _device(device)
        net.to(self.device).eval()
        self._net = net

    def torch_modules(self) -> dict[str, torch.nn.Module]:
        """The networks, for layer localisation hooks (one per OP family)."""
        return {"segmentation": self.segmentation, "voiceprint": self.voiceprint}

    def row_modules(self) -> tuple[str, ...]:
        """Modules whose outputs have one row per voiceprint row, not per window."""
        return ("voiceprint.pooling", "voiceprint.embedding")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "kind": "reference",
            "config": self.config.name,
            "seed": self.seed,
            "fingerprint": self.fingerprint,
            "device": str(self.device),
        }

    @torch.inference_mode()
    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.stage(request, host_tensors(self.device))()

    def stage(self, request: Mapping[str, np.ndarray], to_device: ToDevice) -> Callable[[], dict[str, np.ndarray]]:
        """The host's part now (the request checked, the windows cut, the inputs given to ``to_device``); the
        device's part returned (lanes/models/model_api.py: a pipelined backend copies call n+1 while n computes)."""
        fields = check_request(request, self.geometry)
        op = Op(int(fields[ops.OP][0]))
        x = to_device(self.windows(fields))
        if op is Op.SEGMENTATION:

            def network() -> torch.Tensor:
                return self.segmentation(x.unsqueeze(1))
        else:
            weights = to_device(fields[ops.WEIGHTS])
            idx = to_device(fields[ops.IDX].astype(np.int64))

            def network() -> torch.Tensor:
                return self.voiceprint(x, weights, idx)

        @torch.inference_mode()
        def compute() -> dict[str, np.ndarray]:
            return {op.output_name: self.finish(op, _numpy(network()), fields)}

        return compute

    def windows(self, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        """[N, window_samples]: what each window sees (the one isolation function)."""
        return cut_windows(fields[ops.SPAN], fields[ops.OFFSETS], fields[ops.VALID], self.geometry.window_samples)

    def finish(self, op: Op, output: np.ndarray, fields: Mapping[str, np.ndarray]) -> np.ndarray:
        """Hook for subclasses (the negative controls) to change an answer; identity here."""
        return output


def _device(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as exc:
        raise ModelError(f"bad device {name!r}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} asked for, but this torch build sees no CUDA device")
    return device


def _numpy(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().to("cpu", torch.float32).numpy())
