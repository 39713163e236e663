"""Catalogue cases of what ran, what was committed and what is waited for: a packer held to the content its
identity names, a ``--set`` key a command would not read, a full disk while the ledger's history part is
written, a lock another process holds. Each is one line, exit 2, nothing left or changed."""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

from tests.catalogue_setups import CFG, PROMOTE, QUIET, SCORE, case, remove

PY = sys.executable
SCRIPT = Path(__file__).resolve().parent / "protocol_packer.py"
OUTSIDE = Path(tempfile.mkdtemp(prefix="catalogue-packer-"))  # a packer's own file, outside the workspace
atexit.register(shutil.rmtree, OUTSIDE, True)
LAWS = ("laws", "--examples", "1", "--packer-cmd")
RUN = ("run", "--golden", "goldens/r", *CFG, *QUIET)


def own_file(ws: Path) -> None:
    (OUTSIDE / "packer.conf").write_text("level = 1\n")


_HELD: list[int] = []  # lock file descriptors the cases hold for the command's whole run


def lock_held(name: str):
    def setup(ws: Path) -> None:
        fd = os.open(ws / f".{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # another open file: this process's command waits for it as for another's
        _HELD.append(fd)

    return setup


K = "packer"
case(
    K,
    "rewrites-its-file-before-hello",
    (*LAWS, f"{PY} {SCRIPT} --mode plain --touch {OUTSIDE / 'packer.conf'}"),
    "packer.conf' changed",
    setup=own_file,
)
case(K, "closed-its-stdin", (*LAWS, f"{PY} {SCRIPT} --mode close-stdin"), "closed its stdin before reading")
case(
    K,
    "file-argument-unreadable",
    (*LAWS, f"{PY} {SCRIPT} --mode plain --variant /proc/self/mem"),
    "cannot read its file argument",
)
case(
    K,
    "run-packer-rewrites-its-file",
    (
        *RUN,
        "--arrangements",
        "1",
        "--set",
        f"packer.cmd={PY} {SCRIPT} --mode plain --touch {OUTSIDE / 'packer.conf'}",
    ),
    "packer.conf' changed",
    setup=own_file,
)

K = "usage"
case(K, "run-set-shard-out-of-bound", (*RUN, "--set", "nightly.shard=1/10000001"), "at most 10000000 shards")
case(K, "run-set-a-nightly-key", (*RUN, "--set", "nightly.shard=1/2"), "harness run does not use nightly.shard")
case(K, "score-set-a-backend-key", (*SCORE, "--set", "backend.url=http://h:8000"), "does not use backend.url")
case(K, "promote-set-the-nightly-ledger", (*PROMOTE, "--set", "nightly.ledger=l2.json"), "does not use nightly.ledger")
case(
    K,
    "merge-set-a-shard",
    ("merge", "--golden", "goldens/r", "n", *CFG, "--set", "nightly.shard=1/2"),
    "a merge combines",
)

K = "disk full"


def fresh_ledger(ws: Path) -> None:
    """No ledger yet (nor its history): the workspace's score is then this promote's first commit."""
    remove("ledger.json")(ws)
    remove("ledger.json.history")(ws)


for point in ("promote:history-written", "promote:before-journal"):
    case(
        K,
        f"ledger-{point.split(':')[1]}",
        PROMOTE,
        "its file system is full",
        setup=fresh_ledger,
        env=(("HARNESS_FAULT", f"enospc:{point}"),),
    )

K = "wait"
case(
    K,
    "ledger-locked-by-another",
    PROMOTE,
    "waited 0.5 s for the lock another process holds",
    setup=lock_held("ledger.json"),
    env=(("HARNESS_LOCK_WAIT_S", "0.5"),),
)
case(
    K,
    "reader-of-a-locked-ledger",
    ("shapes", "--ledger", "ledger.json"),
    "waited 0.5 s for the lock",
    setup=lock_held("ledger.json"),
    env=(("HARNESS_LOCK_WAIT_S", "0.5"),),
)
