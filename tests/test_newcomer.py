"""A newcomer on a fresh machine: the small surprises are gone.

- ``harness --version`` answers, with the versions that decide whether the harness works, even
  where a dependency fails to import;
- a dependency that fails to import (pyarrow 26 beside numpy 1.26) is exit 2, one line naming the
  package and the versions installed; an import error of the harness's own code stays a bug (3);
- tests of an optional extra skip, with the reason, when the extra is absent (ray, triton);
- ``golden verify`` with another model is refused before any work, naming both sides;
- ``--golden goldens`` (the folder of goldens) lists the goldens inside, at once;
- a misspelt configuration key gets a "did you mean";
- ``harness serve`` stopped by SIGTERM says so and exits 0;
- what the README's flow writes into a checkout is ignored by git;
- model contract stands in the docs, with no reference to a file outside the repository.
The documented install lines themselves run in fresh venvs in ``tox -e install``
(``.ci/install_lines.py``); tests/test_install.py checks that every documented line is one of them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import ConfigError
from harness.release_config import config_from_dict
from tests.cli_run import harness_cli

ROOT = Path(__file__).resolve().parents[1]


run = harness_cli


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("harness: error: "), err
    return lines[0]


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (extra.pop("PYTHONPATH", ""), str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


# ---------------------------------------------------------------------------- --version, dependencies


def test_version_names_the_harness_python_and_the_core_dependencies(capsys, monkeypatch):
    from importlib import metadata

    import harness

    code, out, err = run(capsys, monkeypatch, "--version")
    assert code == 0 and not err
    assert out.startswith(f"harness {harness.__version__} (") and len(out.splitlines()) == 1
    for name in ("torch", "numpy", "pyarrow"):
        assert f"{name} {metadata.version(name)}" in out
    assert "extras: triton " in out and "ray " in out


@pytest.fixture
def numpy1_pyarrow(tmp_path) -> Path:
    """A pyarrow that fails at import as pyarrow 26 does beside numpy 1.26 (the issue's broken set)."""
    fake = tmp_path / "site" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("pyarrow requires NumPy 2.0 or newer, found 1.26.4")\n')
    return fake.parent


def test_a_dependency_that_fails_to_import_is_status_2_naming_it_and_the_versions(tmp_path, numpy1_pyarrow):
    """Before: ``harness: internal error in 'corpus synth' ... (a bug in the harness)``, exit 3."""
    from importlib import metadata

    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "corpus", "synth", "c.parquet", "--blocks", "1", "--model", "small"],
        cwd=tmp_path,
        env=_env(PYTHONPATH=str(numpy1_pyarrow)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stderr)
    assert line.startswith("harness: error: corpus synth: dependency pyarrow ")
    assert "pyarrow requires NumPy 2.0 or newer" in line and "a bug" not in line
    assert f"numpy {metadata.version('numpy')}" in line and f"torch {metadata.version('torch')}" in line
    assert "pip install -e '.[triton]'" in line and not (tmp_path / "c.parquet").exists()
    version = subprocess.run(
        [sys.executable, "-m", "harness.cli", "--version"],
        cwd=tmp_path,
        env=_env(PYTHONPATH=str(numpy1_pyarrow)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert version.returncode == 0 and version.stdout.startswith("harness "), version.stderr  # still answers


def test_an_import_error_of_the_harness_itself_stays_an_internal_error(capsys, monkeypatch, tmp_path):
    """Negative control: a module of the harness that cannot be imported is a bug (exit 3), not the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "harness.corpus.synth", None)
    code, _, err = run(capsys, monkeypatch, "corpus", "synth", "c.parquet", "--blocks", "1", "--model", "small")
    assert code == 3 and "harness: internal error in 'corpus synth'" in err and "ModuleNotFoundError" in err


def test_which_import_errors_are_the_environments():
    from harness.cli.deps import dependency_failure

    assert dependency_failure(ModuleNotFoundError("No module named 'harness.nope'", name="harness.nope")) is None
    assert dependency_failure(ValueError("not an import")) is None
    missing = dependency_failure(ModuleNotFoundError("No module named 'scipy'", name="scipy"))
    assert missing is not None and missing.startswith("dependency scipy ")
    package: dict = {"__name__": "fakepkg.sub"}  # a third-party package raising at import, called by the harness
    exec("def load():\n    raise ImportError('numpy.core.multiarray failed to import')\n", package)
    caller: dict = {"__name__": "harness.fake", "load": package["load"]}
    exec("def call():\n    load()\n", caller)
    try:
        caller["call"]()
    except ImportError as exc:
        raised_inside = exc
    failure = dependency_failure(raised_inside)
    assert failure is not None and failure.startswith("dependency fakepkg is not installed: ImportError")


# ---------------------------------------------------------------------------- extras absent: tests skip


def test_tests_of_absent_extras_skip_with_the_reason(tmp_path):
    """With ray and tritonclient/pytriton absent (as after ``pip install -e '.[test]'``), the ray modules and
    the Triton user-model module skip, saying why; before, test_ray.py failed collection and the user-model
    tests errored in setup."""
    blocked = (
        "import sys; [sys.modules.__setitem__(m, None) for m in ('ray', 'tritonclient', 'pytriton')]; "
        "import pytest; sys.exit(pytest.main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            blocked,
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "tests/test_ray.py",
            "tests/test_ray_audit.py",
            "tests/triton/test_triton_user_model.py",
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "error" not in out.lower().replace("errors", ""), out
    assert "the --ray tests need the 'ray' extra" in out and "the audit --ray tests need the 'ray' extra" in out
    assert "the Triton tests need the 'triton' extra" in out
    assert re.search(r"\b\d+ skipped\b", out) and " passed" not in out, out


# ---------------------------------------------------------------------------- golden verify, --golden goldens


def test_verify_with_a_model_of_another_geometry_is_refused_before_the_model_is_built(
    capsys, monkeypatch, recorded_golden, no_model_building
):
    """Before: minutes of the exact lane, then ``WEIGHTS='width 56': must be frames per window (589)``."""
    code, _, err = run(
        capsys, monkeypatch, "golden", "verify", str(recorded_golden.path), "--model", "full", "--no-progress"
    )
    assert code == 2, err
    line = one_error_line(err)
    assert "golden of another model geometry" in line and "frames_per_window 56 vs 589" in line
    assert "(golden vs model 'full')" in line and "harness golden show" in line


def test_verify_with_other_weights_is_refused_before_any_block_runs_naming_both_fingerprints(
    capsys, monkeypatch, recorded_golden
):
    """Before: the exact lane ran over the whole corpus, then exit 1 ("drift")."""
    from harness.pipeline import record
    from lanes.models.model_api import load_model

    def refuse(*_a, **_k):
        raise AssertionError("a lane ran before the refusal")

    monkeypatch.setattr(record, "run_lanes", refuse)
    other = load_model("small", seed=1).fingerprint
    code, _, err = run(
        capsys,
        monkeypatch,
        "golden",
        "verify",
        str(recorded_golden.path),
        "--model",
        "small",
        "--set",
        "model.seed=1",
        "--no-progress",
    )
    assert code == 2, err
    line = one_error_line(err)
    assert "golden of another model" in line and recorded_golden.fingerprint in line and other in line
    assert "--set model.seed=N" in line


WHERE = {"run": ("--runs", "{tmp}/runs"), "nightly": ("--out", "{tmp}/n")}


@pytest.mark.parametrize("command", sorted(WHERE))
def test_run_and_nightly_refuse_another_reference_geometry_before_the_model_is_built(
    capsys, monkeypatch, tmp_path, recorded_golden, no_model_building, command
):
    """Before: the full model was built (tens of seconds on a loaded machine), then the fingerprints differed."""
    where = [a.format(tmp=tmp_path) for a in WHERE[command]]
    code, _, err = run(
        capsys, monkeypatch, command, "--golden", str(recorded_golden.path), *where, "--model", "full", "--no-progress"
    )
    assert code == 2, err
    line = one_error_line(err)
    assert "golden of another model geometry" in line and "frames_per_window 56 vs 589" in line
    assert "(golden vs model 'full')" in line and "harness golden show" in line
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize("command", sorted(WHERE))
def test_a_golden_of_other_weights_is_refused_before_the_laws_and_the_warm_up(
    capsys, monkeypatch, tmp_path, recorded_golden, command
):
    """Same geometry, other weights: the model must be built to know its fingerprint; it is compared then, before
    the packing laws are judged and before the warm-up. Negative control: the recording model reaches the laws."""
    from harness.base.errors import HarnessError
    from harness.pipeline import run as run_module
    from lanes.running import runner

    reached = []

    def laws(*_a, **_k):
        reached.append("laws")
        raise HarnessError("the laws gate was reached")

    monkeypatch.setattr(run_module, "judge_laws", laws)
    monkeypatch.setattr(runner, "warm_up", lambda *_a, **_k: reached.append("warm-up"))
    where = [a.format(tmp=tmp_path) for a in WHERE[command]]
    golden = ("--golden", str(recorded_golden.path), *where, "--model", "small", "--no-progress")
    code, _, err = run(capsys, monkeypatch, command, *golden, "--set", "model.seed=1")
    assert code == 2, err
    assert "golden of another model" in one_error_line(err) and reached == []
    code, _, err = run(capsys, monkeypatch, command, *golden, "--set", "model.seed=0")
    assert code == 2 and "the laws gate was reached" in one_error_line(err) and reached == ["laws"], err


def test_verify_with_the_recording_model_still_reproduces(capsys, monkeypatch, recorded_golden):
    """Control: the checks refuse other models only."""
    code, out, err = run(
        capsys, monkeypatch, "golden", "verify", str(recorded_golden.path), "--model", "small", "--no-progress"
    )
    assert code == 0 and "reproduced bitwise" in out, err


@pytest.mark.parametrize(
    "command",
    [
        ("golden", "show", "{goldens}"),
        ("golden", "verify", "{goldens}", "--model", "small", "--no-progress"),
        ("run", "--golden", "{goldens}", "--model", "small", "--no-progress"),
        ("nightly", "--golden", "{goldens}", "--model", "small", "--out", "{tmp}/n", "--no-progress"),
    ],
)
def test_the_folder_of_goldens_is_named_at_once_with_the_goldens_inside(
    capsys, monkeypatch, tmp_path, golden_copy, no_model_building, command
):
    """Before: 'not a complete golden (no manifest.json; an interrupted write?)', after building the model."""
    monkeypatch.chdir(tmp_path)
    args = [a.format(goldens=golden_copy.parent, tmp=tmp_path) for a in command]
    code, _, err = run(capsys, monkeypatch, *args)
    assert code == 2, err
    line = one_error_line(err)
    as_what = "GOLDEN" if command[0] == "golden" else "--golden"  # the argument, or the option, the command takes
    assert f"{golden_copy.parent}: not a golden; it holds 1: {golden_copy} (pass one of them as {as_what})" in line
    assert "interrupted" not in line


def test_a_folder_holding_no_golden_is_still_an_incomplete_golden(capsys, monkeypatch, tmp_path):
    """Negative control: only a folder that holds goldens is named as one; an empty one keeps its message."""
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, monkeypatch, "golden", "show", str(tmp_path / "empty"))
    assert code == 2 and "not a complete golden" in one_error_line(err)


# ---------------------------------------------------------------------------- config keys


@pytest.mark.parametrize(
    "data,key,hint",
    [
        ({"tolerances": {"op0": {"max_abss": 1e-4}}}, "tolerances.op0.max_abss", "max_abs"),
        ({"shapes": {"candidate": [2]}}, "shapes.candidate", "candidates"),
        ({"numerics": {"thread": 1}}, "numerics.thread", "threads"),
        ({"modle": {"spec": "small"}}, "modle", "model"),
        ({"shapes": {"release": {"op0": [1], "op1": [1], "op2": [1], "opp2": [1]}}}, "shapes.release.opp2", "op2"),
    ],
)
def test_a_misspelt_config_key_gets_a_did_you_mean(data, key, hint):
    with pytest.raises(ConfigError) as err:
        config_from_dict(data, "harness.toml")
    assert f"harness.toml: {key}: unknown key (did you mean {hint!r}?)" in str(err.value)


def test_a_key_near_nothing_gets_no_guess():
    """Negative control: no hint is invented."""
    with pytest.raises(ConfigError) as err:
        config_from_dict({"tolerances": {"op0": {"zzzzzz": 1}}}, "harness.toml")
    assert "unknown key" in str(err.value) and "did you mean" not in str(err.value)


# ---------------------------------------------------------------------------- serve stopped by SIGTERM


class _FakeServer:
    """Stands in for a tritonserver: serving starts, then SIGTERM arrives (as `kill PID` sends it)."""

    def __init__(self, options=None) -> None:
        self.url = "http://127.0.0.1:1"
        self.checks = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def running(self) -> bool:
        self.checks += 1
        if self.checks == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return True


def test_serve_stopped_by_sigterm_says_so_and_exits_0(capsys, monkeypatch):
    """Before: exit 0 and not a word. A signal is serving's normal end (README, Exit status)."""
    import lanes.backends.triton.server as server

    monkeypatch.setattr(server, "TritonServer", _FakeServer)
    before = signal.getsignal(signal.SIGTERM)
    code, out, err = run(capsys, monkeypatch, "serve", "--model", "small")
    assert code == 0 and not err, err
    lines = out.strip().splitlines()
    assert lines[0] == "diar_nn_g served at http://127.0.0.1:1 (Ctrl-C to stop)"
    assert lines[-1].startswith("diar_nn_g: stopped by SIGTERM") and len(lines) == 2
    assert signal.getsignal(signal.SIGTERM) == before  # every handler restored


# ---------------------------------------------------------------------------- the checkout, the docs


def readme_flow_outputs() -> list[str]:
    """What the README's flow writes where it runs: the config `harness init` writes, the corpus, --out, the
    golden folder."""
    from tests.test_readme import usage_block

    outputs = set()
    for line in usage_block():
        if line.text.startswith("harness init"):
            paths = [w for w in line.text.split("#")[0].split()[2:] if not w.startswith("-")]
            outputs.add(paths[0] if paths else "harness.toml")
        for pattern in (r"corpus synth (\S+)", r"--out (\S+)", r"--golden (\S+?)/"):
            outputs.update(re.findall(pattern, line.text))
    return sorted(outputs)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_what_the_readme_flow_writes_in_a_checkout_is_ignored_by_git():
    outputs = readme_flow_outputs()
    assert {"harness.toml", "corpus.parquet", "goldens", "nightly"} <= set(outputs), outputs
    for name in outputs:
        done = subprocess.run(
            ["git", "check-ignore", "--no-index", "-q", name + ("/x" if "." not in name else "")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{name}: the README's flow writes it into the checkout and git does not ignore it"


def test_the_docs_stand_alone_and_hold_the_model_contract():
    """No page points to a file a clone does not have; docs/models.md holds the request contract itself."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        assert "DESIGN" not in text and "../shared" not in text, page.name
    models = (ROOT / "docs" / "models.md").read_text()
    contract = models.split("## The request contract", 1)[1].split("\n## ", 1)[0]
    for tensor, dtype, shape in (
        ("SPAN", "FP32", "[S]"),
        ("OFFSETS", "INT64", "[N]"),
        ("VALID", "INT32", "[N]"),
        ("OP", "INT32", "[1]"),
        ("WEIGHTS", "FP32", "[R, F]"),
        ("IDX", "INT32", "[R]"),
        ("SEGMENTATION", "FP32", "[N, F, C]"),
        ("EMBEDDINGS", "FP32", "[R, D]"),
    ):
        assert re.search(rf"\| `{tensor}` \| {dtype} \| {re.escape(shape)} \|", contract), tensor
    for rule in ("padding window", "zeros", "shifted", "never read audio of another block"):
        assert rule in contract, rule
