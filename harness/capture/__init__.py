"""Production captures: the packed requests the engine actually sent and the outputs it actually got back.

- :mod:`harness.capture.schema` — the capture's Parquet schema (one row per request, its columns
  declared once), its metadata model and :class:`CaptureWriter` (for the engine team's tests and
  the harness's own);
- :mod:`harness.capture.reader` — the streaming, validating :class:`CaptureReader`;
- :mod:`harness.capture.capture_laws` — the packing laws applied to each captured request as it stands;
- :mod:`harness.capture.result` — the audit file's schema (``audit.json``) and its headline.

``harness audit CAPTURE`` (:mod:`harness.pipeline.audit`) judges a capture: the laws on every
request, then every captured block re-run alone on the golden model (the exact lane) and the
served outputs scored against it per OP. docs/audit.md documents the whole loop.
"""

from harness.capture.reader import CaptureReader
from harness.capture.schema import CapturedRequest, CaptureError, CaptureMeta, CaptureWriter, capture_schema

__all__ = ["CaptureError", "CaptureMeta", "CaptureReader", "CaptureWriter", "CapturedRequest", "capture_schema"]
