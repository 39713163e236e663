"""The pieces a Triton server is started from: the wheel's bundle, the repository copy, the environment.

Kept apart from the server's lifecycle (:mod:`lanes.backends.triton.server`): what a start needs on disk
and in its environment is pure file work, testable without a server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.errors import BackendError

if TYPE_CHECKING:
    from lanes.backends.triton.server_options import ServerOptions


@dataclass(frozen=True)
class Bundle:
    """Where the wheel keeps the server binary, its libraries and the Python backend pieces."""

    binary: Path
    libs: Path
    backend_lib: Path
    backend_utils: Path
    stub: Path

    @classmethod
    def find(cls) -> Bundle:
        try:
            import pytriton
        except ImportError:
            raise BackendError(
                "Triton server: the bundled tritonserver comes with nvidia-pytriton; "
                "install the 'triton' extra (pip install 'diar-lane-harness[triton]')"
            ) from None
        root = Path(pytriton.__file__).parent
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        bundle = cls(
            binary=root / "tritonserver" / "bin" / "tritonserver",
            libs=root.parent / "nvidia_pytriton.libs",
            backend_lib=root / "tritonserver" / "backends" / "python" / "libtriton_python.so",
            backend_utils=root / "tritonserver" / "backends" / "python" / "triton_python_backend_utils.py",
            stub=root / "tritonserver" / "python_backend_stubs" / version / "triton_python_backend_stub",
        )
        for name, path in vars(bundle).items():
            if not path.exists():
                raise BackendError(
                    f"Triton server: {name} not found at {path} (nvidia-pytriton install "
                    f"incomplete, or no stub for Python {version})"
                )
        return bundle


def copy_repository(source: Path, dest: Path, options: ServerOptions) -> None:
    """Copy a model repository, filling in every ``config.pbtxt``'s parameters and instances."""
    source = Path(source)
    if not source.is_dir():
        raise BackendError(f"Triton server: model repository {source} does not exist")
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    params = {
        "MODEL_SPEC": options.model_spec,
        "SEED": str(int(options.seed)),
        "DEVICE": options.device,
        "NUMERICS": json.dumps(options.numerics.to_dict(), sort_keys=True),
        "PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in options.extra_pythonpath),
    }
    for config in dest.glob("*/config.pbtxt"):
        config.write_text(fill_config(config.read_text(), params, options.instances))


def copy_verbatim(source: Path, dest: Path) -> None:
    """Copy a model repository unchanged (only Python caches are left out: they belong to no release)."""
    source = Path(source)
    if not source.is_dir():
        raise BackendError(f"Triton server: model repository {source} does not exist")
    if not any(p.is_dir() for p in source.iterdir()):
        raise BackendError(f"Triton server: model repository {source} holds no model folder")
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def fill_config(text: str, params: dict[str, str], instances: int) -> str:
    """Set each parameter (replacing its one-line entry, or appending one) and the instance count."""
    for key, value in params.items():
        line = f'parameters {{ key: "{key}" value: {{ string_value: "{_pbtxt_escape(value)}" }} }}'
        pattern = re.compile(rf'^parameters\s*\{{\s*key:\s*"{re.escape(key)}".*$', re.MULTILINE)
        text, n = pattern.subn(_verbatim(line), text)
        if n == 0:
            text = text.rstrip("\n") + "\n" + line + "\n"
    count = re.compile(r"(instance_group\s*\[.*?count:\s*)\d+", re.DOTALL)
    text, n = count.subn(rf"\g<1>{int(instances)}", text)
    if n == 0:
        text = text.rstrip("\n") + f"\ninstance_group [ {{ kind: KIND_CPU, count: {int(instances)} }} ]\n"
    return text


def server_env(bundle: Bundle, options: ServerOptions) -> dict[str, str]:
    """The server process's environment: this one's, with the bundle's libraries and this project first on
    the search paths (environment variables are named by string: the OS's interface)."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    project_root = str(Path(__file__).resolve().parents[3])  # works from a source checkout too
    first = {  # each search path, and the folders put before what it holds here
        "LD_LIBRARY_PATH": (str(bundle.libs), libdir),
        "PATH": (str(Path(sys.executable).parent),),
        "PYTHONPATH": (*(str(Path(p).resolve()) for p in options.extra_pythonpath), project_root),
    }
    return {**os.environ, **{name: _join(*folders, os.environ.get(name, "")) for name, folders in first.items()}}


def assemble_backend(bundle: Bundle, folder: Path) -> None:
    folder.mkdir(parents=True)
    shutil.copy2(bundle.backend_lib, folder / bundle.backend_lib.name)
    shutil.copy2(bundle.backend_utils, folder / bundle.backend_utils.name)
    shutil.copy2(bundle.stub, folder / bundle.stub.name)


def _verbatim(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement that is ``text`` as it is (a template string would read its backslashes as escapes)."""
    return lambda _match: text


def _pbtxt_escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _join(*parts: str) -> str:
    return os.pathsep.join(p for p in parts if p)
