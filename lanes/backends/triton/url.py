"""A Triton server's URL, checked before anything of tritonclient is imported or built.

Why here and first: a malformed ``--backend`` is bad input (exit 2, one line), not a bug. Left to
tritonclient, ``http://127.0.0.1:notaport`` fails inside ``InferenceServerClient.__init__`` with a
``ValueError`` and then its ``__del__`` raises ``AttributeError`` on the half-built object, printed
as a traceback whatever the caller does. This module imports no tritonclient, so the check also
runs (and answers in words) where the ``triton`` extra is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness.base.errors import BackendError

EXAMPLE = "http://127.0.0.1:8000"
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class TritonUrl:
    """``url`` as given (a scheme added when it had none); ``host_port`` as tritonclient takes it."""

    url: str
    host: str
    port: int
    ssl: bool

    @property
    def host_port(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        return f"{host}:{self.port}"


def parse_triton_url(url: str, where: str = "--backend") -> TritonUrl:
    """``http(s)://host[:port]`` with a port from 1 to 65535 (default 80/443); else one BackendError line."""
    full = url if "://" in url else f"http://{url}"
    expect = f"expected http(s)://host:port, e.g. {EXAMPLE}"
    try:
        parts = urlsplit(full)
    except ValueError as exc:  # e.g. an unbalanced '[' of an IPv6 literal
        raise BackendError(f"{where} {url!r}: not a URL ({exc}); {expect}") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise BackendError(f"{where} {url!r}: not an http(s) URL (scheme {parts.scheme!r}); {expect}")
    if not parts.hostname:
        raise BackendError(f"{where} {url!r}: no host; {expect}")
    if parts.username is not None or parts.password is not None:
        raise BackendError(f"{where} {url!r}: credentials in the URL are not supported; {expect}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise BackendError(
            f"{where} {url!r}: a path, query or fragment is not supported (the server's root is used); {expect}"
        )
    _, sep, text = parts.netloc.rpartition("]")[2].rpartition(":")
    if not sep:
        port = DEFAULT_PORTS[parts.scheme]
    elif not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        raise BackendError(f"{where} {url!r}: port {text!r} is not a whole number from 1 to 65535; {expect}")
    else:
        port = int(text)
    return TritonUrl(full, parts.hostname, port, parts.scheme == "https")


def build_client(client_class: Any, host_port: str, **options: Any) -> Any:  # a tritonclient class: untyped
    """``client_class(host_port, **options)``, built so that its ``__del__`` cannot raise.

    tritonclient's ``InferenceServerClient.__del__`` calls ``close()``, which reads ``_closed``, an
    attribute ``__init__`` sets only at its very end: a failed ``__init__`` leaves an object whose
    finaliser prints a traceback. Marking the object closed before ``__init__`` runs makes that
    ``close()`` a no-op; a completed ``__init__`` sets ``_closed = False`` itself."""
    client = client_class.__new__(client_class)
    client._closed = True
    client.__init__(host_port, **options)
    return client
