"""The ``harness audit`` command: the capture judged in this process, or its exact lane re-run on Ray.

Apart from :mod:`harness.pipeline.audit` (the audit itself) and :mod:`harness.pipeline.ray_audit` (its
Ray fan-out, which builds on it): the command chooses between the two.
"""

from __future__ import annotations

from pathlib import Path

from harness.base.destinations import check_output_dir
from harness.data.schemas.config_file import ConfigFile
from harness.pipeline.audit import AuditOutcome, audit_capture
from harness.pipeline.backends import make_backend
from harness.pipeline.distributed import RayOptions
from harness.pipeline.ray_audit import audit_on_ray
from lanes.models.model_api import check_spec


def run_audit(cfg: ConfigFile, capture: Path, out: Path, progress: bool, ray: RayOptions | None = None) -> AuditOutcome:
    """The ``harness audit`` command: the golden model is the configuration's ``[model]`` (``--golden-model``);
    with ``ray`` (:class:`harness.pipeline.distributed.RayOptions`) the exact lane runs on Ray workers."""
    check_spec(cfg.model.spec)  # a typo is refused now, not after the laws have read the whole capture
    check_output_dir(out, "audit folder", [("CAPTURE", capture)])  # before any work, on Ray too
    if ray is not None:
        return audit_on_ray(cfg, capture, out, ray, progress)
    return audit_capture(capture, out, cfg, lambda: make_backend(cfg), progress=progress)
