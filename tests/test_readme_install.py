"""The README's flow from the demo to a shell, in a clean clone: ``tox -e demo``, then the line that gives the
``harness`` command in the demo's venv, then the README's own install line, verbatim.

Before: tox (4.67) left a PEP 832 ``.venv`` pointer file in the checkout after ``tox -e demo``, and the README's
next line, ``python3.11 -m venv .venv``, failed ("Unable to create directory .venv"; then ".venv/bin/activate:
Not a directory"). tox.ini now says ``venv_redirect = false``; the negative control removes that line and sees
the install line fail again.

Minutes (tox builds the demo's venv, torch included): marked slow and docs, run in ``tox -e triton`` beside the
docs pages' blocks. The demo itself is the one tox runs; it is given ``--help`` here, since what the flow needs of
it is its venv and what it leaves in the checkout, not its six minutes of networks.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()

pytestmark = [pytest.mark.slow, pytest.mark.docs]


def tox_command() -> list[str]:
    if importlib.util.find_spec("tox") is not None:
        return [sys.executable, "-m", "tox"]
    found = shutil.which("tox")
    if found is None:
        pytest.skip("tox is not installed here (tox -e triton installs it for this test)")
    return [found]


def clean_env() -> dict[str, str]:
    """The environment of a user's fresh shell: nothing of the tox environment or the test's own venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOX_", "VIRTUAL_ENV", "PYTHONPATH", "PIP_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".tox" not in p)
    env["PIP_NO_COMPILE"] = "1"  # as .ci/run: the same venv, without byte-compiling torch
    return env


def readme_lines() -> tuple[str, str, str]:
    """The first command's tox call, the line after it that activates the demo's venv, the install section's venv."""
    first = re.search(r"^pip install tox && (tox -e demo)$", README, re.MULTILINE)
    shell = re.search(r"After the first command.*?```bash\n(.+?)\n```", README, re.DOTALL)
    venv = re.search(r"In a fresh venv \(`(python3\.11 -m venv \.venv && \. \.venv/bin/activate)`\)", README)
    assert first and shell and venv, "README.md: the demo, its shell line or the install section's venv line moved"
    return first.group(1), shell.group(1), venv.group(1)


def bash(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_after_the_demo_the_harness_command_and_the_install_line_work_verbatim(tmp_path):
    tox = tox_command()
    demo, shell, venv = readme_lines()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=300)
    env = clean_env()
    ran = subprocess.run(
        [*tox, *demo.split()[1:], "--", "--help"], cwd=clone, env=env, capture_output=True, text=True, timeout=1500
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert not (clone / ".venv").exists(), "tox left a .venv in the checkout"

    harness = bash(shell, clone, env)
    assert harness.returncode == 0 and harness.stdout.startswith("harness "), harness.stdout + harness.stderr

    made = bash(f"{venv} && python -c 'import sys; print(sys.prefix)'", clone, env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert Path(made.stdout.split()[-1]).resolve() == (clone / ".venv").resolve(), made.stdout

    # negative control: without venv_redirect = false, tox writes its pointer file and the same line fails
    shutil.rmtree(clone / ".venv")
    tox_ini = clone / "tox.ini"
    tox_ini.write_text(re.sub(r"^venv_redirect = false\n", "", tox_ini.read_text(), flags=re.MULTILINE))
    again = subprocess.run(
        [*tox, *demo.split()[1:], "--", "--help"], cwd=clone, env=env, capture_output=True, text=True, timeout=900
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    if not (clone / ".venv").is_file():
        pytest.skip("this tox writes no .venv pointer file: the negative control cannot show the failure")
    assert bash(venv, clone, env).returncode != 0
