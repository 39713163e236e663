"""A ``--packer-cmd`` string as what runs: the variables it sets and the program with its arguments.

The harness runs a packer without a shell, so it reads a command line the way a shell would for
the two things a packer command needs: words (``shlex``: quotes and backslashes as in ``sh``) and
leading ``NAME=value`` assignments, which set variables in the packer's environment only
(``FOO=1 engine-packer --wire``), on top of the harness's own. No other shell syntax is
interpreted: no expansion, no pipes, no redirection (run ``sh -c '...'`` for that).

Both parts are what the packer is, so both are in its identity (:mod:`harness.packers.identity`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from harness.base.errors import clip
from harness.packers.packer_errors import PackerUnavailable

ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)


@dataclass(frozen=True)
class Command:
    """``env``: the variables the command line sets, by name (a name set twice keeps its last value,
    as in a shell); ``argv``: the program and its arguments, in order (never empty)."""

    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]


def parse(cmd: str) -> Command:
    """Split ``cmd`` like ``sh`` would, taking leading ``NAME=value`` words as assignments.

    PackerUnavailable (one line naming the command) when it cannot be split or names no program.
    """
    try:
        words = shlex.split(cmd)
    except ValueError as exc:
        raise PackerUnavailable(f"packer command {clip(cmd)}: cannot be parsed ({exc})") from None
    if not words:
        raise PackerUnavailable("packer command is empty")
    env: dict[str, str] = {}
    at = 0
    while at < len(words) and (found := ASSIGNMENT.match(words[at])):
        env[found.group(1)] = found.group(2)
        at += 1
    if at == len(words):
        raise PackerUnavailable(
            f"packer command {clip(cmd)}: sets {', '.join(env)} but names no program to run "
            "(NAME=value words come before the program: 'FOO=1 engine-packer --wire')"
        )
    return Command(tuple(sorted(env.items())), tuple(words[at:]))
