"""Shared by the Triton benchmarks: packed calls over a synthetic corpus, percentiles, a server."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from harness.data.blocks import Block
from harness.data.numeric_settings import NumericSettings
from harness.packers.packing import pack
from lanes.backends.triton.server import ServerOptions

HERE = Path(__file__).resolve().parent
TRANSPORT_SPEC = "transport_model:full"  # benchmarks/transport_model.py: no compute, full geometry


def op0_calls(blocks: list[Block], k: int) -> list[tuple]:
    """OP 0 requests packing ``k`` blocks each: (op, request, windows, rows, where), as the runner sends."""
    calls = []
    for i in range(0, len(blocks), k):
        packed = pack(blocks[i : i + k])
        calls.append((packed.op, packed.tensors(), packed.windows, packed.rows, f"k={k} blocks {i}.."))
    return calls


def request_mb(calls: list[tuple]) -> float:
    return sum(sum(int(a.nbytes) for a in c[1].values()) for c in calls) / len(calls) / 2**20


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (p99 of fewer than 100 values is their maximum)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def server_options(model: str, threads: int, instances: int = 1) -> ServerOptions:
    return ServerOptions(
        model_spec=model,
        numerics=NumericSettings(threads=threads),
        instances=instances,
        extra_pythonpath=(str(HERE),),
        startup_timeout_s=600,
    )


def same_bits(a: list, b: list) -> bool:
    return len(a) == len(b) and all(np.array_equal(x.output, y.output) for x, y in zip(a, b, strict=True))
