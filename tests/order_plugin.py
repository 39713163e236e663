"""A pytest plugin for tests/test_test_order.py: the collected tests run in another order, or without the
numeric settings' restore (the negative control). Loaded with ``-p tests.order_plugin``.

``HARNESS_TEST_ORDER``: ``random:<seed>`` shuffles the modules, then the tests inside each module (as
pytest-randomly does: a module's fixtures are built once), ``reversed`` reverses both. ``HARNESS_TEST_NO_RESTORE=1``:
the scopes of :mod:`harness.host.numerics_scope` give nothing back (what the harness did before they did).
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import TypeVar

import pytest

T = TypeVar("T")
ORDER = "HARNESS_TEST_ORDER"
NO_RESTORE = "HARNESS_TEST_NO_RESTORE"


def in_order(order: str, modules: Sequence[str]) -> list[str]:
    """The order ``order`` gives ``modules`` (in their collection order)."""
    return _arranged(order, list(modules), "")


def _arranged(order: str, things: list[T], within: str) -> list[T]:
    if order == "reversed":
        return things[::-1]
    kind, _, seed = order.partition(":")
    if kind != "random" or not seed.isdigit():
        raise pytest.UsageError(f"{ORDER}={order!r}: expected 'reversed' or 'random:<seed>'")
    random.Random(f"{seed}:{within}").shuffle(things)
    return things


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(NO_RESTORE) == "1":
        from harness.host import numerics_scope, torch_state

        torch_state.TorchState.restore = lambda self: None  # type: ignore[method-assign]
        numerics_scope._restore_threads = lambda state: None
        numerics_scope._restore_cublas = lambda value: None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    order = os.environ.get(ORDER)
    if not order:
        return
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    items[:] = [item for name in in_order(order, list(modules)) for item in _arranged(order, modules[name], name)]
