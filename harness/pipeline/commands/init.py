"""``harness init`` (:mod:`harness.cli.init_cmd`): the annotated configuration written, checked where before any
work, answering with an :class:`~harness.pipeline.answer.Answer` (the reference network's initial weights are
:mod:`lanes.models.diar_nn_g.init`'s).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.destinations import check_output_file
from harness.base.errors import OutputError
from harness.base.fsio import atomic_write
from harness.pipeline.answer import Answer

if TYPE_CHECKING:
    pass


EXAMPLE = ("defaults", "harness.toml.example")  # inside the harness package (package data)


def example_text() -> str:
    """The annotated configuration as shipped: it loads to exactly the embedded default."""
    from importlib.resources import files  # deferred: only init reads the package's data

    return files("harness").joinpath(*EXAMPLE).read_text(encoding="utf-8")


def init(path: Path, force: bool) -> Answer:
    """The annotated configuration written to ``path``; an existing file is a user's configuration: never
    replaced unless ``force``."""
    if (path.exists() or path.is_symlink()) and not path.is_dir() and not force:
        raise OutputError(f"{path}: the file exists; nothing was written (harness init --force {path} replaces it)")
    check_output_file(path, "configuration")
    atomic_write(path, example_text())
    return Answer.of(
        [
            f"wrote {path}: the annotated configuration (every key at its default); change what your release needs "
            f"and pass it to every command with --config {path}"
        ]
    )
