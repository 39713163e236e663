"""A backend's numeric settings held around a whole piece of work in this process, and given back after it.

An in-process backend applies its settings around every call (:mod:`lanes.backends.backend`) and the process gets
its own flags back after each. A recording, a run or a nightly also runs the model between calls (the module
noise floors, localisation hook its modules) and must see the same settings there: it holds them for its
whole duration (:func:`under_backend_numerics`), and the process's flags are given back when it ends, on
an error or an interrupt too. A backend whose model runs elsewhere (a Triton server applies its own) holds
nothing here, as before.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def backend_numerics(backend: object) -> AbstractContextManager[object]:
    """``with backend_numerics(backend):`` the backend's settings in force in this process for the block
    (``numerics_applied()``, the in-process backend's); nothing for a backend without it."""
    applied = getattr(backend, "numerics_applied", None)
    if not callable(applied):
        return nullcontext()
    scope: AbstractContextManager[object] = applied()
    return scope


def under_backend_numerics(work: Callable[P, R]) -> Callable[P, R]:
    """``work`` run under its ``backend`` argument's settings (:func:`backend_numerics`), given back after it."""
    signature = inspect.signature(work)
    if "backend" not in signature.parameters:
        raise TypeError(f"{work.__qualname__}: under_backend_numerics needs a parameter named 'backend'")

    @functools.wraps(work)
    def held(*args: P.args, **kwargs: P.kwargs) -> R:
        backend: Any = signature.bind_partial(*args, **kwargs).arguments.get("backend")  # the parameter's name
        with backend_numerics(backend):
            return work(*args, **kwargs)

    return held
