"""torch's process-wide numeric state, as it can be read back, and put back as it was.

The numeric settings (:mod:`harness.data.numeric_settings`) change torch's flags for the whole process;
:mod:`harness.host.numerics_scope` takes a :class:`TorchState` before it changes them and restores it when
its scope ends, so a process that runs the harness (a team's pytest session, a notebook) gets its own flags
back. Read only once torch is imported (the caller checks ``torch_loaded``): reading imports nothing.

Two of torch's switches are one state seen through two APIs: the legacy ones (``allow_tf32``,
``set_float32_matmul_precision``) and, from torch 2.9, the ``fp32_precision`` of ``torch.backends`` and of
each backend and operator under it. Setting one moves the other (``set_float32_matmul_precision("highest")``
turns ``cuda.matmul.fp32_precision`` from ``none`` into ``ieee``, so a later ``torch.backends.fp32_precision
= "tf32"`` no longer reaches it), so both are recorded and both restored. A legacy value torch refuses to
read (the two APIs were mixed by whoever set them) is recorded as None and only the new API's values are put
back for it. A scope that sets the settings first puts that tree back as torch sets it at import
(:func:`reset_fp32_tree`), so the legacy switches it then sets mean what they mean in a fresh process.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

# Every node of torch's fp32_precision tree (torch >= 2.9), parents before their children: setting a
# parent moves its children, so a restore sets them in this order.
FP32_NODES = (
    "",
    "cuda.matmul",
    "cudnn",
    "cudnn.conv",
    "cudnn.rnn",
    "mkldnn",
    "mkldnn.matmul",
    "mkldnn.conv",
    "mkldnn.rnn",
)
# The tree as torch sets it at import (torch 2.9 to 2.13; tests/test_numerics_scope.py checks it in a fresh
# interpreter): the numeric settings start from it, so they mean the same in every process (module doc).
FP32_AT_IMPORT = {"cudnn.conv": "tf32", "cudnn.rnn": "tf32"}  # every other node: "none"
# A restore that has not converged after this many passes reports what it could not put back.
RESTORE_PASSES = 4


@dataclass(frozen=True)
class TorchState:
    """What torch has now, of everything the numeric settings set (and the inter-op threads, read to show
    they are never touched). None: torch refused to read that value (module doc)."""

    threads: int
    interop_threads: int
    mkldnn: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    deterministic_algorithms: bool
    deterministic_warn_only: bool
    matmul_precision: str | None
    matmul_allow_tf32: bool | None
    cudnn_allow_tf32: bool | None
    fp32_precision: tuple[tuple[str, str], ...]  # (node, value) per node of FP32_NODES this torch has

    @classmethod
    def read(cls) -> TorchState:
        """torch's state now, in this thread (torch's thread count is per thread: OpenMP's)."""
        values = {name: get() for name, get, _ in _switches()}
        tree = tuple((name, str(node.fp32_precision)) for name, node in _fp32_nodes())
        return cls(**values, fp32_precision=tree)

    def differences(self, other: TorchState) -> list[str]:
        """``name: self -> other`` for every value that differs (empty: the same state)."""
        return [
            f"{f.name}: {getattr(self, f.name)!r} -> {getattr(other, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]

    def unrestored(self, now: TorchState) -> list[str]:
        """What :meth:`restore` puts back from ``now``: every difference but the inter-op threads (never set)
        and a legacy value that was unreadable here (module doc)."""
        return [
            f"{f.name}: {getattr(now, f.name)!r}, was {getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name != "interop_threads"
            and getattr(self, f.name) is not None
            and getattr(self, f.name) != getattr(now, f.name)
        ]

    def restore(self) -> None:
        """Put back every value that differs from this state, and only those (a value nobody changed is not
        set again). Raises RuntimeError naming what could not be put back, after trying everything."""
        failures: list[str] = []
        for _ in range(RESTORE_PASSES):
            if not self._put_back(failures):
                return
        left = [*self.unrestored(TorchState.read()), *failures]
        if left:
            raise RuntimeError(f"torch's numeric state not restored: {'; '.join(dict.fromkeys(left))}")

    def _put_back(self, failures: list[str]) -> bool:
        """One pass, each value compared and set where it differs, in order: the legacy TF32 switches move the
        tree, so its nodes come last, parents first. Whether anything differed."""
        differed = False
        for name, get, put in _switches():
            wanted = getattr(self, name)
            if wanted is not None and name != "interop_threads" and get() != wanted:
                differed = True
                _attempt(name, functools.partial(put, self), failures)
        wanted_tree = dict(self.fp32_precision)
        for node_name, node in _fp32_nodes():
            value = wanted_tree.get(node_name)
            if value is not None and str(node.fp32_precision) != value:
                differed = True
                _attempt(f"fp32_precision of {node_name or 'torch.backends'}", _setter(node, value), failures)
        return differed


Switch = tuple[str, Callable[[], Any], Callable[[TorchState], None]]
_SWITCHES: list[Switch] = []
_NODES: list[list[tuple[str, Any]]] = []  # once found: the nodes (an empty list before torch 2.9)


def _switches() -> list[Switch]:
    """Each value of :class:`TorchState` but the tree: (field, read it, put a state's value back), in the order
    a restore sets them (built once: torch's modules do not move)."""
    if _SWITCHES:
        return _SWITCHES
    import torch

    b: Any = torch.backends

    def deterministic(s: TorchState) -> None:
        torch.use_deterministic_algorithms(s.deterministic_algorithms, warn_only=s.deterministic_warn_only)

    def matmul_precision(s: TorchState) -> None:
        torch.set_float32_matmul_precision(str(s.matmul_precision))

    _SWITCHES[:] = [
        ("threads", torch.get_num_threads, lambda s: torch.set_num_threads(s.threads)),
        ("interop_threads", torch.get_num_interop_threads, lambda s: None),  # read only: never set
        ("mkldnn", lambda: bool(b.mkldnn.enabled), lambda s: setattr(b.mkldnn, "enabled", s.mkldnn)),
        (
            "cudnn_benchmark",
            lambda: bool(b.cudnn.benchmark),
            lambda s: setattr(b.cudnn, "benchmark", s.cudnn_benchmark),
        ),
        (
            "cudnn_deterministic",
            lambda: bool(b.cudnn.deterministic),
            lambda s: setattr(b.cudnn, "deterministic", s.cudnn_deterministic),
        ),
        ("deterministic_algorithms", lambda: bool(torch.are_deterministic_algorithms_enabled()), deterministic),
        ("deterministic_warn_only", lambda: bool(torch.is_deterministic_algorithms_warn_only_enabled()), deterministic),
        ("matmul_precision", lambda: _readable(torch.get_float32_matmul_precision), matmul_precision),
        (
            "matmul_allow_tf32",
            lambda: _readable(lambda: bool(b.cuda.matmul.allow_tf32)),
            lambda s: setattr(b.cuda.matmul, "allow_tf32", s.matmul_allow_tf32),
        ),
        (
            "cudnn_allow_tf32",
            lambda: _readable(lambda: bool(b.cudnn.allow_tf32)),
            lambda s: setattr(b.cudnn, "allow_tf32", s.cudnn_allow_tf32),
        ),
    ]
    return _SWITCHES


def reset_fp32_tree() -> None:
    """The fp32_precision tree put back as torch sets it at import (nothing to do where it is, as in a fresh
    process): a user's ``torch.backends.fp32_precision = "tf32"`` outranks the legacy switches the numeric
    settings set (``cudnn.allow_tf32 = False`` left cuDNN's convolutions at TF32, and the flags unreadable)."""
    nodes = _fp32_nodes()
    for _ in range(RESTORE_PASSES):
        off = [(name, node) for name, node in nodes if str(node.fp32_precision) != FP32_AT_IMPORT.get(name, "none")]
        if not off:
            return
        for name, node in off:
            node.fp32_precision = FP32_AT_IMPORT.get(name, "none")


def _fp32_nodes() -> list[tuple[str, Any]]:
    """The nodes of FP32_NODES this torch has (none before torch 2.9), with their objects (found once)."""
    if _NODES:
        return _NODES[0]
    import torch

    found = []
    for name in FP32_NODES:
        node: Any = torch.backends
        for part in filter(None, name.split(".")):
            node = getattr(node, part, None)
        if node is not None and hasattr(node, "fp32_precision"):
            found.append((name, node))
    _NODES.append(found)
    return found


def _readable(get: Any) -> Any:
    try:
        return get()
    except RuntimeError:  # the legacy and new TF32 APIs mixed: torch refuses to say (module doc)
        return None


def _setter(owner: Any, value: str) -> Callable[[], None]:
    return lambda: setattr(owner, "fp32_precision", value)


def _attempt(name: str, put: Callable[[], None], failures: list[str]) -> None:
    """``put()``, a failure kept as ``name: error`` (the other values are still put back)."""
    try:
        put()
    except Exception as exc:  # torch refused one value
        failures.append(f"{name}: {type(exc).__name__}: {exc}")


def torch_loaded() -> bool:
    """Whether this process has imported torch (a torch model is built, or a plug-in imported it)."""
    return "torch" in sys.modules
