"""The environment variables the ground floor, the CLI and the progress line read, as one typed record.

Each is read by attribute from :func:`variables` (a field is named as its variable, declared once here). They
are read again at every call, not once at import: a test, or a parent process, may set one at any time. Each
value stays the text as set (None: not set); the code that uses a variable parses it and says in its own words
what it expected. A variable that one module owns is read there, by its name (the laws
cache's, the Triton repository's paths, the process settings' own marks, cuBLAS's workspace)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Variables:
    """The variables as set now (None: not set)."""

    HARNESS_DEBUG: str | None = None  # "1": notes and tracebacks on stderr, as --debug
    HARNESS_FAULT: str | None = None  # tests only: <action>:<point> (harness.base.fsio.fault)
    HARNESS_FAULT_SLEEP: str | None = None  # tests only: the seconds of a "slow" fault (default 0.2)
    HARNESS_LOCK_WAIT_S: str | None = None  # seconds a command waits for a lock (default 300)
    HARNESS_PROGRESS_SECONDS: str | None = None  # seconds between two plain progress lines (default 10)
    XDG_CACHE_HOME: str | None = None  # where caches go (default ~/.cache)

    @property
    def debug(self) -> bool:
        return self.HARNESS_DEBUG == "1"


_NAMES = tuple(f.name for f in fields(Variables))


def variables() -> Variables:
    """The variables as set in this process now."""
    return Variables(*(os.environ.get(name) for name in _NAMES))
