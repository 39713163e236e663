"""The lines of a model check, judged from its calls (:mod:`lanes.models.model_check.check` sends them).

Each failing line says what was observed against what is allowed, how many of how many, where, and what to do.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import numpy as np

from harness.data.geometry import Geometry
from harness.data.ops import ALL_OPS, Op
from harness.data.schemas.files import ModelInfo
from harness.data.tolerances import Tolerances
from harness.host.concurrent_entry import Entry, EntryProbe
from lanes.models.model_api import DECLARATION
from lanes.models.model_check.check_calls import PAIRS, SLOTS, Difference, OpCalls, Sent, difference
from lanes.models.model_check.check_report import (
    ANSWER,
    FINITE,
    ISOLATION,
    ROWS,
    STAGED,
    THREADS,
    TIME,
    TWICE,
    ModelCheckReport,
    Status,
)

if TYPE_CHECKING:
    from lanes.models.model_check.probe_blocks import ProbeBlocks

ISOLATION_ADVICE = (
    "a window must read only its own block's audio: its VALID samples from its offset, zeros after "
    "(harness.data.isolation.cut_windows does it; docs/models.md, 'VALID and padding')"
)


def heading(spec: str, device: str, blocks: ProbeBlocks) -> str:
    return (
        f"model check: {spec!r} on {device}, synthetic blocks A = {blocks.a.id} (a short window at its end), B = "
        f"{blocks.b.id}, B' = B with other audio (reversed, half as loud); the contract: docs/models.md"
    )


def described(info: ModelInfo) -> str:
    """A model's description (checked to hold a name and a fingerprint) in a few words."""
    return f"name {info.name!r}, fingerprint {info.fingerprint[:16]}{'...' if len(info.fingerprint) > 16 else ''}"


def geometry(g: Geometry) -> str:
    return (
        f"{g.windows_per_block} windows of {g.window_samples:,} samples at {g.sample_rate:,} Hz per block; "
        f"{g.frames_per_window} frames every {g.frame_step} samples; {g.speakers} speakers, {g.max_simultaneous} at "
        f"once ({g.classes} classes); voiceprints of {g.embedding_dim}"
    )


def answers(report: ModelCheckReport, calls: dict[Op, OpCalls], geometry: Geometry) -> None:
    """One line per OP: the answer's name, dtype and shape, alone and packed; then the OP 1/2 rows."""
    for op in ALL_OPS:
        sent = calls[op].sent
        failed = [s for s in sent if s.error is not None]
        if failed:
            more = f" (and {len(failed) - 1} more of its {len(sent)} calls)" if len(failed) > 1 else ""
            report.add(ANSWER.format(op=int(op)), Status.FAIL, f"{failed[0].error}{more}")
            continue
        alone = calls[op].alone[0].output
        packed = calls[op].pairs[PAIRS[0]].output  # [A, B], the first pair sent
        assert alone is not None and packed is not None  # no call failed
        report.add(
            ANSWER.format(op=int(op)),
            Status.OK,
            f"{op.output_name} float32 {list(alone.shape)} for block A alone, {list(packed.shape)} for [A, B] at k=2 "
            f"({len(sent)} calls, each the shape the request asks)",
        )
    if any(s.error for s in calls[Op.SEGMENTATION].alone):
        report.add(ROWS, Status.SKIP, "not judged: OP 0 broke the contract (above); OP 1/2 were sent stand-in rows")
    elif all(calls[op].derived_rows for op in ALL_OPS if op.is_voiceprint):
        counts = ", ".join(
            f"OP {int(op)} {calls[op].alone[0].rows} and {calls[op].alone[2].rows}" for op in ALL_OPS[1:]
        )
        report.add(ROWS, Status.OK, f"OP 0's answers mark speakers: rows for blocks A and B: {counts}")
    else:
        report.add(
            ROWS,
            Status.NOTE,
            "OP 0's answer marks no speaker long enough for a voiceprint row in block A or B ([masks]), so OP 1/2 were "
            "checked on stand-in rows (each audio frame of each window weighing 1); golden record refuses a corpus "
            "where it marks none at all",
        )


def judged(report: ModelCheckReport, calls: dict[Op, OpCalls], tolerances: Tolerances) -> None:
    """Finite answers; the same answer twice; stage() as infer()."""
    answered = [s for op in ALL_OPS for s in calls[op].sent if s.output is not None]
    bad = [(s, int(np.count_nonzero(~np.isfinite(s.output)))) for s in answered if s.output is not None]
    bad = [(s, n) for s, n in bad if n]
    if not answered:
        report.add(FINITE, Status.SKIP, "not judged: no call answered (above)")
    elif bad:
        s, n = bad[0]
        assert s.output is not None
        at = tuple(int(i) for i in np.argwhere(~np.isfinite(s.output))[0])
        more = f"; {len(bad) - 1} more of {len(answered)} answers hold some" if len(bad) > 1 else ""
        report.add(
            FINITE,
            Status.FAIL,
            f"OP {int(s.op)}, {s.label}: {n:,} of {s.output.size:,} values are NaN or Inf (first at {_where(s.op, at)})"
            f"{more}; allowed: none (a golden holding one is refused, and every shape whose answer holds one fails)",
        )
    else:
        report.add(FINITE, Status.OK, f"every value of {len(answered)} answers")
    _twice(report, calls, tolerances)
    _staged(report, calls, tolerances)


