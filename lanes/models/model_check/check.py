"""``harness model check``: every part of the model contract a golden record or a nightly will need, in seconds.

On three synthetic blocks (:mod:`lanes.models.model_check.probe_blocks`), with no corpus, golden or ledger: the model's
description and geometry; for each OP its answer's name, dtype and shape, alone and packed two blocks to a call;
finite answers; the same answer twice; ``stage()`` answering as ``infer()``; a call entered from two threads at
once (:mod:`harness.host.concurrent_entry`: a model that cannot be is noted, the harness serialises it); the
isolation of two blocks packed at k = 2 (block A's answer at a fixed slot must be the same bits whatever audio its
neighbour holds: ``[A, B]`` against ``[A, B']``, and ``[B, A]`` against ``[B', A]``); and the time per block.
One line per check (:mod:`lanes.models.model_check.check_report`); the lines are built in
:mod:`lanes.models.model_check.lines`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from harness.base.errors import HarnessError, ModelError
from harness.data.blocks import Block
from harness.data.geometry import geometry_of
from harness.data.masks import MaskPolicy
from harness.data.numeric_settings import NumericSettings
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas.config_file import ConfigFile
from harness.data.tolerances import Tolerances
from harness.host.concurrent_entry import DEFAULT_WAIT_S, EntryProbe, probe_concurrent_entry
from lanes.backends.backend import InProcessBackend
from lanes.backends.backend_api import Call
from lanes.models.model_api import Model, declared_concurrency, staged_entry
from lanes.models.model_check import lines
from lanes.models.model_check.check_calls import PAIRS, SLOTS, OpCalls, Sent, difference, send_alone, send_packed
from lanes.models.model_check.check_report import DESCRIBE, GEOMETRY, ModelCheckReport, Status
from lanes.models.model_check.probe_blocks import ProbeBlocks, probe_blocks, rows_of, with_rows
from lanes.models.model_contract import description, geometry_problems

AGAIN = 2  # times each of two packed calls is sent again where block A's answer moved with its neighbour
CALLS_PER_OP = 3 + len(PAIRS) + 1  # A alone twice, B alone, the pairs, A staged


@dataclass(frozen=True)
class CheckOptions:
    """How the check runs: the device, the synthetic blocks' seed and window step (``[corpus]``), the engine's
    masks (``[masks]``: the OP 1/2 rows), the tolerances (``[tolerances]``: how far two answers of a model that
    does not repeat bitwise may differ), and the two-threads probe's bounded wait."""

    device: str = "cpu"
    seed: int = 0
    step: int | None = None
    masks: MaskPolicy = field(default_factory=MaskPolicy)
    tolerances: Tolerances = field(default_factory=Tolerances)
    wait_s: float = DEFAULT_WAIT_S

    @classmethod
    def of(cls, config: ConfigFile, wait_s: float = DEFAULT_WAIT_S) -> CheckOptions:
        """The options a release configuration gives (``[release] device``, ``[corpus]``, ``[masks]``,
        ``[tolerances]``)."""
        return cls(
            config.release.device,
            config.corpus.seed,
            config.corpus.step or None,
            config.masks,
            config.tolerances,
            wait_s,
        )


def total_calls() -> int:
    """How many calls a check makes (its progress bar's total): the probe's three after every OP's."""
    return CALLS_PER_OP * len(ALL_OPS) + 3


def run_model_check(
    model: Model, spec: str, numerics: NumericSettings, options: CheckOptions, tick: Callable[[int], None] | None = None
) -> ModelCheckReport:
    """Every check on ``model`` (loaded from ``spec``), one line each; ``tick(1)`` after every call."""
    done = tick or (lambda n: None)
    geometry = geometry_of(model)
    blocks = probe_blocks(geometry, options.seed, options.step)
    report = ModelCheckReport(spec, lines.heading(spec, options.device, blocks))
    try:
        described = description(model)
        report.add(DESCRIBE, Status.OK, lines.described(described))
    except ModelError as exc:
        report.add(DESCRIBE, Status.FAIL, f"{exc} (a golden record or a nightly refuses the model before any work)")
    problems = geometry_problems(geometry)
    report.add(GEOMETRY, Status.FAIL if problems else Status.OK, "; ".join(problems) or lines.geometry(geometry))
    backend = InProcessBackend(model, numerics, options.device)
    calls: dict[Op, OpCalls] = {}
    for op in ALL_OPS:
        calls[op] = op_calls(backend, op, blocks, calls.get(Op.SEGMENTATION), options, done)
    lines.answers(report, calls, geometry)
    lines.judged(report, calls, options.tolerances)
    declared = declared_concurrency(model, f"model {spec!r}")
    probe = None
    if declared is False:  # never given two calls at once: nothing to ask
        done(3)
    else:
        probe = threads(backend, blocks, calls[Op.SEGMENTATION], options.wait_s, done)
    lines.threads(report, probe, declared)
    lines.isolation(report, calls, options.tolerances, blocks)
    lines.timing(report, calls, options.device)
    return report


