"""A negative control for the load sweep: a model whose answer changes when another request is in flight.

Served by Triton with two instances (``instance_group [{count: 2}]``: two stub processes), requests can run
at the same time; a model with state shared between them (a global buffer, a cache keyed wrongly) then
answers differently under load than alone. This control makes that defect deterministic: with
``rendezvous`` (a folder both instances see), an OP 0 request carrying audio leaves a marker there and
waits up to ``wait_s`` for another request's marker; if it meets one, it adds 0.01 to its log-probabilities
(far beyond the tolerance of 1e-4). Alone (concurrency 1, or in-process without ``rendezvous``) it is the
reference ``small`` model, so its golden is recorded in-process and the lanes at concurrency 1 pass it.

Spec: ``lanes.controls.load_control:racing?rendezvous='/tmp/folder'`` (factory arguments: ``lanes.models.model_api``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from harness.data import ops
from harness.data.ops import Op
from lanes.controls.defects import CONFIG, _named
from lanes.models.diar_nn_g.model import DiarNNG

SHIFT = np.float32(0.01)  # what a request that met another adds to its OP 0 answer
POLL_S = 0.005


class RacingModel(DiarNNG):
    """The reference model, perturbed while another request is in flight (module doc)."""

    def __init__(self, config: str, seed: int, device: str, rendezvous: str, wait_s: float) -> None:
        super().__init__(config, seed, device)
        self.rendezvous = Path(rendezvous) if rendezvous else None
        self.wait_s = float(wait_s)

    def infer(self, request: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        folder = self.rendezvous
        op = int(np.asarray(request.get(ops.OP, [0])).reshape(-1)[0])
        if folder is None or op != int(Op.SEGMENTATION) or not np.asarray(request.get(ops.VALID, 0)).any():
            return dict(super().infer(request))
        mine = folder / f"{os.getpid()}-{uuid.uuid4().hex}"
        mine.touch()
        try:
            met = self._meet(folder, mine)
            out = dict(super().infer(request))
        finally:
            mine.unlink(missing_ok=True)
        if met:
            name = Op.SEGMENTATION.output_name
            out[name] = (out[name] + SHIFT).astype(np.float32)
        return out

    def _meet(self, folder: Path, mine: Path) -> bool:
        """Whether another request's marker shows up within ``wait_s`` (at once when one is there already)."""
        deadline = time.monotonic() + self.wait_s
        while True:
            if any(p.name != mine.name for p in folder.iterdir()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)


def racing(seed: int = 0, device: str = "cpu", rendezvous: str = "", wait_s: float = 1.5) -> DiarNNG:
    """The control (module doc); its fingerprint is the same with or without ``rendezvous``."""
    return _named(RacingModel(CONFIG, seed, device, rendezvous, wait_s), "racing")
