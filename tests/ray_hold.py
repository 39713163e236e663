"""Packers for tests/test_ray.py, loaded by the Ray workers (``--packer tests.ray_hold:pack``).

``pack`` is the harness's own packer (same requests, same bits) that, once armed, holds the worker
that takes the arm mid-shard until the test SIGKILLs it: the file ``$HARNESS_TEST_HOLD/armed`` is
renamed to ``held-<pid>`` by exactly one worker (a rename happens once), which then sleeps. The worker
Ray restarts finds no arm and runs the shard through.

``refuse`` refuses to pack the block named ``REFUSED``: bad input for the harness (a packer's
failure is a HarnessError), which must fail the job once, with its line, not be retried.
"""

from __future__ import annotations

import os
import time

from harness.packing import pack as harness_pack

REFUSED = "synth-s0-r003-b001"
HOLD_S = 300.0


def pack(items, pad_to=None):
    hold = os.environ.get("HARNESS_TEST_HOLD")
    if hold:
        try:
            os.rename(os.path.join(hold, "armed"), os.path.join(hold, f"held-{os.getpid()}"))
        except FileNotFoundError:
            pass
        else:
            time.sleep(HOLD_S)  # the test kills this process here
    return harness_pack(items, pad_to)


def refuse(items, pad_to=None):
    ids = [getattr(b, "id", None) for b in items]
    if REFUSED in ids:
        raise ValueError(f"block {REFUSED!r} is not packable (the test's bad input)")
    return harness_pack(items, pad_to)