def op_calls(
    backend: InProcessBackend,
    op: Op,
    blocks: ProbeBlocks,
    segmentation: OpCalls | None,
    options: CheckOptions,
    done: Callable[[int], None],
) -> OpCalls:
    """Send OP ``op``'s requests: OP 1/2 with the rows the engine derives from the OP 0 answers (stand-in rows where
    those give none)."""
    geometry = backend.geometry
    derived = True
    if op is Op.SEGMENTATION:
        a, b, b_other = blocks.a, blocks.b, blocks.b_other
    else:
        assert segmentation is not None  # OP 0 is sent first
        rows_a, from_a = rows_of(blocks.a, segmentation.alone[0].output, op, geometry, options.masks)
        rows_b, from_b = rows_of(blocks.b, segmentation.alone[2].output, op, geometry, options.masks)
        derived = from_a and from_b
        a = with_rows(blocks.a, op, rows_a, geometry)
        b = with_rows(blocks.b, op, rows_b, geometry)
        b_other = with_rows(blocks.b_other, op, rows_b, geometry)
    alone = []
    for block, label in ((a, "block A alone"), (a, "block A alone, again"), (b, "block B alone")):
        alone.append(send_alone(backend, block, label))
        done(1)
    pairs = {}
    sent_as = dict(zip(PAIRS, ((a, b), (a, b_other), (b, a), (b_other, a)), strict=True))
    for name, members in sent_as.items():
        pairs[name] = send_packed(backend, members, f"{name} at k=2")
        done(1)
    found = OpCalls(op, alone, pairs, derived)
    found.staged = staged(backend, op, a)
    done(1)
    for slot, one, other in SLOTS:
        mine, theirs = pairs[one].part(slot), pairs[other].part(slot)
        if mine is not None and theirs is not None and difference(mine, theirs) is not None:
            for name in (one, other):  # a leak, or packed calls that do not repeat: sent again, they tell
                found.again[name] = [
                    send_packed(backend, sent_as[name], f"{name} at k=2, again ({n + 2})") for n in range(AGAIN)
                ]
    return found


def staged(backend: InProcessBackend, op: Op, block: Block) -> Sent | None:
    """Block A's request through the model's ``stage()``, as the pipelined lanes send it (None: no stage())."""
    if staged_entry(backend.model) is None:
        return None
    where = f"OP {int(op)}, block A staged (stage(request, to_device)())"
    try:
        with backend.pipelined() as submit:
            result = submit(Call(op, block.tensors(), block.windows, block.rows, where)).result()
    except HarnessError as exc:
        return Sent(op, "block A staged", 1, block.windows, block.rows, None, None, str(exc))
    return Sent(op, "block A staged", 1, block.windows, block.rows, result.output, result.wall_s, None)


def threads(
    backend: InProcessBackend, blocks: ProbeBlocks, segmentation: OpCalls, wait_s: float, done: Callable[[int], None]
) -> EntryProbe | None:
    """The two-threads probe on block A's OP 0 request (None: OP 0 breaks the contract, nothing to probe with)."""
    if any(sent.error for sent in segmentation.alone):
        return None
    a = blocks.a
    name = Op.SEGMENTATION.output_name

    def call(request: Mapping[str, np.ndarray]) -> dict[str, object]:
        result = backend.call(Op.SEGMENTATION, request, a.windows, 0, "OP 0, block A, two threads at once")
        return {name: result.output}

    try:
        return probe_concurrent_entry(call, a.tensors(), wait_s=wait_s)
    finally:
        done(3)
