"""A packer's identity: the stable string a promotion is keyed by (``describe()["identity"]``).

A promoted shape is evidence about *one* packer's requests; another packer (or the same one
rebuilt) earns its own. So an identity binds a name to the code:

- the harness's own packer: ``harness/<version>+<12 hex of sha256(harness/packing.py)>``
  (:func:`harness.packing.harness_identity`);
- an external packer: ``external:<name>/<version>@sha256:<16 hex>``: the name and version it
  declares in the ``hello`` handshake, and a digest of what runs (:func:`argv_digest`) or one
  the user supplies (``--packer-digest``);
- a Python callable: ``callable:<spec>@sha256:<16 hex of its module's source file>``.

Identities are printable ASCII without spaces or ``|`` (the ledger's key separator).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.packers.errors import PackerUnavailable

# packer_name: no '/' or '@' (they delimit the identity); packer_version: no '@'; neither '|' nor spaces.
NAME_RE = re.compile(r"^[!-.0-?A-{}~]{1,64}$")
VERSION_RE = re.compile(r"^[!-?A-{}~]{1,64}$")
SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def argv_files(argv: Sequence[str]) -> list[Path]:
    """What a command runs: argv[0] resolved (PATH, links) and every other argument that is an existing file.

    ``python examples/x.py`` is the interpreter *and* the script, so editing the script changes the digest.
    """
    first = shutil.which(argv[0]) if argv else None
    files = [Path(os.path.realpath(first))] if first else []
    for arg in argv[1:]:
        path = Path(arg)
        if path.is_file():
            files.append(Path(os.path.realpath(path)))
    return files


def argv_digest(argv: Sequence[str], label: str) -> tuple[str, list[dict[str, str]]]:
    """sha256 over the files of :func:`argv_files`, each as ``<sha256 of its bytes>\\n`` in argv order.

    Contents only, not paths: the same build checked out elsewhere has the same identity.
    """
    files = argv_files(argv)
    if not files:
        raise PackerUnavailable(f"{label}: cannot hash the packer: {argv[0]!r} resolves to no file; "
                                "give its digest with --packer-digest SHA256")
    listed = []
    total = hashlib.sha256()
    for path in files:
        try:
            one = file_sha256(path)
        except OSError as exc:
            raise PackerUnavailable(f"{label}: cannot hash {str(path)!r} for its identity: "
                                    f"{exc.strerror or exc}; give --packer-digest SHA256") from None
        total.update(f"{one}\n".encode())
        listed.append({"path": str(path), "sha256": one})
    return total.hexdigest(), listed


def given_digest(value: str, label: str) -> str:
    """A digest the user supplies (``--packer-digest``): 64 hex digits, kept lower-case."""
    if not SHA256_RE.match(value or ""):
        raise PackerUnavailable(f"{label}: --packer-digest {value!r}: expected a sha256, 64 hex digits")
    return value.lower()


def check_declared(name: str | None, version: str | None) -> str | None:
    """Why a handshake's ``packer_name`` / ``packer_version`` cannot make an identity (None: they can)."""
    if not name or not NAME_RE.match(name):
        return (f"metadata packer_name is {name!r}: required, 1-64 printable ASCII characters without spaces, "
                "'/', '@' or '|'")
    if not version or not VERSION_RE.match(version):
        return (f"metadata packer_version is {version!r}: required, 1-64 printable ASCII characters without "
                "spaces, '@' or '|'")
    return None


def external_identity(name: str, version: str, digest: str) -> str:
    return f"external:{name}/{version}@sha256:{digest[:16]}"


def callable_identity(spec: str, target: object) -> tuple[str, str, str]:
    """(identity, full sha256, file) of a ``module:attr`` packer: the digest of the module's source file."""
    module_name = spec.partition(":")[0]
    module = sys.modules.get(module_name) or inspect.getmodule(target)
    source = getattr(module, "__file__", None)
    if not source or not Path(source).is_file():
        raise PackerUnavailable(f"packer {spec!r}: module {module_name!r} has no source file to hash for the "
                                "packer's identity")
    digest = file_sha256(Path(source))
    return f"callable:{spec}@sha256:{digest[:16]}", digest, str(source)
