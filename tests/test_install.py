"""Every documented install line is one ``tox -e install`` runs in a fresh venv (``.ci/install_lines.py``).

The install check itself needs the network or a wheel cache and minutes per venv: it is its own tox
environment (in ``env_list``, so ``tox`` and ``.ci/run`` run it). These tests are the fast half,
in the main suite: a line added to the README or docs/*.md, or to a hint the harness prints, that
the install check does not run fails here; and the extras keep the constraints the check found
they need (nvidia-pytriton pins numpy < 2; pyarrow 26 needs numpy 2 at import, and says so only
then).
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def install_lines_module():
    spec = importlib.util.spec_from_file_location("install_lines", ROOT / ".ci" / "install_lines.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("install_lines", module)
    spec.loader.exec_module(module)
    return module


def pip_lines(text: str) -> list[str]:
    """Every ``pip install ...`` a reader would copy (in a code block, inline code or a message): its words up to
    the first that is not part of it (a comment, ``&&``, a closing quote or parenthesis)."""
    token = r"(?:'[^'\n]*'|[\w.:/\[\],=<>+-]+)"
    return [m.group(0) for m in re.finditer(rf"pip install(?: {token})+", text)]


def unchecked(text: str) -> list[str]:
    """The lines in ``text`` that the install check neither runs nor declares not this project's."""
    mod = install_lines_module()
    return [
        line
        for line in pip_lines(text)
        if line not in mod.DOCUMENTED and not any(line.startswith(other) for other in mod.NOT_THIS_PROJECT)
    ]


def test_every_documented_install_line_is_run_by_the_install_check():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = {page.name: unchecked(page.read_text()) for page in pages}
    assert not any(missing.values()), missing
    readme = pip_lines((ROOT / "README.md").read_text())
    assert {"pip install -e '.[triton]'", "pip install -e .", "pip install -e '.[test]'"} <= set(readme), readme


def test_every_install_hint_the_harness_prints_is_run_by_the_install_check():
    from harness.pipeline.distributed import RAY_INSTALL

    sources = [ROOT / "harness" / "pipeline" / "backends.py", ROOT / "lanes" / "backends" / "triton" / "repository.py"]
    hints = [RAY_INSTALL, *(line for src in sources for line in pip_lines(src.read_text()))]
    assert len(hints) >= 3
    mod = install_lines_module()
    assert [h for h in hints if h not in mod.DOCUMENTED] == []


def test_an_unchecked_line_is_found():
    """Negative control: a new documented line the check does not run is reported."""
    text = "```bash\npip install -e '.[docs]'    # a new extra\npip install tox\n```\nor `pip install -e .`"
    assert unchecked(text) == ["pip install -e '.[docs]'"]


def test_the_torch_line_a_cpu_user_copies_is_pinned_and_checked():
    """The CPU recipe's torch lines are the ones every venv of the check installs (torch==2.13.0, from the disk or
    the CPU index); an unpinned torch line is one the check does not run (negative control)."""
    readme = pip_lines((ROOT / "README.md").read_text())
    torch_lines = [line for line in readme if line.startswith("pip install torch")]
    assert torch_lines == list(install_lines_module().TORCH_LINES)
    assert unchecked("pip install torch --index-url https://download.pytorch.org/whl/cpu") != []


def test_the_triton_extra_names_the_numpy_1_set_it_needs():
    """pip installed pyarrow 26 (needs numpy 2) beside the numpy 1.26 nvidia-pytriton pins: every command failed."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    triton = {r.name: r for r in map(Requirement, project["optional-dependencies"]["triton"])}
    assert "nvidia-pytriton" in triton and not triton["numpy"].specifier.contains("2.0.0")
    assert triton["numpy"].specifier.contains("1.26.4")
    assert not triton["pyarrow"].specifier.contains("26.0.1") and triton["pyarrow"].specifier.contains("25.0.1")


def test_the_install_check_is_part_of_tox():
    tox = (ROOT / "tox.ini").read_text()
    env_list = re.search(r"^env_list = (.*)$", tox, re.MULTILINE).group(1)
    assert "install" in [e.strip() for e in env_list.split(",")]
    assert "[testenv:install]" in tox and ".ci/install_lines.py" in tox and "skip_install = true" in tox
