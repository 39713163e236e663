"""``harness --version`` and the versions named when a dependency fails to import.

Versions are read from the installed distributions' metadata, never by importing them: a
broken set (pyarrow built for numpy 2 beside numpy 1.x) must still answer ``--version``, and
the line that reports the broken import must not fail the same way.
"""

from __future__ import annotations

import platform
from importlib import metadata

import harness

DISTRIBUTION = "diar-lane-harness"
# What decides whether the harness imports and what numbers it computes; the extras' own packages.
CORE = ("torch", "numpy", "pyarrow", "scipy", "numba", "pydantic", "typer")
EXTRAS = {"triton": ("tritonclient", "nvidia-pytriton"), "ray": ("ray",)}


def installed(name: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions(names: tuple[str, ...]) -> str:
    return ", ".join(f"{n} {installed(n) or 'not installed'}" for n in names)


def version_line() -> str:
    """One line: the harness, Python, the core dependencies, and which extras are installed."""
    extras = ", ".join(
        f"{extra} {'yes' if all(installed(n) for n in names) else 'no'}" for extra, names in EXTRAS.items()
    )
    return (
        f"harness {harness.__version__} ({DISTRIBUTION}; Python {platform.python_version()}; "
        f"{versions(CORE)}; extras: {extras})"
    )
