"""The ``harness`` program in a subprocess, in a small workspace: the catalogue's configuration and a 4-block
golden of the small model (what the identity, committed-truth and wait tests run against)."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.catalogue_setups import CFG, CONFIG, QUIET

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def harness(ws: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    """``harness ARGS`` run in ``ws`` as a user would (its own process), the laws' cache off; ``env`` added."""
    full = {k: v for k, v in os.environ.items() if k not in ("HARNESS_DEBUG", "HARNESS_FAULT")}
    full.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", HARNESS_LAWS_CACHE="off", **env)
    return subprocess.run(
        [PY, "-m", "harness.cli", *args], cwd=ws, env=full, capture_output=True, text=True, timeout=timeout
    )


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The one ``harness: error:`` line of a command that exited 2 (asserted), without a traceback."""
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


_PRISTINE: list[Path] = []  # the workspace built once per test process, copied for every module that asks


def make_workspace(root: Path) -> Path:
    """``root`` holding ``harness.toml``, ``c.parquet`` and ``goldens/r`` (built once per process, then copied:
    every path in it is relative to the workspace)."""
    if not _PRISTINE:
        pristine = Path(tempfile.mkdtemp(prefix="harness-workspace-"))
        atexit.register(shutil.rmtree, pristine, True)
        (pristine / "harness.toml").write_text(CONFIG)
        assert harness(pristine, "corpus", "synth", "c.parquet", "--blocks", "4", *CFG).returncode == 0
        done = harness(pristine, "golden", "record", "--corpus", "c.parquet", *CFG, *QUIET)
        assert done.returncode == 0, done.stderr
        _PRISTINE.append(pristine)
    shutil.copytree(_PRISTINE[0], root, dirs_exist_ok=True)
    return root
