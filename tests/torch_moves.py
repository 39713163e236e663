"""torch's numeric state moved at random, as a user's process may have it before the harness runs in it.

A move is one call a user could make: a thread count, oneDNN, cuDNN's switches, deterministic algorithms
(warn only or not), the legacy TF32 switches and, from torch 2.9, any node of the ``fp32_precision`` tree
(mixing the two APIs is allowed here: a user may). :func:`kept` gives the test process its state back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from hypothesis import strategies as st

from harness.data.numeric_settings import NumericSettings
from harness.host.torch_state import FP32_NODES, TorchState

Move = tuple[Any, ...]

FP32_VALUES = ("none", "ieee", "tf32", "bf16")

moves: st.SearchStrategy[Move] = st.one_of(
    st.tuples(st.just("threads"), st.integers(1, 4)),
    st.tuples(st.sampled_from(["mkldnn", "cudnn_benchmark", "cudnn_deterministic"]), st.booleans()),
    st.tuples(st.just("deterministic"), st.booleans(), st.booleans()),
    st.tuples(st.just("matmul_precision"), st.sampled_from(["highest", "high", "medium"])),
    st.tuples(st.sampled_from(["matmul_allow_tf32", "cudnn_allow_tf32"]), st.booleans()),
    st.tuples(st.just("fp32"), st.sampled_from(FP32_NODES), st.sampled_from(FP32_VALUES)),
)
legacy_moves = moves.filter(lambda m: m[0] != "fp32")

settings: st.SearchStrategy[NumericSettings] = st.builds(
    NumericSettings,
    threads=st.integers(0, 3),
    mkldnn=st.booleans(),
    cudnn_benchmark=st.booleans(),
    cudnn_deterministic=st.booleans(),
    deterministic_algorithms=st.booleans(),
    allow_tf32=st.booleans(),
    matmul_precision=st.sampled_from(["highest", "high", "medium"]),
)


def move(step: Move) -> None:
    """One user's call; a value this torch refuses (a node it lacks, a value a node does not take) is skipped."""
    b: Any = torch.backends
    name = step[0]
    try:
        if name == "threads":
            torch.set_num_threads(step[1])
        elif name == "mkldnn":
            b.mkldnn.enabled = step[1]
        elif name in ("cudnn_benchmark", "cudnn_deterministic"):
            setattr(b.cudnn, name.removeprefix("cudnn_"), step[1])
        elif name == "deterministic":
            torch.use_deterministic_algorithms(step[1], warn_only=step[2])
        elif name == "matmul_precision":
            torch.set_float32_matmul_precision(step[1])
        elif name == "matmul_allow_tf32":
            b.cuda.matmul.allow_tf32 = step[1]
        elif name == "cudnn_allow_tf32":
            b.cudnn.allow_tf32 = step[1]
        else:
            node = b
            for part in filter(None, step[1].split(".")):
                node = getattr(node, part)
            node.fp32_precision = step[2]
    except (AttributeError, RuntimeError, ValueError, AssertionError):
        pass  # torch refused it: the state is what it was


def moved(steps: Sequence[Move]) -> None:
    for step in steps:
        move(step)


def in_force_of(settings: NumericSettings) -> dict[str, Any]:
    """What torch reads back while ``settings`` are applied (the TF32 of matmuls follows the precision: the
    harness sets the precision last)."""
    return {
        "threads": settings.resolved_threads(),
        "mkldnn": settings.mkldnn,
        "cudnn_benchmark": settings.cudnn_benchmark,
        "cudnn_deterministic": settings.cudnn_deterministic,
        "deterministic_algorithms": settings.deterministic_algorithms,
        "deterministic_warn_only": False,
        "cudnn_allow_tf32": settings.allow_tf32,
        "matmul_precision": settings.matmul_precision,
    }


def observed(state: TorchState, settings: NumericSettings) -> dict[str, Any]:
    """The values of ``state`` that :func:`in_force_of` names."""
    return {key: getattr(state, key) for key in in_force_of(settings)}


@contextmanager
def kept() -> Iterator[TorchState]:
    """The test process's torch state given back after the block, whatever it did (the tests after it see
    the state they would have seen); yields the state at the start."""
    start = TorchState.read()
    try:
        yield start
    finally:
        start.restore()
