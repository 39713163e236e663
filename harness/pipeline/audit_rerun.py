"""Where an audit's exact lane runs: the :class:`Rerun` seam the audit judges through, and the in-process
side of it (:class:`InProcessRerun`: the golden model built in this process, each captured block re-run
alone, pipelined while the requests around the calls are decoded and judged), with the golden model as the
audit file names it and the check that the capture was cut for its geometry. Apart from
:mod:`harness.pipeline.audit` (the laws, the scoring, the files) because Ray's workers
(:mod:`harness.pipeline.ray_audit`) build the same rerun without judging anything.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import TYPE_CHECKING, Protocol

import numpy as np
from pydantic import TypeAdapter

from harness.base.jsonio import plain
from harness.capture.capture_laws import Survey
from harness.capture.reader import CaptureReader
from harness.capture.schema import CapturedRequest, CaptureError
from harness.compute.metrics import start_warming
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.schemas.audit import GoldenModel
from harness.data.schemas.config_file import ConfigFile
from harness.data.schemas.machine import InForce
from harness.host.backend_answer import BackendAnswer
from lanes.backends.backend_numerics import backend_numerics
from lanes.running.device_queue import ordered
from lanes.running.lanes import ExactLane

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend
    from lanes.running.lanes import CallRecord

AHEAD_CALLS = 16  # re-run calls sent and not yet taken, at most (InProcessRerun.stream): about 4 requests
Item = tuple[CapturedRequest, list[Block]]  # a captured request and its blocks, split out by its layout


class Rerun(Protocol):
    """Where the exact lane's outputs come from: this process's model (:class:`InProcessRerun`) or Ray
    workers' (:mod:`harness.pipeline.ray_audit`). Judging and writing are the same either way, so the
    audit is the same whichever ran the blocks."""

    label: str  # the scoring pass's progress label

    def start(self, reader: CaptureReader, survey: Survey) -> GoldenModel:
        """Called once every law holds: get ready to answer (build the model, or run the shards); returns
        the golden model that re-runs the blocks."""

    def exact(self, request: CapturedRequest, blocks: list[Block]) -> dict[str, np.ndarray]:
        """The exact lane's output of each of ``request``'s blocks, by block id; called in file order."""

    def close(self) -> None: ...


class InProcessRerun:
    """The exact lane on a model built in this process, one request's blocks at a time (:meth:`exact`), or
    pipelined over every request (:meth:`stream`)."""

    label = "re-run alone"

    def __init__(self, cfg: ConfigFile, make_backend: Callable[[], Backend], pipeline: bool = True) -> None:
        self.cfg, self.make_backend, self.pipeline = cfg, make_backend, pipeline
        self.backend: Backend | None = None
        self.lane: ExactLane | None = None
        # the lane's call records: not kept (memory stays one row group, whatever the capture)
        self.log: list[CallRecord] = []
        self._held = ExitStack()

    def start(self, reader: CaptureReader, survey: Survey | None) -> GoldenModel:
        """``survey`` is not needed here (a Ray worker passes None)."""

        self.backend = backend = self.make_backend()
        # its settings held until close(), as a recording holds them (lanes.backends.backend_numerics): every call
        # of the re-run under them, the process's own flags back when the audit ends
        self._held.enter_context(backend_numerics(backend))
        check_geometry(reader, backend.geometry, self.cfg)
        self.lane = ExactLane(backend, self.cfg.release_shapes, self.log)
        return golden_model(self.cfg, backend)

    def exact(self, request: CapturedRequest, blocks: list[Block]) -> dict[str, np.ndarray]:
        assert self.lane is not None, "exact() before start()"
        self.log.clear()
        return rerun_blocks(self.lane, blocks)

    def stream(self, items: Iterable[Item]) -> Iterator[tuple[Item, dict[str, np.ndarray]]]:
        """Each ``(request, blocks)`` with its blocks' exact outputs, in order, the calls in exactly
        :meth:`exact`'s order. With a backend that offers ``pipelined()`` (:mod:`lanes.running.device_queue`), the
        calls run in a worker thread while this thread decodes, splits and judges the requests around
        them: at most ``AHEAD_CALLS`` calls are sent and not yet taken (a few requests in memory). An error
        in a call is raised here, as that call's one line, and nothing after it runs; leaving (normally,
        by an error, by Ctrl-C, or by closing this generator) joins the worker."""

        lane = self.lane
        assert lane is not None, "stream() before start()"
        done: deque[tuple[Item, dict[str, np.ndarray]]] = deque()

        def answered(item: Item, outs: list[np.ndarray]) -> None:
            self.log.clear()  # not kept (module doc of InProcessRerun.log)
            done.append((item, dict(zip([b.id for b in item[1]], outs, strict=True))))

        assert self.backend is not None
        with ordered(self.backend, self.pipeline, max_calls=AHEAD_CALLS) as line:
            for n, item in enumerate(items):
                outs: list[np.ndarray] = [np.zeros(0)] * len(item[1])
                line.stage(lane.requests(item[1], 0, outs.__setitem__))
                line.then(functools.partial(answered, item, outs))
                if n == 0:  # the judges' kernels, while the device has its first calls
                    start_warming()
                while done:
                    yield done.popleft()
            line.drain()
        while done:
            yield done.popleft()

    def close(self) -> None:
        try:
            if self.backend is not None:
                self.backend.close()
        finally:
            self._held.close()


def rerun_blocks(lane: ExactLane, blocks: list[Block]) -> dict[str, np.ndarray]:
    """Each block alone through the exact lane (one call per block; none for a voiceprint block without
    rows, as the engine), by block id."""
    return dict(zip([b.id for b in blocks], lane.run(blocks), strict=True))


def check_geometry(reader: CaptureReader, geometry: Geometry, cfg: ConfigFile) -> None:
    """The captured requests must have been cut for the golden model's geometry (else exit 2)."""
    if geometry != reader.geometry:
        diff = [
            f"{k} {v} (capture) vs {getattr(geometry, k)} (golden model)"
            for k, v in reader.geometry.to_dict().items()
            if getattr(geometry, k) != v
        ]
        raise CaptureError(
            f"{reader.path}: the capture's requests were cut for another geometry than the golden "
            f"model {cfg.model.spec!r} declares: {'; '.join(diff)} (re-run them on the model that "
            "served them: --golden-model)"
        )


def golden_model(cfg: ConfigFile, backend: Backend) -> GoldenModel:
    """The golden model as the audit file names it (what re-ran the blocks, where, with which numerics)."""
    answer = BackendAnswer.of(backend.environment())  # the backend's own description, read once
    model = answer.model or {}
    numerics = plain(answer.numerics_in_force or {})
    assert isinstance(numerics, dict)  # a JSON round trip keeps a dict a dict
    return GoldenModel(
        spec=cfg.model.spec,
        fingerprint=backend.fingerprint,
        name=str(model.get("name", "?")),  # the model's own description (describe()): its name by key
        device_kind=backend.device_kind,
        numerics_in_force=TypeAdapter(InForce).validate_python(numerics),
    )
