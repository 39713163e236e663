"""``harness audit`` (:mod:`harness.cli.audit_cmds`): the capture judged in this process, or its exact lane re-run
on Ray. Apart from :mod:`harness.pipeline.audit` (the audit itself) and :mod:`harness.pipeline.ray_audit` (its
Ray fan-out, which builds on it): the command chooses between the two. Its files' schema is
:mod:`harness.data.schemas.audit`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.destinations import check_output_dir
from harness.data.schemas.config_file import (
    ConfigFile,
)
from harness.pipeline.answer import Answer
from harness.pipeline.audit import AuditOutcome, audit_capture
from harness.pipeline.backends import make_backend
from harness.pipeline.distributed import RayOptions
from harness.pipeline.ray_audit import audit_on_ray
from lanes.models.model_api import check_spec

if TYPE_CHECKING:
    from harness.pipeline.distributed import RayOptions


def audit(cfg: ConfigFile, capture: Path, out: Path, progress: bool, ray: RayOptions | None = None) -> Answer:
    """``harness audit``: the packing laws on every captured request, then every captured block re-run alone and
    the served outputs judged against it (fails when a law is broken or an OP fails)."""
    outcome = run_audit(cfg, capture, out, progress, ray)
    return Answer.of(outcome.lines, held=outcome.passed)


def run_audit(cfg: ConfigFile, capture: Path, out: Path, progress: bool, ray: RayOptions | None = None) -> AuditOutcome:
    """The ``harness audit`` command: the golden model is the configuration's ``[model]`` (``--golden-model``);
    with ``ray`` (:class:`harness.pipeline.distributed.RayOptions`) the exact lane runs on Ray workers."""
    check_spec(cfg.model.spec)  # a typo is refused now, not after the laws have read the whole capture
    check_output_dir(out, "audit folder", [("CAPTURE", capture)])  # before any work, on Ray too
    if ray is not None:
        return audit_on_ray(cfg, capture, out, ray, progress)
    return audit_capture(capture, out, cfg, lambda: make_backend(cfg), progress=progress)