def _twice(report: ModelCheckReport, calls: dict[Op, OpCalls], tolerances: Tolerances) -> None:
    found = []
    for op in ALL_OPS:
        first, again = calls[op].alone[0].output, calls[op].alone[1].output
        if first is not None and again is not None:
            found.append((op, *_judge(difference(first, again), op, tolerances)))
    if not found:
        report.add(TWICE, Status.SKIP, "not judged: no OP answered block A twice (above)")
        return
    status, text = _per_op(found)
    if status is Status.FAIL:
        text += "; a model whose answer moves beyond the tolerances run to run is never judged the same (dropout on?)"
    elif status is Status.NOTE:
        text += "; golden record measures this run-to-run noise (the noise floor); --tolerance bitwise cannot pass"
    report.add(TWICE, status, f"block A alone, twice: {text}")


def _staged(report: ModelCheckReport, calls: dict[Op, OpCalls], tolerances: Tolerances) -> None:
    if all(calls[op].staged is None for op in ALL_OPS):
        report.add(STAGED, Status.OK, "no stage(): the lanes call infer() whole")
        return
    found = []
    for op in ALL_OPS:
        staged, first = calls[op].staged, calls[op].alone[0].output
        if staged is not None and staged.output is not None and first is not None:
            diff = difference(first, staged.output)
            found.append((op, *(_bitwise(diff, op) if _repeats(calls[op]) else _judge(diff, op, tolerances))))
    if not found:
        report.add(STAGED, Status.SKIP, "not judged: the staged calls broke the contract (above)")
        return
    status, text = _per_op(found)
    advice = "; infer(request) must be stage(request, to_device)() with a plain to_device (docs/models.md)"
    report.add(
        STAGED, status, f"block A through stage() against infer(): {text}{advice if status is Status.FAIL else ''}"
    )


def _per_op(found: list[tuple[Op, Status, str]]) -> tuple[Status, str]:
    """The worst of one judgement per OP, in words: every OP when all are bitwise, else the worst one's figures
    and the other OPs that are not bitwise."""
    worst = max((status for _, status, _ in found), key=_rank)
    ops = [str(int(op)) for op, _, _ in found]
    if worst is Status.OK:
        return worst, f"OP {', '.join(ops)} bitwise"
    op, _, words = next(item for item in found if item[1] is worst)
    also = [str(int(o)) for o, status, _ in found if status is not Status.OK and o is not op]
    return worst, f"OP {int(op)}: {words}" + (f" (also not bitwise: OP {', '.join(also)})" if also else "")


def threads(report: ModelCheckReport, probe: EntryProbe | None, declared: bool | None = None) -> None:
    """The two-threads probe's finding, against the model's ``concurrent_calls`` where it declares one: a model
    that declares True is given two calls at once without being asked, so answers that differ, a call that raises
    or calls that never end with two inside fail it; one that declares False is never given two."""
    said = f"declares {DECLARATION} = {declared}"
    if declared is False:
        report.add(THREADS, Status.OK, f"{said}: the lanes send it one call at a time (not probed)")
    elif probe is None:
        report.add(THREADS, Status.SKIP, "not judged: OP 0 broke the contract (above)")
    elif probe.concurrent:
        flight = "the lanes keep two calls in flight" if declared else "the lanes may keep two calls in flight"
        report.add(THREADS, Status.OK, f"{probe.detail}: {flight}" + (f" ({said})" if declared else ""))
    elif declared and probe.entry is Entry.SERIALISED:
        report.add(THREADS, Status.NOTE, f"{said}, but {probe.detail.split(':')[0]}: the two calls wait for each other")
    elif declared:
        report.add(
            THREADS,
            Status.FAIL,
            f"{said}, but {probe.detail.split(': the harness')[0]}: the lanes would send it two calls at once; declare "
            f"{DECLARATION} = False, or make infer() answer each call as alone",
        )
    else:
        report.add(THREADS, Status.NOTE, f"{probe.detail} (not a failure)")


