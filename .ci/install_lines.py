#!/usr/bin/env python3
"""Every documented install line, each in a fresh venv: does the harness it gives work?

A newcomer runs one of the lines the README and docs/*.md print, in a venv of their own, and
expects a working ``harness``. The resolver picks the newest of everything an extra allows; a
set that installs cleanly can still fail at import (nvidia-pytriton pins numpy < 2, and pyarrow
26 needs numpy 2). So for each documented line this creates a venv from nothing (no system site
packages), installs torch first (the CPU build, as the README says; ``torch==2.13.0``, the wheel
on this machine's disk, else the PyTorch CPU index), then the line, and runs ``harness
--version``, ``pip check``, a tiny command (``harness corpus synth``, which imports numpy,
pyarrow and the model) and ``harness init`` (the annotated configuration the package ships).
Lines documented as run inside an existing install (the hints the harness prints: ``pip install
'diar-lane-harness[ray]'``) run after the line of their venv.

Usage: ``python .ci/install_lines.py [--keep] [--only NAME ...]`` (``tox -e install``). The venvs are
built at once, each in its own folder; pip's cache is reused (its default folder): the second run
downloads nothing. Exit 0 when every line works; 1 with one line per failure otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# --no-compile: no .pyc for torch, scipy, ray (minutes of CPU on 2 cores); what resolves and imports is the same
PIP = ("--quiet", "--no-compile")


@dataclass(frozen=True)
class Step:
    """One documented ``pip install`` line (the words after ``pip install``) and where it is documented."""

    args: tuple[str, ...]
    documented_in: str
    checks: tuple[str, ...] = ()  # extra Python snippets that must run in the venv after this step
    collect_tests: bool = False  # then pytest --collect-only of the whole suite: nothing errors at collection

    @property
    def line(self) -> str:
        return "pip install " + " ".join(f"'{a}'" if "[" in a else a for a in self.args)


@dataclass(frozen=True)
class Venv:
    name: str
    steps: tuple[Step, ...]


TRITON_IMPORTS = (
    "import numpy, pyarrow, tritonclient.http, pytriton; "
    "import lanes.backends.triton.triton_backend, lanes.backends.triton.server"
)
RAY_IMPORTS = "import ray, numpy, pyarrow; from harness.pipeline.distributed import import_ray; import_ray()"

VENVS = (
    # README "Installing": the CPU and the GPU machine's line (here with the CPU torch installed first); then the
    # hint the harness prints for --backend http:// in that numpy-2 venv: it must move pyarrow to a numpy-1 build too.
    Venv(
        "plain",
        (
            Step(("-e", "."), "README.md"),
            Step(
                ("diar-lane-harness[triton]",), "harness/pipeline/backends.py (the --backend hint)", (TRITON_IMPORTS,)
            ),
        ),
    ),
    # README "Installing" (the triton extra) and docs/triton.md: the Triton lane.
    Venv("triton", (Step(("-e", ".[triton]"), "README.md, docs/triton.md", (TRITON_IMPORTS,)),)),
    # README "Installing": the tests outside tox (every module collects; tests of absent extras skip), then the
    # ray extra into that install, then docs/nightly.md's Ray line (the hint --ray prints): already satisfied.
    Venv(
        "test",
        (
            Step(("-e", ".[test]"), "README.md", collect_tests=True),
            Step(("-e", ".[ray]"), "README.md", (RAY_IMPORTS,)),
            Step(
                ("diar-lane-harness[ray]",),
                "docs/nightly.md, harness/pipeline/distributed.py (the --ray hint)",
                (RAY_IMPORTS,),
            ),
        ),
    ),
)

# README "Installing": torch first, as every venv above gets it (torch_args: the local wheel, else the CPU index)
TORCH_LINES = ("pip install " + TORCH, f"pip install {TORCH} --index-url {TORCH_CPU_INDEX}")
# Every `pip install` line the docs hold must be one of these, or be explicitly not about this project.
DOCUMENTED = (*(step.line for venv in VENVS for step in venv.steps), *TORCH_LINES)
NOT_THIS_PROJECT = (
    "pip install tox",
    "pip install --no-index --no-deps",
)  # the GPU lease's offline wheels (benchmarks/gpu_lease.sh)


def run(cmd: list[str], cwd: Path, env: dict[str, str], log: list[str], timeout: float = 1800) -> bool:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    shown = " ".join(str(c) for c in cmd)
    log.append(f"  $ {shown}  -> exit {proc.returncode} ({time.perf_counter() - start:.0f} s)")
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        log.extend("    | " + t for t in tail)
    return proc.returncode == 0


def torch_args() -> list[str]:
    """torch first, the CPU build: the wheel on this machine's disk (pip's find-links), else PyTorch's CPU index."""
    local = any(
        Path(d).glob("torch-2.13.0+cpu-*.whl")
        for d in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split()
        if Path(d).is_dir()
    )
    return [TORCH] if local else [TORCH, "--index-url", TORCH_CPU_INDEX]


