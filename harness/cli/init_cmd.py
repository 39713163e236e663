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

from harness.cli.app import app, say
from harness.data.destinations import check_output_file
from harness.data.errors import OutputError
from harness.data.fsio import atomic_write

EXAMPLE = ("defaults", "harness.toml.example")  # inside the harness package (package data)


def example_text() -> str:
    """The annotated configuration as shipped: it loads to exactly the embedded default."""
    from importlib.resources import files

    return files("harness").joinpath(*EXAMPLE).read_text(encoding="utf-8")


@app.command("init")
def init_cmd(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Where to write it.")] = Path("harness.toml"),
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
) -> None:
    """Write the annotated release configuration (every key, its default, its meaning) to PATH
    (default harness.toml); pass it to every command with --config PATH. An existing file is refused
    (exit 2) unless --force."""

    if (path.exists() or path.is_symlink()) and not path.is_dir() and not force:
        raise OutputError(f"{path}: the file exists; nothing was written (harness init --force {path} replaces it)")
    check_output_file(path, "configuration")
    atomic_write(path, example_text())
    say(
        f"wrote {path}: the annotated configuration (every key at its default); change what your release needs "
        f"and pass it to every command with --config {path}"
    )
