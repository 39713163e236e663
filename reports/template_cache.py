"""The report templates' compiled code, kept on disk between commands (jinja2's bytecode cache).

Why: every nightly compiled ``report.html.j2``, ``report.md.j2`` and their sections from source, about
0.6-1 s of one core in the command's serial finish, for templates that change only with the harness.
jinja2 keys a cached template by its name and file and checks the source's sha1 and the Python
bytecode magic on load, so an edited template or another Python compiles again; the rendered pages are
the same bytes either way (the code is the compiler's output, only not recompiled).

Where: ``$XDG_CACHE_HOME/diar-lane-harness/templates`` (``~/.cache``), one folder per jinja2 version and
environment (the HTML and Markdown environments compile the same name differently: autoescape,
trailing newline), so one can never load the other's code. ``HARNESS_TEMPLATE_CACHE=off`` compiles every
time; ``HARNESS_TEMPLATE_CACHE=DIR`` puts it elsewhere. Best effort: a cache file that is unreadable or
truncated is compiled again, and one that cannot be written costs the next command its compilation,
nothing else. Trust: like Python's own ``__pycache__``, whoever can write that folder can run code in
the harness's process (it is under the user's own cache folder, created 0700).
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2
from jinja2.bccache import Bucket

from harness.base.fsio import user_cache_dir

ENV_VAR = "HARNESS_TEMPLATE_CACHE"


class _BestEffortCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file cache, but a bad file is compiled again and a failed write is ignored."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - a truncated or foreign file (pickle/marshal errors): compile it
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:  # a read-only or full cache folder: the next command compiles again
            pass


def bytecode_cache(kind: str) -> jinja2.BytecodeCache | None:
    """The cache of environment ``kind`` ("html", "md"), or None (off, or no folder can be made)."""
    where = os.environ.get(ENV_VAR, "")
    if where.lower() in ("off", "0", "no"):
        return None
    base = Path(where) if where else user_cache_dir("templates")
    if base is None:  # no home folder (a service user): no cache then
        return None
    try:
        folder = base / f"jinja2-{jinja2.__version__}-{kind}"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return None
    return _BestEffortCache(str(folder))