def isolation(report: ModelCheckReport, calls: dict[Op, OpCalls], tolerances: Tolerances, blocks: ProbeBlocks) -> None:
    """Block A's answer at slot 0 of [A, B] and [A, B'], and at slot 1 of [B, A] and [B', A]: the same bits. Where
    they differ, both calls were sent again: packed calls that repeat bitwise and still differ are a leak; calls
    that do not repeat are judged as run-to-run noise, within the OP's max_abs tolerance."""
    found: list[tuple[Status, str]] = []
    judged_ops = []
    for op in ALL_OPS:
        c = calls[op]
        if any(s.output is None for s in c.pairs.values()):
            continue
        judged_ops.append(op)
        for slot, one, other in SLOTS:
            mine, theirs = c.pairs[one].part(slot), c.pairs[other].part(slot)
            assert mine is not None and theirs is not None
            diff = difference(mine, theirs)
            if diff is None:
                continue
            moved = [_moved(c.pairs[name], c.again.get(name, []), slot) for name in (one, other)]
            where = f"OP {int(op)}, block A at slot {slot} of {one} and of {other}"
            if not any(moved):
                status, words = _bitwise(diff, op)
                found.append((status, f"{where}: {words}"))
            else:
                status, words = _judge(diff, op, tolerances)
                noise = f"the same packed call does not repeat bitwise ({next(m for m in moved if m)})"
                if status is Status.FAIL:  # beyond the tolerances run to run: a leak cannot be told from it
                    status, noise = Status.SKIP, f"not judged: {noise}, beyond the tolerances"
                found.append((max(status, Status.NOTE, key=_rank), f"{where}: {words}; {noise}"))
    failed = [text for status, text in found if status is Status.FAIL]
    unjudged = [text for status, text in found if status is Status.SKIP]
    if not judged_ops:
        report.add(ISOLATION, Status.SKIP, "not judged: the packed calls broke the contract (above)")
    elif unjudged and not failed:
        report.add(ISOLATION, Status.SKIP, unjudged[0])
    elif failed:
        also = [" ".join(f.split(":")[0].replace(", block A at", "").split()[:4]) for f in failed[1:]]
        more = f" (also {', '.join(also)})" if also else ""
        report.add(
            ISOLATION,
            Status.FAIL,
            f"{failed[0]}{more}: block A's answer moved when only its neighbour's audio changed; {ISOLATION_ADVICE}",
        )
    elif found:
        report.add(ISOLATION, Status.NOTE, f"{found[0][1]}{'; and more' if len(found) > 1 else ''}: noise, not a leak")
    else:
        ops = ", ".join(str(int(op)) for op in judged_ops)
        caveat = "" if blocks.short_window else " (block A has no short window: a read past VALID could not show)"
        report.add(
            ISOLATION,
            Status.OK,
            f"block A's answer is the same bits whatever audio its neighbour holds, in either slot (OP {ops}){caveat}",
        )


def _moved(first: Sent, again: list[Sent], slot: int) -> str | None:
    """How block A's answer in ``first`` moved when the same call was sent again (None: the same bits each time)."""
    mine = first.part(slot)
    assert mine is not None
    unit = "segmentation" if first.op is Op.SEGMENTATION else "voiceprint"
    for sent in again:
        later = sent.part(slot)
        diff = None if later is None else difference(mine, later)
        if diff is not None:
            return f"{sent.label}: {diff.words(unit)}"
    return None


def timing(report: ModelCheckReport, calls: dict[Op, OpCalls], device: str) -> None:
    parts = []
    for op in ALL_OPS:
        alone = [s.seconds for s in calls[op].alone if s.seconds is not None]
        packed = [s.seconds / s.blocks for s in calls[op].pairs.values() if s.seconds is not None]
        if alone:
            part = f"OP {int(op)} {_ms(statistics.median(alone))} alone"
            parts.append(part + (f", {_ms(statistics.median(packed))} at k=2" if packed else ""))
    if not parts:
        report.add(TIME, Status.NOTE, "not measured: no call answered (above)")
        return
    report.add(
        TIME,
        Status.NOTE,
        f"{'; '.join(parts)} (on {device}, the network call alone, median of 3 blocks alone and of 4 pairs)",
    )


def _repeats(c: OpCalls) -> bool:
    """Block A alone answered the same bits twice."""
    first, again = c.alone[0].output, c.alone[1].output
    return first is not None and again is not None and difference(first, again) is None


def _judge(diff: Difference | None, op: Op, tolerances: Tolerances) -> tuple[Status, str]:
    """Bitwise: ok; within the OP's max_abs tolerance: a note; beyond it: a failure."""
    if diff is None:
        return Status.OK, "bitwise"
    allowed = float(tolerances.for_op(op).max_abs)
    unit = "segmentation" if op is Op.SEGMENTATION else "voiceprint"
    if not diff.non_finite and diff.max_abs <= allowed:
        return Status.NOTE, f"not bitwise: {diff.words(unit)} (within [tolerances.op{int(op)}] max_abs = {allowed:g})"
    return Status.FAIL, f"{diff.words(unit)} (allowed: max abs {allowed:g}, [tolerances.op{int(op)}])"


def _bitwise(diff: Difference | None, op: Op) -> tuple[Status, str]:
    """For a model that repeats bitwise: any other difference is not run-to-run noise."""
    if diff is None:
        return Status.OK, "bitwise"
    unit = "segmentation" if op is Op.SEGMENTATION else "voiceprint"
    return Status.FAIL, f"{diff.words(unit)} (allowed: none: each call repeats its own answer bitwise)"


def _rank(status: Status) -> int:
    return {Status.OK: 0, Status.NOTE: 1, Status.SKIP: 2, Status.FAIL: 3}[status]


def _where(op: Op, at: tuple[int, ...]) -> str:
    names = ("window", "frame", "class") if op is Op.SEGMENTATION else ("row", "element")
    return ", ".join(f"{name} {i}" for name, i in zip(names, at, strict=False))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"
