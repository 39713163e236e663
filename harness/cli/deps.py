"""A dependency that fails to import is the environment's fault, not a bug in the harness.

``pip`` can install a set that does not fit together (pyarrow 26, built for numpy 2, beside the
numpy 1.26 that nvidia-pytriton pins): every command then dies in an import. That is exit 2 with
one line naming the package that failed, the versions installed and what to do, not exit 3
("a bug in the harness"). An ImportError raised by the harness's own modules (a missing module
of its own, a name it imports that does not exist) stays a bug.
"""

from __future__ import annotations

import sys
from importlib import metadata

from harness.base.errors import one_line
from harness.cli.version import installed

OWN = frozenset({"harness", "lanes", "golden", "reports"})
# Named in every such line: the usual suspects of a set that does not fit together.
ALWAYS = ("numpy", "pyarrow", "torch")
FIX = (
    "reinstall into a fresh venv with one of the README's install lines (torch first, then pip install -e ., or "
    "pip install -e '.[triton]' for the Triton lane), or run `pip check`; `harness --version` lists what is "
    "installed"
)


def _top(module: str | None) -> str:
    return (module or "").split(".")[0]


def failing_module(exc: ImportError) -> str | None:
    """The top-level module of a third-party package whose import failed, or None (the harness's own)."""
    missing = _top(getattr(exc, "name", None))
    if isinstance(exc, ModuleNotFoundError) and missing:
        return None if missing in OWN else missing
    frames, tb = [], exc.__traceback__
    while tb is not None:  # outermost (main) first
        # a frame's globals: Python's own namespace mapping, where a module keeps its name
        name = _top(tb.tb_frame.f_globals.get("__name__"))
        if name and name != "importlib" and not name.startswith("_"):
            frames.append(name)
        tb = tb.tb_next
    own = [i for i, name in enumerate(frames) if name in OWN]
    inner = frames[own[-1] + 1 :] if own else frames
    if inner:  # the package the harness's innermost frame called into raised it
        return inner[0]
    return None if not missing or missing in OWN else missing


def distribution_of(module: str) -> str:
    try:
        names = metadata.packages_distributions().get(module) or []
    except Exception:  # metadata of a broken install must not hide the line being written
        names = []
    return names[0] if names else module


def dependency_failure(exc: BaseException) -> str | None:
    """The ``<what>`` of the one-line error for a dependency that failed to import, or None."""
    chain: BaseException | None = exc
    while chain is not None and not isinstance(chain, ImportError):
        chain = chain.__cause__ or chain.__context__
    if chain is None:
        return None
    module = failing_module(chain)
    if module is None:
        return None
    dist = distribution_of(module)
    version = installed(dist)
    named = [dist, *(n for n in ALWAYS if n != dist.lower())]
    found = ", ".join(f"{n} {installed(n) or 'not installed'}" for n in named)
    what = "is not installed" if version is None else f"{version} failed to import"
    return (
        f"dependency {dist} {what}: {type(chain).__name__}: {one_line(chain)} (installed: {found}; Python "
        f"{sys.version.split()[0]}): the installed packages do not fit together; {FIX}"
    )
