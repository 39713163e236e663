"""Packers for tests/test_ray.py, loaded by the Ray workers (``--packer tests.ray_hold:pack``).

``pack`` is the harness's own packer (same requests, same bits) that, once armed, holds the worker
that takes the arm mid-shard until the test SIGKILLs it: the file ``$HARNESS_TEST_HOLD/armed`` is
renamed to ``held-<pid>`` by exactly one worker (a rename happens once), which then sleeps. The worker
Ray restarts finds no arm and runs the shard through.

``refuse`` refuses to pack the block named ``REFUSED``: bad input for the harness (a packer's
failure is a HarnessError), which must fail the job once, with its line, not be retried.

``small`` and ``refusing_small`` are the same two for ``audit --ray``, whose workers pack nothing:
model factories (``--golden-model tests.ray_hold:small``) of the small reference model (same weights,
same fingerprint, same answers) that hold in ``infer`` once armed, or refuse every OP 2 request.
"""

from __future__ import annotations

import os
import time

from harness.data import ops
from harness.packers.packing import pack as harness_pack

REFUSED = "synth-s0-r003-b001"
HOLD_S = 300.0


def hold_if_armed() -> None:
    hold = os.environ.get("HARNESS_TEST_HOLD")
    if hold:
        try:
            os.rename(os.path.join(hold, "armed"), os.path.join(hold, f"held-{os.getpid()}"))
        except FileNotFoundError:
            pass
        else:
            time.sleep(HOLD_S)  # the test kills this process here


def pack(items, pad_to=None):
    hold_if_armed()
    return harness_pack(items, pad_to)


def refuse(items, pad_to=None):
    ids = [getattr(b, "id", None) for b in items]
    if REFUSED in ids:
        raise ValueError(f"block {REFUSED!r} is not packable (the test's bad input)")
    return harness_pack(items, pad_to)


class SmallModel:
    """The small reference model, answering as it does, with the hold (or the refusal) in front."""

    def __init__(self, model, refuse_op: int | None = None) -> None:
        self.model, self.refuse_op = model, refuse_op
        self.geometry, self.fingerprint = model.geometry, model.fingerprint

    def describe(self) -> dict:
        return self.model.describe()

    def infer(self, request):
        if self.refuse_op is not None and int(request[ops.OP][0]) == self.refuse_op:
            raise ValueError(f"OP {self.refuse_op} request refused (the test's bad input)")
        hold_if_armed()
        return self.model.infer(request)


def small(seed: int = 0, device: str = "cpu") -> SmallModel:
    from lanes.models.model_api import load_model

    return SmallModel(load_model("small", seed=seed, device=device))


def refusing_small(seed: int = 0, device: str = "cpu") -> SmallModel:
    from lanes.models.model_api import load_model

    return SmallModel(load_model("small", seed=seed, device=device), refuse_op=2)
