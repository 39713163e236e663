"""``harness init``: write the annotated release configuration where a user starts.

The text is the one the package ships (``harness/defaults/harness.toml.example``, the checkout's
``harness.toml.example`` is a copy a test keeps identical): every key, its default and its meaning, so an
installed harness needs no checkout to begin. An existing file is a user's configuration: it is never
replaced unless asked (``--force``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import answer, app


@app.command("init")
def init_cmd(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Where to write it.")] = Path("harness.toml"),
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
) -> None:
    """Write the annotated release configuration (every key, its default, its meaning) to PATH
    (default harness.toml); pass it to every command with --config PATH. An existing file is refused
    (exit 2) unless --force."""
    from harness.pipeline.commands import init as init_commands  # deferred: its imports are heavy (start-up)

    answer(init_commands.init(path, force))
