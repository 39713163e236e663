"""The night's canaries: known defects planted through the model and backend, each of which must be refused.

After the lanes, at the smallest packed shape, on one request of a seeded sample of the run's blocks
(``lanes.running.canaries`` sends; ``harness.evidence.canary_verdicts`` judges with the night's own rules):

- ``leak``: one window of the first block mixed with 1e-6 of the same window of the next one: expected cause
  ``reads another block's audio``;
- ``rebasing``: one voiceprint row's IDX rebased onto the next block's first window: the same cause;
- ``exchange``: the first two blocks' answers exchanged on unpacking: the same cause;
- ``shift``: one window of OP 0 and one row of OP 1 of the night's own answers moved by twice the OP's
  tolerance (no call): ``numerics at this batch shape beyond the tolerances``.

Their figures and causes go into the score (``canaries``), the report and JUnit. They never touch the golden
or the real lanes' verdicts; a canary the gate did not refuse fails the night, and the night then promotes
nothing (a gate that cannot see is no gate).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping

import numpy as np

from golden.runs import Run
from golden.store import Golden
from harness.base.jsonio import plain_dict, seal
from harness.data.blocks import Block
from harness.data.masks import VoiceprintRows
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.config_file import ConfigFile
from harness.data.schemas.neighbours import ControlFigures
from harness.data.schemas.results import Canary, CanaryRun, Score
from harness.data.shape import Shape, lane_name
from harness.evidence.canary_verdicts import Judging, judge, lane_of
from harness.evidence.control_tally import ControlTally
from harness.evidence.rule import evidence_limits
from harness.packers.packing import Packer
from lanes.backends.backend_api import Backend
from lanes.running.canaries import OP_OF, SENT, CanarySample, leak_window, send
from lanes.running.device_queue import ordered
from lanes.running.neighbour_lane import fill

CANDIDATES = 64  # sample starts tried (seeded order) before the canaries are given up
SHIFT_PLANTED = "one window of {a} (OP 0, {w}) and its first voiceprint row (OP 1) moved by twice the OP's max_abs"
PLANTED: Mapping[str, str] = {
    "leak": "one window of {a} ({w}) mixed with 1e-6 of the same window of {b}, the block next to it",
    "rebasing": "the heaviest voiceprint row of {a} (OP 1) rebased onto the first window of {b}, the block next to it",
    "exchange": "the answers of {a} and {b} exchanged on unpacking (OP 0)",
    "shift": SHIFT_PLANTED,
}


def not_planted(why: str) -> CanaryRun:
    return CanaryRun(planted=False, why=why, k=None, calls=0, seconds=0.0, network_seconds=None, canaries=[], seen=True)


def plant(config: ConfigFile, golden: Golden, run: Run, score: Score, backend: Backend, packer: Packer) -> CanaryRun:
    """The night's canaries (module doc), judged; ``score``: the real lanes' (their neighbour evidence gives the
    backend's run-to-run difference)."""
    if not config.evidence.canaries:
        return not_planted("[evidence] canaries = false")
    ks = sorted(int(k) for k in score.shapes if int(k) >= 2)
    if not ks:
        return not_planted("no candidate shape of 2 or more blocks")
    k = ks[0]
    sample = choose_sample(golden, run, k, config.evidence.seed)
    if isinstance(sample, str):
        return not_planted(sample)
    ops = [Op(int(o)) for o in score.shapes[str(k)].ops]
    floors = {int(o): f.model_dump() for o, f in score.reproducibility.ops.items()}
    limits = evidence_limits(score.tolerances, ops, floors)
    judging = Judging(limits, score.verification, golden.geometry)
    ids = [b.id for b in sample.blocks]
    gold = golden.outputs().select(ids)
    names = {"a": repr(ids[0]), "b": repr(ids[1]), "w": f"window {sample.window}"}
    with_neighbours = score.shapes[str(k)].neighbours is not None
    canaries: list[Canary] = []
    calls, seconds = 0, 0.0
    with ordered(backend) as line:  # the backend's own device queue, as the lanes' calls went
        sent = {
            name: send(name, sample, line, packer, again=_reference_noise(score, k, OP_OF[name]) is None)
            for name in SENT
            if OP_OF[name] in ops
        }
    for name, answers in sent.items():
        op = OP_OF[name]
        reference = {op: _reference_noise(score, k, op)}
        calls, seconds = calls + answers.calls, seconds + answers.seconds
        lanes = (
            gold,
            lane_of(answers.plain, op, gold, sample.rows, golden.geometry),
            lane_of(answers.beside, op, gold, sample.rows, golden.geometry) if with_neighbours else None,
            None if answers.again is None else _again(answers.plain, answers.again),
        )
        planted = PLANTED[name].format(**names)
        canaries.append(judge(name, planted, k, [op], lanes, reference, judging))
    shift_ops: list[Op] = [op for op in (Op.SEGMENTATION, Op.VOICEPRINT) if op in ops]
    # the night's own plain answers, shifted: a defect of numerics, not of neighbours (the night's own neighbour
    # evidence is not asked again here: on a leaking model it would name the real leak, not this canary)
    plain = _shifted(run.lane(lane_name(k)).select(ids), sample, shift_ops, score)
    shift = judge(
        "shift",
        SHIFT_PLANTED.format(**names),
        k,
        shift_ops,
        (gold, plain, None, None),
        {},
        judging,
    )
    canaries.append(shift)
    network = float(score.host.device_s) if score.host is not None else None
    return CanaryRun(
        planted=True,
        why=None,
        k=Shape(k),
        calls=calls,
        seconds=seconds,
        network_seconds=network,
        canaries=canaries,
        seen=all(c.seen for c in canaries),
    )


def _shifted(lane: LaneOutputs, sample: CanarySample, ops: list[Op], score: Score) -> LaneOutputs:
    """The night's own answers of the sample with the shift canary planted: the first block's leak window (OP 0)
    and its first voiceprint row (OP 1) moved by twice the OP's max_abs (a copy: the run is not touched)."""
    first = sample.blocks[0].id
    seg = lane.segmentation
    logprobs = np.array(seg.logprobs, dtype=np.float32, copy=True)
    if Op.SEGMENTATION in ops:
        at = list(seg.block_ids).index(first)
        logprobs[at, sample.window] += np.float32(2 * score.tolerances.op0.max_abs)
    voiceprint = dict(lane.voiceprint)
    if Op.VOICEPRINT in ops and Op.VOICEPRINT in voiceprint:
        v = voiceprint[Op.VOICEPRINT]
        embedding = np.array(v.embedding, dtype=np.float32, copy=True)
        rows = np.flatnonzero(v.block_ids == first)
        if rows.size:
            embedding[int(rows[0])] += np.float32(2 * score.tolerances.op1.max_abs)
        voiceprint[Op.VOICEPRINT] = dataclasses.replace(v, embedding=embedding)
    return LaneOutputs(dataclasses.replace(seg, logprobs=logprobs), voiceprint)


def _reference_noise(score: Score, k: int, op: Op) -> float | None:
    """The backend's run-to-run difference at ``op`` as the shape's own evidence measured it: 0 where it repeated
    itself (its neighbour lane answered every block bitwise as the plain lane did, or its controls repeated, and no
    request of the run was answered otherwise), else the difference measured at this OP (the shape's, or the run's
    elsewhere); None: not known (the canary then sends its plain request once more)."""
    ev = score.shapes[str(k)].neighbours
    found = ev.ops.get(str(int(op))) if ev is not None else None  # type: ignore[call-overload]
    if found is None:
        return None
    alike = found.outcome == "bitwise" or found.noise_max_abs == 0.0
    if alike and found.run_reproduced is not False:
        return 0.0
    noise: float | None = found.noise_max_abs or found.reference_noise
    return noise


def _again(first: Mapping[str, np.ndarray], again: Mapping[str, np.ndarray]) -> ControlFigures:
    tally = ControlTally(plain_sent=1)
    same = [tally.compare(first[b], again[b]) for b in first]
    tally.plain_reproduced = int(all(same))
    return tally.figures()


def choose_sample(golden: Golden, run: Run, k: int, seed: int) -> CanarySample | str:
    """k consecutive blocks of the run (golden order) from a seeded start, the first with a voiceprint row and a
    window the leak can reach, the second with audio in its first window (a line saying why: none found)."""
    mine = set(run.block_ids())
    order = [b for b in golden.block_ids() if b in mine]
    if len(order) < k:
        return f"the run holds {len(order)} block(s), fewer than one request of k={k}"
    starts = sorted(range(len(order)), key=lambda i: hashlib.sha256(f"canary|{seed}|{order[i]}".encode()).digest())
    for start in starts[:CANDIDATES]:
        ids = [order[(start + j) % len(order)] for j in range(k)]
        rows = golden.voiceprint_inputs(ids).get(Op.VOICEPRINT, {})
        if not len(rows.get(ids[0], _NONE).idx):
            continue
        blocks = _blocks(golden, ids)
        if int(blocks[1].valid[0]) <= 0:
            continue
        w = leak_window(blocks[0], blocks[1])
        if w is None:
            continue
        return CanarySample(k, blocks, {b: rows.get(b, _NONE) for b in ids}, w, fill(seed))
    return "no block of the run has a voiceprint row beside a block whose audio a leak could reach"


def _blocks(golden: Golden, ids: list[str]) -> list[Block]:
    reader, _ = golden.corpus_hashed_meanwhile(verified=True)
    found = {b.id: b for b, _, _ in reader.rows(set(ids))}
    return [found[b] for b in ids]


_NONE = VoiceprintRows(np.zeros((0, 1), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32))


def with_canaries(score: Score, canaries: CanaryRun) -> Score:
    """The score with its canaries, sealed again over the whole."""
    body = score.model_dump(mode="json")
    body.pop("digest", None)
    body["canaries"] = canaries.model_dump(mode="json")  # the score's JSON, sealed over its canonical form
    return Score.model_validate(seal(plain_dict(body), "digest"))


def blind_line(run: CanaryRun) -> str:
    """The night's last line when a canary was not refused with its cause: which, what was planted, what the gate
    said instead, and that nothing was promoted."""
    missed = [c for c in run.canaries if not c.seen]
    first = missed[0]
    said = "it passed" if first.shape.cause is None else f"refused as {first.shape.cause.kind!r}"
    more = f" (+{len(missed) - 1} more canar{'ies' if len(missed) > 2 else 'y'} not seen)" if len(missed) > 1 else ""
    return (
        f"FAIL: the gate did not see a planted defect: {first.name} at k={run.k} ({first.planted}): expected "
        f"{first.expected!r}, {said}{more}; nothing was promoted: a gate that cannot see this defect on this model "
        "and backend is no gate (the report's Canaries section has every canary's evidence)"
    )
