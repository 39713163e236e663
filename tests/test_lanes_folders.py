"""lanes/ is one folder per thing it is about, each saying so in one line, and the module paths from
before the folders (specs in configurations and goldens, a team's ``from lanes.model_api import ...``)
resolve to the very same modules."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from lanes.import_paths import MOVED, moved_to

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("running", "backends", "models", "controls", "simulation")


def test_lanes_is_its_folders_and_the_import_paths_only():
    top = sorted(p.name for p in (ROOT / "lanes").iterdir() if p.name != "__pycache__")
    assert top == sorted([*FOLDERS, "__init__.py", "import_paths.py"])


@pytest.mark.parametrize("folder", FOLDERS)
def test_each_folder_says_what_it_is_about_in_one_line(folder):
    doc = ast.get_docstring(ast.parse((ROOT / "lanes" / folder / "__init__.py").read_text()))
    assert doc and "\n" not in doc.strip(), f"lanes/{folder}: a one-line docstring"


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module_itself(old):
    assert importlib.import_module(old) is importlib.import_module(MOVED[old])


def test_below_an_old_package_path_is_one_module_too():
    import lanes.triton.server_options as old

    import lanes.backends.triton.server_options as new

    assert old is new and old.__name__ == "lanes.backends.triton.server_options"
    assert old.__spec__ is not None and old.__spec__.name == old.__name__


def test_an_old_spec_builds_the_same_factory():
    from harness.packers.callable import load_object

    assert load_object("lanes.null_model:small", "model") is load_object("lanes.models.null_model:small", "model")
    assert load_object("lanes.controls:leaky", "model") is load_object("lanes.controls.defects:leaky", "model")


def test_a_path_never_there_is_still_not_found():
    """Negative control: the finder answers for the moved paths only."""
    assert moved_to("lanes.no_such_module") is None
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lanes.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lanes.triton.no_such_module")


def test_a_fresh_process_imports_an_old_path_first():
    """The old path imported before anything else (as a team's model file does) loads one module."""
    code = (
        "import sys; import lanes.model_api as a; import lanes.models.model_api as b; "
        "assert a is b; assert 'lanes.model_api' in sys.modules; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr


def test_a_models_fingerprint_is_not_where_its_module_lives():
    """A golden is of a model's fingerprint: moving a module must not change it (the architecture's name in the
    hash is a name, not a path). Pinned: the reference network's small configuration and the null network's."""
    from lanes.models.model_api import load_model

    assert load_model("small").fingerprint == "f05df3fe9efed040d4dad6e627ed68e2c2cd8a90d73d7ae4918946ddb43ddab8"
    assert (
        load_model("lanes.null_model:small").fingerprint
        == "2e955632f14e98ba8b06897df23cc1a762f475357ec83c13de0d7467eb023438"
    )
