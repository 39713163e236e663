"""The schema package imports a model's module when the model is first asked for:
every exported name still resolves, to the class its module defines, and a command's configuration
does not pay for the audit's and the score's models it does not read."""

from __future__ import annotations

import importlib
import subprocess
import sys

import harness.data.schemas as schemas


def test_every_exported_name_resolves_to_its_modules_object():
    assert set(schemas.__all__) == {*schemas._MODULE_OF, "FILE_KINDS"}
    for name, module in schemas._MODULE_OF.items():
        assert getattr(schemas, name) is getattr(importlib.import_module(f"harness.data.schemas.{module}"), name)
    assert len(schemas.FILE_KINDS) == 22 and schemas.FILE_KINDS["score"] is schemas.Score


def test_an_unknown_name_is_an_attribute_error():
    try:
        schemas.NoSuchModel  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchModel" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_the_configuration_imports_no_result_model():
    code = (
        "import sys, harness.release_config; "
        "print(sorted(m for m in sys.modules if m.startswith('harness.data.schemas.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "harness.data.schemas.audit" not in loaded and "harness.data.schemas.results" not in loaded, loaded
    assert "harness.data.schemas.base" in loaded


def test_writeback_is_started_on_a_file_and_harmless_on_a_pipe(tmp_path):
    """harness.base.writeback.start_writeback: the run's files are handed to the disk as they are written."""
    import os

    from harness.base.writeback import start_writeback

    with open(tmp_path / "f.bin", "wb") as f:
        f.write(b"x" * 65536)
        start_writeback(f)  # flushed: the bytes are in the file
        assert os.path.getsize(tmp_path / "f.bin") == 65536
    read, write = os.pipe()
    with os.fdopen(write, "wb") as pipe:
        pipe.write(b"y")
        start_writeback(pipe)  # the kernel refuses a pipe (ESPIPE): nothing is raised
    os.close(read)


def test_every_schema_module_imports_first_in_a_fresh_process():
    """The package no longer imports its modules in one fixed order: none may rely on another being loaded."""
    from pathlib import Path

    names = sorted(p.stem for p in Path(schemas.__file__).parent.glob("*.py") if p.stem not in ("__init__", "__main__"))
    failed = []
    for name in names:
        done = subprocess.run(
            [sys.executable, "-c", f"import harness.data.schemas.{name}"], capture_output=True, text=True
        )
        if done.returncode:
            failed.append(f"{name}: {done.stderr.strip().splitlines()[-1]}")
    assert names and not failed, failed


def test_every_cache_lives_in_one_folder_and_none_without_a_home(tmp_path, monkeypatch):
    """harness.base.fsio.user_cache_dir: the laws' verdicts, the report templates and hypothesis's cache."""
    from pathlib import Path

    from harness.base.fsio import user_cache_dir
    from harness.pipeline import laws_gate
    from reports.template_cache import bytecode_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("HARNESS_LAWS_CACHE", raising=False)
    monkeypatch.delenv("HARNESS_TEMPLATE_CACHE", raising=False)
    assert user_cache_dir("laws") == tmp_path / "diar-lane-harness" / "laws"
    monkeypatch.delenv("XDG_CACHE_HOME")

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert user_cache_dir("laws") is None
    assert laws_gate._cache_file(("harness", 1, 0, 2)) is None  # judged every run: no cache, no error
    assert bytecode_cache("html") is None
