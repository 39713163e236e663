"""Which configuration keys each command uses, so a ``--set`` it would ignore is refused by name.

The configuration is one file for every command, and every key is validated with it, by one validator
(:class:`harness.data.schemas.config_file.ConfigFile`), wherever it is given. But a key given on the command
line is a request to *this* command: ``harness run --set nightly.shard=1/2`` used to exit 0 having run every
block. A command that would not read a key given with ``--set`` now refuses it in one line naming the key, the
commands that do use it, and the tables this one reads. The file itself may hold any key (it is shared).

A command uses a table when any of its keys changes what the command does or what it records: the tables a
golden or run records of its configuration (:data:`~harness.data.schemas.config_file.RECORDED`) count for the
commands that write one. A key a command refuses although it uses its table is listed in :data:`REFUSED_KEYS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.base.errors import ConfigError

# the tables a golden or a run records of its configuration (harness.data.schemas.config_file.RECORDED; kept
# here as words so that --help does not import pydantic: tests/test_set_keys.py pins them equal)
RECORDED = ("release", "model", "shapes", "lanes", "masks", "numerics", "tolerances", "corpus")
EVERY = (*RECORDED, "backend", "ray", "packer", "nightly", "history", "evidence", "localise", "load")

USES: dict[str, tuple[str, ...]] = {
    "run": (*RECORDED, "backend", "packer", "evidence"),
    "nightly": EVERY,
    "merge": (*RECORDED, "nightly", "history", "localise"),
    "demo": (*RECORDED, "evidence", "localise", "history"),
    "score": ("tolerances",),
    "promote": ("tolerances", "shapes"),
    "golden record": (*RECORDED, "backend", "ray", "localise"),
    "golden verify": (*RECORDED, "backend"),
    "golden diff": ("tolerances",),
    "serve": ("release", "model", "numerics"),
    "audit": (*RECORDED, "ray"),
}
# keys of a table a command uses that it still does not read (why, in the refusal)
REFUSED_KEYS: dict[str, dict[str, str]] = {
    "merge": {"nightly.shard": "a merge combines every shard's run; the shard is each sharded nightly's"},
}


def check_sets(command: str, overrides: Sequence[Any]) -> None:
    """Refuse a ``--set`` key that ``command`` would not read (module doc). ``overrides``: the command line's
    (:class:`harness.release_config.Override`); only those given with ``--set`` are checked (a command's own
    flags are its own). A command not listed here reads every key."""
    tables = USES.get(command)
    if tables is None:
        return
    for item in overrides:
        if item.flag != "--set":
            continue
        table = item.key.split(".", 1)[0]
        if table not in EVERY:
            continue  # an unknown table: the validator names it (and what was meant)
        why = REFUSED_KEYS.get(command, {}).get(item.key)
        if table in tables and why is None:
            continue
        users = [
            f"harness {name}"
            for name, used in USES.items()
            if table in used and item.key not in REFUSED_KEYS.get(name, {})
        ]
        raise ConfigError(
            f"--set {item.shown}: harness {command} does not use {item.key}"
            + (f" ({why})" if why else "")
            + f"; it is read by {', '.join(users) or 'no command'}; harness {command} reads --set keys of "
            + ", ".join(f"[{t}]" for t in tables)
        )