def check_venv(venv: Venv, root: Path) -> tuple[bool, list[str], float]:
    start = time.perf_counter()
    log: list[str] = [f"venv {venv.name}:"]
    home = root / venv.name
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{home / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = root / f"{venv.name}-work"
    work.mkdir(parents=True)
    py, harness = str(home / "bin" / "python"), str(home / "bin" / "harness")
    ok = run([sys.executable, "-m", "venv", str(home)], REPO, env, log)
    ok = ok and run([py, "-m", "pip", "install", *PIP, *torch_args()], REPO, env, log)
    for i, step in enumerate(venv.steps):
        if not ok:
            break
        log.append(f"  documented in {step.documented_in}: {step.line}")
        ok = run([py, "-m", "pip", "install", *PIP, *step.args], REPO, env, log)
        ok = ok and run([py, "-m", "pip", "check"], work, env, log)
        ok = ok and run([harness, "--version"], work, env, log)
        ok = ok and run(
            [harness, "corpus", "synth", f"c{i}.parquet", "--blocks", "2", "--model", "small"], work, env, log
        )
        ok = ok and run([harness, "init", f"h{i}.toml"], work, env, log)  # the annotated config the package ships
        for snippet in step.checks:
            ok = ok and run([py, "-c", snippet], work, env, log)
        if step.collect_tests:  # the extras this venv lacks (ray, triton) skip, they do not error
            ok = ok and run(
                [py, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", str(REPO / "tests")],
                REPO,
                env,
                log,
            )
    seconds = time.perf_counter() - start
    log.append(f"  {'ok' if ok else 'FAILED'} in {seconds:.0f} s")
    return ok, log, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the venvs (their folder is printed)")
    parser.add_argument("--only", nargs="*", default=None, help="only these venvs: " + ", ".join(v.name for v in VENVS))
    args = parser.parse_args()
    chosen = [v for v in VENVS if args.only is None or v.name in args.only]
    root = Path(tempfile.mkdtemp(prefix="harness-install-"))
    failures, total = [], time.perf_counter()
    try:
        # the venvs at once: each is mostly pip waiting for the index and the disk (CI time: 311 s one after
        # another); their logs are printed whole, in this order, when all are done
        with ThreadPoolExecutor(len(chosen) or 1) as pool:
            results = list(pool.map(lambda venv: check_venv(venv, root), chosen))
        for venv, (ok, log, _) in zip(chosen, results, strict=True):
            print("\n".join(log), flush=True)
            if not ok:
                failures.append(
                    f"install: venv {venv.name}: "
                    + "; then ".join(s.line for s in venv.steps)
                    + " does not give a working harness (its log above)"
                )
    finally:
        if args.keep:
            print(f"venvs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(
        f"{len(chosen) - len(failures)} of {len(chosen)} venvs give a working harness "
        f"({time.perf_counter() - total:.0f} s)"
    )
    for line in failures:
        print(line, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
