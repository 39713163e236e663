"""A malformed ``--backend`` URL is bad input: one line, exit 2, answered before tritonclient is imported.

Runs in the main suite (no ``triton`` extra): the check must not need tritonclient. The tests
with tritonclient installed (no ``__del__`` traceback) are in tests/triton/test_triton_url.py.
"""

from __future__ import annotations

import sys

import pytest

from harness.base.errors import BackendError
from lanes.backends.triton.url import parse_triton_url
from tests.test_cli import run


@pytest.mark.parametrize(
    "url,says",
    [
        ("http://127.0.0.1:notaport", "port 'notaport' is not a whole number from 1 to 65535"),
        ("http://127.0.0.1:0", "port '0' is not a whole number from 1 to 65535"),
        ("http://127.0.0.1:65536", "port '65536' is not a whole number from 1 to 65535"),
        ("http://127.0.0.1:-1", "port '-1' is not a whole number"),
        ("http://127.0.0.1:", "port '' is not a whole number"),
        ("http://", "no host"),
        ("http://:8000", "no host"),
        ("http://[::1", "not a URL"),
        ("http://h:8000/v2", "a path, query or fragment is not supported"),
        ("http://user:pw@h:8000", "credentials in the URL are not supported"),
    ],
)
def test_a_malformed_backend_url_is_one_line_with_status_2(capsys, monkeypatch, tmp_path, url, says):
    """Through the CLI: exit 2 (was: exit 3 and a tritonclient traceback with the triton extra; 'needs
    tritonclient' without it), one line naming the URL and what is wrong with it, nothing written."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(
        capsys,
        monkeypatch,
        "golden",
        "record",
        "--corpus",
        "c.parquet",
        "--model",
        "small",
        "--backend",
        url,
        "--no-progress",
    )
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"harness: error: --backend {url!r}: ") and says in err, err
    assert "Traceback" not in err and out == ""
    assert list(tmp_path.iterdir()) == []


def test_the_url_check_does_not_import_tritonclient(capsys, monkeypatch, tmp_path):
    """The refusal comes before the Triton lane is imported (it must answer where the extra is missing)."""
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m == "lanes.backends.triton.triton_backend" or m.startswith("tritonclient")]:
        monkeypatch.delitem(sys.modules, name)
    code, _, err = run(
        capsys,
        monkeypatch,
        "golden",
        "record",
        "--corpus",
        "c.parquet",
        "--model",
        "small",
        "--backend",
        "http://127.0.0.1:notaport",
        "--no-progress",
    )
    assert code == 2 and "notaport" in err
    assert "lanes.backends.triton.triton_backend" not in sys.modules and "tritonclient" not in sys.modules


@pytest.mark.parametrize(
    "url,host_port,ssl",
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000", False),
        ("127.0.0.1:8000", "127.0.0.1:8000", False),
        ("https://triton.example:8443/", "triton.example:8443", True),
        ("http://triton.example", "triton.example:80", False),
        ("https://triton.example", "triton.example:443", True),
        ("http://[::1]:8000", "[::1]:8000", False),
        ("http://localhost:65535", "localhost:65535", False),
    ],
)
def test_well_formed_urls_are_accepted(url, host_port, ssl):
    parsed = parse_triton_url(url)
    assert (parsed.host_port, parsed.ssl) == (host_port, ssl)
    assert parsed.url.startswith(("http://", "https://"))


def test_a_bad_scheme_is_refused_by_the_parser():
    with pytest.raises(BackendError, match="not an http"):
        parse_triton_url("ftp://127.0.0.1:1")


class _FailsInInit:
    """Like tritonclient's client: ``__del__`` calls ``close()``, which reads what ``__init__`` sets last."""

    def __init__(self, host_port: str, **options) -> None:
        raise ValueError(f"Port could not be cast to integer value as {host_port!r}")

    def __del__(self) -> None:
        self.close()

    def close(self) -> None:
        if not self._closed:
            raise AssertionError("close() of a client that was never opened")


def _fails(build) -> None:
    try:
        build()
    except ValueError:
        return  # the exception and its frames (the half-built object) are dropped here
    raise AssertionError("expected __init__ to fail")


def test_build_client_leaves_no_finaliser_that_raises():
    """Negative control included: the plain constructor leaves an object whose ``__del__`` raises."""
    import gc

    from lanes.backends.triton.url import build_client

    unraisable: list = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        _fails(lambda: _FailsInInit("h:x"))
        gc.collect()
        assert len(unraisable) == 1 and isinstance(unraisable[0].exc_value, AttributeError)  # the defect
        unraisable.clear()
        _fails(lambda: build_client(_FailsInInit, "h:x"))
        gc.collect()
        assert unraisable == []
    finally:
        sys.unraisablehook = hook
