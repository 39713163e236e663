"""Judge a packer: every law, searched with hypothesis, a broken one shrunk to its minimal example.

``check_packer(packer, examples, seed)`` is the whole of ``harness laws`` and of the pytest kit.
It is deterministic (a fixed seed, no example database) and bounded (``examples`` per law, then
hypothesis's bounded shrinking), so CI gets the same verdict and the same counterexample every
run. A packer that cannot be run at all (cannot start, or stops answering) is not a broken
law: it raises the packer's one-line error (the CLI's exit 2).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from random import Random

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import HypothesisException, NoSuchExample

from harness.blocks import Block
from harness.laws.laws import FATAL, LAWS, Law, LawBroken, NotJudged
from harness.laws.report import BROKEN, HELD, NOT_JUDGED, Counterexample, LawOutcome, LawsReport
from harness.laws.strategies import LAW_GEOMETRY, W
from harness.packers.errors import PackerFailed
from harness.packing import Packer


def check_packer(packer: Packer, examples: int = 100, seed: int = 0, laws: Sequence[Law] = LAWS) -> LawsReport:
    """Judge ``packer`` on every law (``examples`` generated examples each); raise if it cannot run."""
    if examples < 1:
        raise ValueError(f"examples must be >= 1, got {examples}")
    start = time.perf_counter()
    smoke_test(packer)
    outcomes = tuple(run_law(packer, law, examples, seed) for law in laws)
    return LawsReport(packer.describe(), examples, seed, outcomes, time.perf_counter() - start)


def smoke_test(packer: Packer) -> None:
    """Pack and unpack one plain block: a packer that cannot even do that cannot be run (its error propagates).

    Only failures of the packer *process* (or callable) count here; a malformed answer is left to
    the laws, which will show it on a minimal example.
    """
    span = np.linspace(-1, 1, W, dtype=np.float32)
    block = Block.create("smoke", 0, span, np.zeros(8, np.int64), np.full(8, W, np.int32), LAW_GEOMETRY)
    try:
        packed = packer.pack([block])
        packer.unpack(packed, {packed.op.output_name: np.zeros((packed.windows, 3), np.float32)})
    except (*FATAL, PackerFailed):
        raise
    except Exception:  # malformed answer, refusal: judged (and shown) by the laws
        pass


def run_law(packer: Packer, law: Law, examples: int, seed: int) -> LawOutcome:
    """Search ``examples`` examples for a counterexample to ``law``; shrink the first one found."""
    state = {"calls": 0, "judged": 0, "skipped": 0, "found_after": None}
    notes: set[str] = set()
    fatal: list[BaseException] = []
    last: list[tuple] = []

    def breaks(example: tuple[list[Block], dict]) -> bool:
        if fatal:  # stop calling a packer that cannot run; hypothesis then ends quickly
            return True
        blocks, params = example
        state["calls"] += 1
        try:
            note = law(packer, blocks, **params)
        except LawBroken:
            if state["found_after"] is None:
                state["found_after"] = state["calls"]
            last[:] = [example]
            return True
        except NotJudged:
            if state["found_after"] is None:
                state["skipped"] += 1
            return False
        except FATAL as exc:
            fatal.append(exc)
            return True
        if state["found_after"] is None:
            state["judged"] += 1
        if note:
            notes.add(note)
        return False

    config = settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate, Phase.shrink],
                      suppress_health_check=list(HealthCheck), derandomize=False)
    up_front = law.note(packer)
    base_notes = (up_front,) if up_front else ()
    try:
        minimal = find(law.examples(), breaks, settings=config, random=Random(seed))
    except NoSuchExample:
        if fatal:
            raise fatal[0] from None
        if state["judged"] == 0:
            return LawOutcome(law.name, law.statement, NOT_JUDGED, 0, state["skipped"], base_notes)
        return LawOutcome(law.name, law.statement, HELD, state["judged"], state["skipped"],
                          base_notes + tuple(sorted(notes)))
    except HypothesisException:  # e.g. Flaky: the packer answered one example two ways while shrinking
        if fatal:
            raise fatal[0] from None
        if not last:
            raise
        minimal = last[0]
    if fatal:
        raise fatal[0]
    return LawOutcome(law.name, law.statement, BROKEN, state["judged"], state["skipped"], base_notes,
                      replay(packer, law, minimal, state["found_after"] or state["calls"]))


def replay(packer: Packer, law: Law, example: tuple[list[Block], dict], found_after: int) -> Counterexample:
    """Run the law once more on the minimal example, to show what the packer made of it."""
    blocks, params = example
    try:
        law(packer, blocks, **params)
    except LawBroken as exc:
        return Counterexample(tuple(blocks), dict(params), exc.what, exc.packed, found_after)
    except NotJudged as exc:
        return Counterexample(tuple(blocks), dict(params), f"on a second call the answer was malformed: {exc}", None,
                              found_after, reproducible=False)
    return Counterexample(tuple(blocks), dict(params), "the law held on a second call with the same blocks", None,
                          found_after, reproducible=False)
