"""What the file the engine reads (``promoted-shapes.json``) allows for one score's key, as the commands read it.

A value passed from the commands (:func:`harness.pipeline.promote.engine_manifest`, which reads the file) to
the sign-off report (``reports.engine``, which renders it): declared here, below both, so that neither
imports the other (the report's modules load only when a report is written).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ENGINE_FILE = "promoted-shapes.json"


@dataclass(frozen=True)
class EngineManifest:
    """The manifest the engine reads: its path, and what it allows for the score's model, device, numerics
    profile and packer per OP (None: the file does not exist, or holds nothing for that key); read by the
    commands (:func:`harness.pipeline.promote.engine_manifest`), rendered here."""

    path: str
    exists: bool
    allows: Mapping[str, list[int]] | None
    unreadable: str | None = None  # why the file could not be read (a report says so rather than fail)
