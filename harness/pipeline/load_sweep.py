"""The nightly's load sweep: every candidate shape at several concurrencies, on Triton.

The lanes keep ``[backend] concurrency`` requests in flight (2, as the engine). The engine may keep
more, and a server under load can answer differently (a model with state shared between requests,
instances that race) or slowly (requests queued for an instance). So after the lanes, for each
candidate k and each concurrency c of ``[load] concurrency``, the k lane's requests of the golden's
corpus (or its first ``[load] blocks``) are sent again through a Triton backend of concurrency c, and

- every response is unpacked and checked against the golden by the lanes' judges with the score's
  tolerances (isolated voiceprint inputs: the golden's WEIGHTS/IDX; the sample-size gate is the
  lanes' verdict's, not the point's): a point whose answers fail refuses its shape;
- each request's latency (send to answer) gives p50/p99, the point's sending time its throughput;
- Triton's statistics (``lanes.backends.triton.stats``) before and after give the server's queue and compute time.

Memory is bounded by a group of ``k * max(8, 4c)`` blocks (and their answers), never the corpus: the
requests of a group are sent together with c in flight, then scored and dropped. Judging lives in the
core (``harness.evidence.load_evidence``), so promotion re-derives it from the score.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from golden.store import Golden
from harness.base.errors import HarnessError, check_interrupted, clip_list, step
from harness.data.blocks import Block
from harness.data.geometry import Geometry
from harness.data.judge_limits import OpLimits
from harness.data.masks import VoiceprintRows
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import OutputCollector
from harness.data.schemas.config_file import ConfigFile
from harness.data.schemas.load import ServerStats, ShapeLoad
from harness.data.schemas.results import OpVerdictModel, Score
from harness.evidence.load_evidence import PointTraffic, load_point
from harness.evidence.load_score import with_load
from harness.judging.lane_scoring import LaneScorer, op_limits
from harness.packers.packing import HARNESS_PACKER, PackedRequest, Packer
from harness.progress import progress_bar
from lanes.backends.backend_api import Call
from lanes.backends.triton.stats import StatsReader, difference

if TYPE_CHECKING:
    from lanes.backends.backend_api import Backend
    from lanes.backends.triton.triton_backend import TritonBackend

Tick = Callable[[int], None]


@dataclass(frozen=True)
class Sweep:
    """What the sweep measured, before it is put into the score (:func:`attach`)."""

    url: str
    model_name: str
    blocks: int
    concurrency: tuple[int, ...]
    shapes: dict[str, ShapeLoad]


@dataclass(frozen=True)
class _Traffic:
    """What every point of one sweep sends and checks: the golden's corpus (its first ``blocks``), packed by
    ``packer`` (``pad_to_fixed``), every answer judged against the golden within ``limits``; ``tick`` per
    request sent."""

    golden: Golden
    corpus: Iterable[Block]
    blocks: int
    limits: Mapping[Op, OpLimits]
    packer: Packer
    pad_to_fixed: bool
    tick: Tick | None


def check_sweep(config: ConfigFile, backend: Backend | None, shard: object = None) -> None:
    """Refuse, before any work, a sweep that cannot run: it needs a Triton backend and the whole corpus."""
    if not config.load.concurrency:
        return
    if backend is not None and getattr(backend, "name", "") != "triton":
        raise HarnessError(
            f"[load] concurrency {config.load.concurrency}: the load sweep runs on a Triton backend "
            "(--backend http://host:port, see `harness serve`), not in-process; remove the key "
            "(load.concurrency)"
        )
    if shard is not None:
        raise HarnessError(
            "[load] concurrency with a shard (nightly.shard): the sweep runs once, in a nightly of the whole corpus"
        )


def sweep(
    config: ConfigFile, golden: Golden, backend: Backend, packer: Packer = HARNESS_PACKER, tick: Tick | None = None
) -> Sweep:
    """Every candidate shape at every ``[load] concurrency`` (module doc); ``backend`` is the lanes' Triton
    backend, whose server, model and settings each point reuses at its own concurrency."""

    check_sweep(config, backend)
    triton: TritonBackend = backend  # type: ignore[assignment]  # check_sweep: a Triton backend
    ids = golden.block_ids()
    ids = ids[: config.load.blocks] if config.load.blocks else ids
    limits = op_limits(config.tolerances, golden.ops, golden.floors(), sample_bound=False)
    corpus = golden.corpus()  # hashed once: every point reads it again
    traffic = _Traffic(golden, corpus, len(ids), limits, packer, config.shapes.pad_to_fixed, tick)
    shapes: dict[str, ShapeLoad] = {}
    with StatsReader(triton.url, triton.model_name, triton.timeout_s) as stats:
        for k in config.shapes.candidates:
            points = []
            for c in config.load.concurrency:
                with _backend_at(triton, c) as at_c:
                    if at_c.fingerprint != golden.fingerprint:
                        raise HarnessError(
                            f"load sweep: {triton.url} now serves model {at_c.fingerprint[:16]}..., "
                            f"the golden is of {golden.fingerprint[:16]}...: the server changed"
                        )
                    before = stats.read_settled()  # the backend's probe just above counted first
                    latencies, wall, requests, checked, verdicts = _send_point(traffic, at_c, k, c)
                    delta = _stats_delta(stats, before)
                points.append(
                    load_point(k, c, PointTraffic(latencies, wall, len(ids), requests, checked), verdicts, delta)
                )
            shapes[str(k)] = ShapeLoad(shape=k, points=points)
    return Sweep(triton.url, triton.model_name, len(ids), tuple(config.load.concurrency), shapes)


def attach(score: Score, measured: Sweep, config: ConfigFile) -> Score:
    """The score with the sweep's evidence (shapes refused by it, verdict and digest re-derived)."""
    return with_load(
        score,
        measured.url,
        measured.model_name,
        measured.blocks,
        measured.concurrency,
        measured.shapes,
        config.load.p99_budget_ms,
    )


