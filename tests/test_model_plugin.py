"""``pytest --harness-model SPEC`` in another project's pytest: the model check's lines as tests, one per check.

A separate pytest run in another folder (the plugin named with ``-p``, as the ``pytest11`` entry point names it
once the harness is installed): an honest model passes every check's test, one whose answer drifts run to run
fails that check's test (and the isolation one it leaves unjudged), a model without fingerprint its describe()
test, a spec naming no model every test with one line; the team's own tests run beside them, and the fixture
judges a model inside a test of theirs.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from lanes.models.model_check.check_report import CHECKS

ROOT = Path(__file__).resolve().parent.parent
MODELS = "tests.contract_models"
# the entry point loads the plugin where the harness is installed (pip, tox); named with -p where it is not
INSTALLED = any(e.name == "harness_model" for e in importlib.metadata.entry_points(group="pytest11"))
PLUGIN = [] if INSTALLED else ["-p", "lanes.models.model_check.contract_plugin"]

THEIR_TESTS = textwrap.dedent("""
    def test_their_own_test_still_runs():
        assert True


    def test_the_fixture_passes_an_honest_model(check_harness_model):
        report = check_harness_model("lanes.models.null_model:small")
        assert report.passed and report.line("isolation at k=2").status == "ok"


    def test_the_fixture_fails_a_model_without_fingerprint(check_harness_model):
        check_harness_model("tests.contract_models:no_fingerprint")
""")


def outcomes(out: str) -> dict[str, str]:
    """Test id -> PASSED / FAILED, from ``pytest -rA``'s short summary."""
    found = {}
    for line in out.splitlines():
        for word in ("PASSED", "FAILED"):
            if line.startswith(word + " "):
                found[line[len(word) + 1 :].split(" - ")[0].strip()] = word
    return found


def test_a_teams_pytest_runs_every_check_as_a_test(tmp_path):
    (tmp_path / "test_theirs.py").write_text(THEIR_TESTS)
    specs = ("lanes.models.null_model:small", f"{MODELS}:drifting", f"{MODELS}:no_fingerprint", "nope:nope")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            *PLUGIN,
        ]
        + [f"--harness-model={spec}" for spec in specs]
        + [str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr  # tests failed (not 2-4: a usage or plugin error)
    found = outcomes(out)
    honest = {f"harness-model[lanes.models.null_model:small]::{check}" for check in CHECKS}
    assert {found.get(test) for test in honest} == {"PASSED"}, out
    failed = {test for test, outcome in found.items() if outcome == "FAILED"}
    drifting = "harness-model[tests.contract_models:drifting]::"
    assert {t for t in failed if "drifting" in t} == {f"{drifting}same answer twice", f"{drifting}isolation at k=2"}
    assert {t for t in failed if "fingerprint" in t} == {
        "harness-model[tests.contract_models:no_fingerprint]::describe()",
        "test_theirs.py::test_the_fixture_fails_a_model_without_fingerprint",
    }, failed
    assert {t for t in failed if "nope" in t} == {f"harness-model[nope:nope]::{check}" for check in CHECKS}
    assert found["test_theirs.py::test_their_own_test_still_runs"] == "PASSED"
    assert found["test_theirs.py::test_the_fixture_passes_an_honest_model"] == "PASSED"
    assert "harness: error: model spec 'nope:nope': cannot import 'nope'" in out
    assert "FAIL  same answer twice: block A alone, twice: OP 0: " in out  # the failing check's own line
    assert "skip  isolation at k=2: " in out and "not judged: the same packed call does not repeat bitwise" in out


def test_without_the_option_the_plugin_adds_no_test(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *PLUGIN,
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr


def test_the_plugin_is_registered_for_every_pytest_where_the_harness_is_installed():
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]
    assert entry_points["harness_model"] == "lanes.models.model_check.contract_plugin"
