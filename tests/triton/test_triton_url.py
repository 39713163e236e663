"""With tritonclient installed: a malformed backend URL is one line and exit 2, never a __del__ traceback.

Before: ``--backend http://127.0.0.1:notaport`` reached ``InferenceServerClient.__init__``, which
raised ValueError (exit 3, "a bug"), and the half-built client's ``__del__`` printed an
AttributeError traceback. No server is needed: nothing is ever sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.triton

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("HARNESS_DEBUG", None)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_bad_port_through_the_cli_is_one_line_with_status_2(tmp_path):
    pytest.importorskip("tritonclient.http", reason="needs the 'triton' extra")
    done = _python(
        "import sys; from harness import cli; sys.argv = ['harness', 'golden', 'record', '--corpus', "
        "'c.parquet', '--model', 'small', '--backend', 'http://127.0.0.1:notaport', '--no-progress']; "
        "cli.main()",
        tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "port 'notaport' is not a whole number" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def test_the_backend_refuses_a_bad_port_before_building_a_client(tmp_path):
    pytest.importorskip("tritonclient.http", reason="needs the 'triton' extra")
    done = _python(
        "from harness.base.errors import BackendError\n"
        "from lanes.backends.triton.triton_backend import TritonBackend\n"
        "try:\n    TritonBackend('http://127.0.0.1:notaport')\n"
        "except BackendError as exc:\n    print(exc)\n",
        tmp_path,
    )
    assert done.returncode == 0 and "port 'notaport' is not a whole number" in done.stdout, done.stderr
    assert done.stderr == ""


def test_a_client_whose_init_fails_prints_no_finaliser_traceback(tmp_path):
    """tritonclient itself, given a port it cannot parse: build_client leaves nothing for __del__ to raise.
    Negative control: the plain constructor prints 'Exception ignored in ... __del__'."""
    pytest.importorskip("tritonclient.http", reason="needs the 'triton' extra")
    template = (
        "import gc, tritonclient.http as h\nfrom lanes.backends.triton.url import build_client\n"
        "try:\n    {call}\nexcept ValueError:\n    pass\ngc.collect()\nprint('done')\n"
    )
    plain = _python(template.format(call="h.InferenceServerClient('127.0.0.1:notaport')"), tmp_path)
    assert plain.stdout == "done\n" and "Exception ignored" in plain.stderr  # the defect, still in tritonclient
    built = _python(template.format(call="build_client(h.InferenceServerClient, '127.0.0.1:notaport')"), tmp_path)
    assert built.stdout == "done\n" and built.stderr == "", built.stderr