def requests_at(golden: Golden, k: int, blocks: int) -> int:
    """At most how many requests a point of shape k sends (the progress bar's total): a pack per k blocks per
    OP (a voiceprint pack without rows is not sent)."""
    return len(golden.ops) * -(-blocks // k)


def _send_point(
    traffic: _Traffic, backend: Backend, k: int, c: int
) -> tuple[list[float], float, int, int, list[OpVerdictModel]]:
    """One point: its requests sent group by group with ``c`` in flight, every answer scored against the golden;
    the latencies, the sending time, the requests sent and answers checked, and the OPs' verdicts."""
    golden, packer, tick = traffic.golden, traffic.packer, traffic.tick
    scorer = LaneScorer(k, golden.ops, golden.geometry, traffic.limits, VoiceprintInputs.ISOLATED)
    latencies: list[float] = []
    wall = 0.0
    requests = checked = 0
    reader = golden.outputs()
    for group in _groups(traffic.corpus, traffic.blocks, _group_size(k, c)):
        check_interrupted()
        packs = _packs(golden, group, k, packer, traffic.pad_to_fixed)
        calls = [
            Call(
                p.op,
                p.tensors(),
                p.windows,
                p.rows,
                f"load sweep k={k} concurrency {c} OP {int(p.op)} blocks {p.block_ids[0]!r}..",
            )
            for _, p in packs
        ]
        start = time.perf_counter()
        results = backend.call_many(calls)
        wall += time.perf_counter() - start
        requests += len(calls)
        collector = _collector(golden, group)
        for (chunk, packed), result in zip(packs, results, strict=True):
            latencies.append(result.wall_s)
            answers = packer.unpack(packed, {packed.op.output_name: result.output})
            _collect(collector, packed.op, chunk, answers)
            checked += 1
        order = [b.id for b in group]
        scorer.add(reader.select(order), collector.finish(order))
        if tick is not None:
            tick(len(calls))
    return latencies, wall, requests, checked, scorer.verdicts()


def _stats_delta(stats: StatsReader, before: ServerStats) -> ServerStats:

    return difference(before, stats.read_settled(), f"load sweep: statistics of {stats.model_name!r}")


def _backend_at(backend: TritonBackend, concurrency: int) -> TritonBackend:
    """A backend on the same server, model and settings as the lanes', at ``concurrency``."""
    from lanes.backends.triton.triton_backend import TritonBackend  # deferred: imports gevent, tritonclient (start-up)

    return TritonBackend(
        backend.url,
        backend.model_name,
        policy=backend.policy,
        concurrency=concurrency,
        shm=backend.shm,
        model_label=backend.model_label,
        geometry=backend.geometry,
    )


def _group_size(k: int, c: int) -> int:
    return k * max(8, 4 * c)


def _groups(corpus: Iterable[Block], blocks: int, size: int) -> Iterator[list[Block]]:
    source = itertools.islice(iter(corpus), blocks)
    while group := list(itertools.islice(source, size)):
        yield group


def _packs(
    golden: Golden, group: Sequence[Block], k: int, packer: Packer, pad_to_fixed: bool
) -> list[tuple[list[Block], PackedRequest]]:
    """The k lane's requests of ``group``, OP by OP (voiceprint rows: the golden's; a pack without rows is
    not sent, as the lanes do)."""
    g = golden.geometry
    given = golden.voiceprint_inputs([b.id for b in group])
    packs: list[tuple[list[Block], PackedRequest]] = []
    for op in golden.ops:
        members = list(group)
        if op.is_voiceprint:
            rows = {b.id: given.get(op, {}).get(b.id) or _no_rows(g) for b in group}
            members = [b.with_voiceprint(op, rows[b.id].weights, rows[b.id].idx, rows[b.id].speakers, g) for b in group]
        for i in range(0, len(members), k):
            chunk = members[i : i + k]
            if op.is_voiceprint and not sum(b.rows for b in chunk):
                continue
            packs.append((chunk, packer.pack(chunk, pad_to=k if pad_to_fixed else None)))
    return packs


def _collector(golden: Golden, group: Sequence[Block]) -> OutputCollector:
    """Every block starts with no voiceprint rows: a pack without rows is not sent, its blocks answer none."""
    collector = OutputCollector(golden.geometry)
    empty = np.zeros((0, golden.geometry.embedding_dim), np.float32)
    for op in golden.ops:
        if op.is_voiceprint:
            for b in group:
                collector.add_voiceprint(op, b.id, _no_rows(golden.geometry), empty)
    return collector


def _collect(collector: OutputCollector, op: Op, chunk: Sequence[Block], answers: Sequence[np.ndarray]) -> None:
    for block, answer in zip(chunk, answers, strict=True):
        if op is Op.SEGMENTATION:
            collector.add_segmentation(block.id, block.valid, answer)
        else:
            assert block.weights is not None and block.idx is not None and block.speakers is not None
            collector.add_voiceprint(op, block.id, VoiceprintRows(block.weights, block.idx, block.speakers), answer)


def _no_rows(geometry: Geometry) -> VoiceprintRows:
    return VoiceprintRows(
        np.zeros((0, geometry.frames_per_window), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32)
    )


def nightly_sweep(
    config: ConfigFile, golden: Golden, backend: Backend, packer: Packer = HARNESS_PACKER, show_progress: bool = True
) -> Sweep | None:
    """The nightly's step after the lanes: the sweep with a progress bar, or None when ``[load]`` asks none."""

    if not config.load.concurrency:
        return None
    blocks = min(golden.blocks, config.load.blocks or golden.blocks)
    total = sum(requests_at(golden, k, blocks) for k in config.shapes.candidates) * len(config.load.concurrency)
    with (
        step("load sweep"),
        progress_bar(
            f"load sweep {blocks} blocks, shapes {clip_list(config.shapes.candidates)}, concurrency "
            f"{list(config.load.concurrency)}",
            total,
            show_progress,
        ) as tick,
    ):
        return sweep(config, golden, backend, packer, tick)
