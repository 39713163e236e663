"""Can this Python run the harness? Import every module of it, and every package its code imports.

    python benchmarks/gpu_import_check.py [--optional ray,...]

The first phase of benchmarks/gpu_lease.sh (the GPU machine is bare and offline: a package missing
there must travel as a wheel, benchmarks/gpu_wheels.txt). Two checks, both in a few seconds:

1. every module under harness/, lanes/, golden/ and reports/ (pkgutil's walk), the benchmark scripts
   the GPU job runs and the checkout's modules they import (tests/runner_digest.py), one by one;
2. every third-party package named by an ``import`` anywhere in that code (read from the source
   with ``ast``, so the imports kept inside functions, scipy's and numba's say, are checked too),
   imported once. Packages of an extra the GPU job does not use (Triton's, Ray's) are listed as
   optional: their absence is reported, not failed;
3. the versions installed against pyproject.toml's dependencies (failed if unmet), and against
   those packages' own requirements, followed down (reported: the image's typing-extensions may be
   older than the pydantic-core that travels asks for).

Prints one line per failure (the module, the exception, the missing package) and the versions and
places of the packages found, then exits 1 if anything required failed, else 0.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import pkgutil
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "lanes", "golden", "reports")
# the benchmark scripts benchmarks/gpu_nightly.sh and gpu_lease.sh run
SCRIPTS = ("gpu_summary.py", "bench_harness_cost.py", "bench_device_busy.py", "gpu_copy_overlap.py", "device_gaps.py")
# modules of the checkout outside the four packages that those scripts import (gpu_copy_overlap.py's digest)
EXTRA_MODULES = ("tests.runner_digest",)
# packages of extras the GPU job does not use: reported, never failed
OPTIONAL = frozenset({"ray", "tritonclient", "pytriton", "gevent", "triton_python_backend_utils"})
OWN = frozenset(PACKAGES)


def own_modules() -> list[str]:
    """Every module of the four packages, by pkgutil's walk of the working tree (not an installed copy)."""
    names: list[str] = []
    for package in PACKAGES:
        names.append(package)
        path = [str(REPO / package)]
        names += [
            m.name
            for m in pkgutil.walk_packages(path, prefix=f"{package}.", onerror=lambda _n: None)
            if not m.name.endswith(".__main__")
        ]  # importing a __main__ runs the program
    return names


def third_party_imports(files: list[Path]) -> dict[str, list[str]]:
    """Top-level package -> the files whose code imports it (stdlib and the harness's own left out)."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    local = {p.stem for p in (REPO / "benchmarks").glob("*.py")} | {m.split(".")[0] for m in EXTRA_MODULES}
    found: dict[str, list[str]] = {}
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top not in stdlib and top not in OWN and top not in local:
                    found.setdefault(top, []).append(str(path.relative_to(REPO)))
    return found


def requirement_problems() -> tuple[list[str], list[str]]:
    """pyproject.toml's dependencies against the installed versions (failures), then their own requirements,
    followed down (notes: a carried wheel the image's copy is too old for, pydantic-core's typing-extensions
    say; torch's own are the image's business and not followed). Needs ``packaging``; without it, none."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return [], ["packaging is not installed: the versions were not checked"]
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    failures: list[str] = []
    notes: list[str] = []
    todo = [(Requirement(r), "pyproject.toml") for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        req, by = todo.pop(0)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            version = None
        if version is None or (req.specifier and not req.specifier.contains(version, prereleases=True)):
            line = f"{by} needs {req}: {'not installed' if version is None else version + ' installed'}"
            (failures if by == "pyproject.toml" else notes).append(line)
        key = req.name.lower().replace("_", "-")
        if version is None or key in seen or key == "torch":
            continue
        seen.add(key)
        todo += [(Requirement(r), f"{req.name} {version}") for r in metadata.requires(req.name) or []]
    return failures, notes


def _failure(name: str, exc: BaseException, missing: dict[str, int]) -> str:
    gone = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    key = (gone or "").split(".")[0] or type(exc).__name__
    missing[key] = missing.get(key, 0) + 1
    return f"{name}: {last}" + (f" (missing: {gone})" if gone else "")


def _version(top: str) -> str:
    dists = metadata.packages_distributions().get(top) or [top]
    try:
        return f"{dists[0]} {metadata.version(dists[0])}"
    except metadata.PackageNotFoundError:
        return top


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--optional",
        default=",".join(sorted(OPTIONAL)),
        help="comma-separated packages whose absence is reported, not failed",
    )
    args = parser.parse_args(argv)
    optional = {n for n in args.optional.split(",") if n}
    start = time.perf_counter()
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    failed: list[str] = []
    missing: dict[str, int] = {}  # missing package (or exception type) -> failures it explains

    modules = [*own_modules(), *EXTRA_MODULES]
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - every failure is reported, none stops the check
            failed.append(_failure(name, exc, missing))
    for script in SCRIPTS:
        path = REPO / "benchmarks" / script
        spec = importlib.util.spec_from_file_location(f"_gpu_check_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        try:
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        except BaseException as exc:  # noqa: BLE001
            failed.append(_failure(f"benchmarks/{script}", exc, missing))

    files = [p for package in PACKAGES for p in (REPO / package).rglob("*.py")]
    files += [REPO / "benchmarks" / s for s in SCRIPTS]
    imports = third_party_imports(files)
    found, absent = [], []
    for top in sorted(imports):
        try:
            module = importlib.import_module(top)
        except BaseException as exc:  # noqa: BLE001
            line = (
                _failure(top, exc, missing if top not in optional else {})
                + f" (imported by {imports[top][0]}"
                + (f" and {len(imports[top]) - 1} more)" if len(imports[top]) > 1 else ")")
            )
            (absent if top in optional else failed).append(line)
            continue
        where = Path(getattr(module, "__file__", None) or "?").parent
        found.append(f"{_version(top)} ({where})")

    unmet, notes = requirement_problems()
    failed += [f"requirement: {line}" for line in unmet]

    print(f"gpu_import_check: Python {sys.version.split()[0]} at {sys.executable}")
    print(
        f"gpu_import_check: {len(modules)} modules and {len(SCRIPTS)} scripts imported, "
        f"{len(imports)} third-party packages named in the code"
    )
    for line in found:
        print(f"  found {line}")
    for line in absent:
        print(f"  optional, absent: {line}")
    for line in notes:
        print(f"  note: {line}")
    for line in failed:
        print(f"  FAILED {line}")
    if missing:
        print(
            "gpu_import_check: missing, by the failures each explains: "
            + ", ".join(f"{name} ({n})" for name, n in sorted(missing.items(), key=lambda kv: -kv[1]))
        )
    verdict = "FAILED" if failed else "ok"
    print(f"gpu_import_check: {verdict} ({len(failed)} failures) in {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
