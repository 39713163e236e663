"""The whole command tree: every command module registered on the one app, as the click command that runs.

Each command module registers itself on ``harness.cli.app.app`` (and takes the shared options from there) when
it is imported; this module imports them all, so that ``app`` never names a command module and nothing imports
back up the tree.
"""

from __future__ import annotations

import typer

import harness.cli.audit_cmds  # noqa: F401  (each command module registers its commands on the app)
import harness.cli.corpus_cmds  # noqa: F401
import harness.cli.golden_cmds  # noqa: F401
import harness.cli.init_cmd  # noqa: F401
import harness.cli.inspect_cmds  # noqa: F401
import harness.cli.job_cmds  # noqa: F401
import harness.cli.lane_cmds  # noqa: F401
import harness.cli.model_cmds  # noqa: F401
from harness.cli.app import app


def app_command():  # a click command (typer's own click: its type is private)
    """The click command of the whole tree."""
    return typer.main.get_command(app)
