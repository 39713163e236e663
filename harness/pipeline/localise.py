"""Localisation of failing shapes, after the verdict: best effort, and it says why when it cannot.

The verdict, the ledger and the manifest are written before this runs; a model that cannot be
hooked (a TorchScript module), a device that is not there, or any other failure here is recorded
as the reason, never allowed to undo or block the verdict. The pack to replay is the one the run
actually sent (its block ids are in the run's call log), rebuilt with the golden's voiceprint
inputs, on the run's own device by default. Each module's error is normalised by the golden's module
floors (``module_floors``, :mod:`harness.localisation.module_floors`; one ulp of each module's scale for a golden
without them) and the first module over ``multiple`` x its floor is named (``[localise]
floor_multiple``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from golden.runs import Run
from golden.store import Golden
from harness.base.errors import one_line, step
from harness.data.call_record import CallRecord
from harness.data.ops import Op
from harness.data.schemas.results import OpVerdictModel, Score
from harness.data.shape import Shape
from harness.judging.lane_scoring import op_key
from harness.localisation.first_divergence import Inferring, Localised, localise
from harness.localisation.module_errors import DEFAULT_MULTIPLE
from harness.progress import progress_bar
from lanes.running.runner import no_rows

FORMAT = 1


@dataclass(frozen=True)
class _Replay:
    """What every failing OP of one score is localised with: the golden and the run (its call log read once),
    the model, the floor multiple and the folder the compared calls' module outputs spill to."""

    golden: Golden
    run: Run
    calls: list[CallRecord]
    model: Inferring
    multiple: float
    spill: Path | None


def localise_failures(
    score: Score,
    golden: Golden,
    run: Run,
    load_model: Callable[[], Inferring],
    multiple: float = DEFAULT_MULTIPLE,
    spill: Path | None = None,
    progress: bool = False,
) -> dict[str, dict[str, Localised]]:
    """``{k: {op: result}}`` for every failing OP of every failing shape (see module doc); ``spill``: the folder
    the compared calls' module outputs are written to (harness.localisation.activations); ``progress``: say each one."""
    failing = {
        k: [op for op, v in shape.ops.items() if not v.passed]
        for k, shape in score.shapes.items()
        if shape.verdict == "fail"
    }
    if not any(failing.values()):
        return {}
    out: dict[str, dict[str, Localised]] = {}
    try:
        with step("load model for localisation"):
            model = load_model()
    except Exception as exc:  # best effort: say why, never fail the verdict
        reason = f"the model could not be loaded here ({type(exc).__name__}: {one_line(exc)})"
        return {k: {op: {"available": False, "reason": reason} for op in ops} for k, ops in failing.items()}
    if getattr(model, "fingerprint", None) != golden.fingerprint:
        reason = "the configured model is not the golden's (fingerprints differ)"
        return {k: {op: {"available": False, "reason": reason} for op in ops} for k, ops in failing.items()}
    replay = _Replay(golden, run, run.calls(), model, multiple, spill)
    total = sum(len(ops) for ops in failing.values())
    with progress_bar("localise failing shapes", total, progress, unit="OPs") as tick:
        for k, ops in failing.items():
            out[k] = {}
            for op_key in ops:
                tick.phase(f"k={k} OP {op_key}: the packed and the alone call, hooked, module by module")
                try:
                    with step(f"localise k={k} OP {op_key}"):
                        out[k][op_key] = _one(score.shapes[k].ops[op_key], Shape(k), Op(int(op_key)), replay)
                except Exception as exc:  # best effort: say why, never fail the verdict
                    out[k][op_key] = {"available": False, "reason": f"{type(exc).__name__}: {one_line(exc)}"}
                tick.phase(None)
                tick(1)
    return out


def _one(verdict: OpVerdictModel, k: int, op: Op, replay: _Replay) -> Localised:
    golden, run, calls = replay.golden, replay.run, replay.calls
    # verdict.failing: the worst offenders' rows, each judge's own free-form JSON object: read by key
    targets = [f["block"] for f in verdict.failing if f.get("block")]
    if not targets:
        return {"available": False, "reason": "no failing block named (rows missing, or the corpus bound failed)"}
    target = targets[0]
    call = next(
        (
            c
            for c in calls
            if c.lane == "fast"
            and int(c.shape) == k
            and int(c.op) == int(op)
            and not c.variant
            and target in c.block_ids
        ),
        None,
    )  # the plain lane's pack
    if call is None:
        return {"available": False, "reason": f"the run's call log has no k={k} OP {int(op)} call with {target!r}"}
    members = list(call.block_ids)
    wanted = set(members)
    found = {b.id: b for b in golden.corpus() if b.id in wanted}
    blocks = [found[b] for b in members]
    if op.is_voiceprint:
        inputs = golden.voiceprint_inputs(members).get(op, {})
        g = golden.geometry
        rows = {b.id: inputs.get(b.id) or no_rows(g) for b in blocks}
        blocks = [b.with_voiceprint(op, rows[b.id].weights, rows[b.id].idx, rows[b.id].speakers, g) for b in blocks]
        if sum(b.rows for b in blocks) == 0:
            return {"available": False, "reason": "the failing pack has no voiceprint rows"}
    recorded = golden.manifest.module_floors
    mine = recorded.ops.get(op_key(op)) if recorded is not None else None
    floors = {name: f.model_dump(mode="json") for name, f in mine.items()} if mine is not None else None
    return localise(
        replay.model,
        blocks,
        target=target,
        pad_to=k if run.manifest.pad_to_fixed else None,
        floors=floors,
        multiple=replay.multiple,
        spill=replay.spill,
    )
