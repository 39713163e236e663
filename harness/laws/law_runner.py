"""Judge a packer: every law on its boundary examples, then searched with hypothesis, a broken one shrunk.

``check_packer(packer, examples, seed, max_blocks)`` is the whole of ``harness laws``, of the pytest
kit and of a run's laws gate. It is deterministic (fixed boundary examples, a fixed seed, no
example database) and bounded (the boundary examples, ``examples`` generated ones per law, then
bounded shrinking), so CI gets the same verdict and the same counterexample every run.

Three outcomes per law, and only one is good: ``held`` (judged on every example, broken on
none), ``broken`` (a counterexample, shrunk), ``not judged`` (a custom law skipped examples, or
judged none: never counted as held). A packer that cannot be run at all (cannot start, exits,
stalls, raises) is not a broken law: the packer's one-line error propagates (the CLI's exit 2).
"""

from __future__ import annotations

import dataclasses
import inspect
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from random import Random

import numpy as np
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import HypothesisException, HypothesisWarning, NoSuchExample

from harness.data.blocks import Block
from harness.laws.boundary import DEFAULT_MAX_BLOCKS, Example, LawParams
from harness.laws.law_tools import FATAL, LawBroken, NotJudged
from harness.laws.laws_report import BROKEN, HELD, NOT_JUDGED, Counterexample, LawOutcome, LawsReport
from harness.laws.registry import LAWS, Law
from harness.laws.strategies import LAW_GEOMETRY, W
from harness.packers.packer_errors import PackerError
from harness.packers.packing import Packer

SHRINK_BUDGET = 300  # law calls spent shrinking a broken boundary example that the search did not break
# Law calls hypothesis may spend shrinking a counterexample: a packer broken only past 40 blocks gives
# 41-block examples, each call costly; past this, the best one found so far has blocks deleted
# greedily (:func:`shrink`), which is what large examples need most.
SEARCH_SHRINK_CALLS = 40


def check_packer(
    packer: Packer, examples: int = 100, seed: int = 0, laws: Sequence[Law] = LAWS, max_blocks: int = DEFAULT_MAX_BLOCKS
) -> LawsReport:
    """Judge ``packer`` on every law; raise the packer's error if it cannot be run.

    ``max_blocks``: the largest list of blocks (and ``pad_to``) the engine packs, e.g. its
    largest candidate k: every law is judged at that size whatever ``examples`` is.
    """
    if examples < 1:
        raise ValueError(f"examples must be >= 1, got {examples}")
    if max_blocks < 1:
        raise ValueError(f"max_blocks must be >= 1, got {max_blocks}")
    start = time.perf_counter()
    smoke_test(packer)
    outcomes = []
    for law in laws:
        began = time.perf_counter()
        outcome = run_law(packer, law, examples, seed, max_blocks)
        outcomes.append(dataclasses.replace(outcome, seconds=time.perf_counter() - began))
    return LawsReport(
        packer.describe(), examples, seed, tuple(outcomes), time.perf_counter() - start, max_blocks=max_blocks
    )


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
    except FATAL:
        raise
    except PackerError:  # malformed answer, refusal: judged (and shown) by the laws
        pass


@dataclass
class _Tally:
    """One law's running counts: law calls, examples judged and skipped before the first break, and
    the call that first broke it (None: none yet) and the one shrinking started at (0: not yet)."""

    calls: int = 0
    judged: int = 0
    skipped: int = 0
    found_after: int | None = None
    shrinking_from: int = 0
    broken_on: int = 0  # examples of the boundary phase and the search that broke the law (shrinking not counted)


def run_law(packer: Packer, law: Law, examples: int, seed: int, max_blocks: int = DEFAULT_MAX_BLOCKS) -> LawOutcome:
    """Judge ``law`` on its boundary examples, then search ``examples`` more; shrink the first one broken."""
    state = _Tally()
    notes: set[str] = set()
    fatal: list[BaseException] = []
    last: list[Example] = []
    kinds: dict[int, bool] = {}  # id(example) -> broken by a malformed answer (not the law's own kind)

    def breaks(example: Example) -> bool:
        """True if the law is broken on ``example``; FATAL errors propagate."""
        blocks, params = example
        state.calls += 1
        try:
            note = law(packer, blocks, **params)
        except LawBroken as exc:
            if state.found_after is None:
                state.found_after = state.calls
            last[:] = [example]
            kinds[id(example)] = exc.malformed
            return True
        except NotJudged:
            if state.found_after is None:
                state.skipped += 1
            return False
        if state.found_after is None:
            state.judged += 1
        if note:
            notes.add(note)
        return False

    def searched(example: Example) -> bool:
        if fatal:  # stop calling a packer that cannot run; hypothesis then ends quickly
            return True
        if state.shrinking_from and state.calls - state.shrinking_from > SEARCH_SHRINK_CALLS:
            return False  # shrinking budget spent: hypothesis ends (Flaky), and the last broken example stands
        try:
            if broken := breaks(example):
                state.shrinking_from = state.shrinking_from or state.calls
            return broken
        except Exception as exc:  # FATAL, or a bug: re-raised after find(), not shrunk by hypothesis
            fatal.append(exc)
            return True

    fixed = law.boundary(max_blocks) if law.boundary is not None else []
    broken_fixed, boundary = None, 0
    # every one (so the report can say on how many of them the law broke); the one shown is the first broken in
    # the law's own kind, else the first broken by a malformed answer
    for example in fixed:
        boundary += 1
        if breaks(example):
            state.broken_on += 1
            if broken_fixed is None or (kinds[id(broken_fixed)] and not kinds[id(example)]):
                broken_fixed = example
    up_front = law.note(packer)
    base_notes = (up_front,) if up_front else ()
    if broken_fixed is not None:  # no search: the boundary example cut down by deleting blocks (cheap, deterministic)
        return LawOutcome(
            law.name,
            law.statement,
            BROKEN,
            state.judged,
            state.skipped,
            base_notes,
            replay(
                packer,
                law,
                shrink(law, packer, broken_fixed, kinds[id(broken_fixed)]),
                state.found_after or state.calls,
                "boundary",
            ),
            boundary,
            broken_on=state.broken_on,
            tried=boundary,
        )
    config = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
        derandomize=False,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HypothesisWarning)  # the repr of a 64-block example, replayed
            minimal = find(_strategy(law, max_blocks), searched, settings=config, random=Random(seed))
    except NoSuchExample:
        minimal = None
    except HypothesisException:  # Flaky: the shrinking budget was spent, or the packer answered one way, then another
        if fatal:
            raise fatal[0] from None
        if not last:
            raise
        minimal = shrink(law, packer, last[0])
    if fatal:
        raise fatal[0] from None
    if minimal is not None:  # the search stops at its first counterexample: broken on 1 of the examples up to it
        return LawOutcome(
            law.name,
            law.statement,
            BROKEN,
            state.judged,
            state.skipped,
            base_notes,
            replay(packer, law, minimal, state.found_after or state.calls),
            boundary,
            broken_on=1,
            tried=state.found_after or state.calls,
        )
    status = HELD if state.judged and not state.skipped else NOT_JUDGED
    return LawOutcome(
        law.name,
        law.statement,
        status,
        state.judged,
        state.skipped,
        base_notes + tuple(sorted(notes)),
        None,
        boundary,
        tried=state.calls,
    )


def _strategy(law: Law, max_blocks: int) -> st.SearchStrategy[Example]:
    """The law's example strategy at ``max_blocks`` (a custom law's ``examples()`` may take no argument)."""
    try:
        takes = bool(inspect.signature(law.examples).parameters)
    except (TypeError, ValueError):
        takes = False
    return law.examples(max_blocks) if takes else law.examples()


def shrink(
    law: Law, packer: Packer, example: Example, malformed: bool | None = None, budget: int = SHRINK_BUDGET
) -> Example:
    """Delete blocks from a broken fixed example while the law stays broken (greedy, halving chunks).

    The boundary examples are not hypothesis's, so it cannot shrink them; a request padded to k
    stays padded to k (``extra`` grows as real blocks go), a cut stays inside the list; with
    ``malformed`` given, a smaller example counts only if it breaks the law the same way.
    """
    blocks, _ = example
    keep = list(range(len(blocks)))
    chunk = len(keep) // 2
    while chunk >= 1 and budget > 0:
        i = 0
        while i < len(keep) and budget > 0:
            candidate = _subset(example, keep[:i] + keep[i + chunk :])
            budget -= candidate is not None
            if candidate is not None and _broken(law, packer, candidate, malformed):
                keep = keep[:i] + keep[i + chunk :]
            else:
                i += chunk
        chunk //= 2
    return _subset(example, keep) or example


def _subset(example: Example, keep: list[int]) -> Example | None:
    """The example cut to ``keep``, its cut and padding moved to match (None: nothing kept, or the cut is lost)."""
    if not keep:
        return None
    blocks, params = example
    sub, given = [blocks[i] for i in keep], LawParams.of(params)
    out = dict(params)  # the law's keyword arguments, by name, with the kit's own moved
    if given.cut is not None:
        cut = sum(1 for i in keep if i < given.cut)
        if not 1 <= cut <= len(sub) - 1:
            return None
        out.update(cut=cut)
    if given.extra is not None:
        out.update(extra=given.extra + len(blocks) - len(sub))
    return sub, out


def _broken(law: Law, packer: Packer, example: Example, malformed: bool | None = None) -> bool:
    try:
        law(packer, example[0], **example[1])
    except LawBroken as exc:
        return malformed is None or exc.malformed == malformed
    except NotJudged:
        return False
    return False


def replay(packer: Packer, law: Law, example: Example, found_after: int, source: str = "search") -> Counterexample:
    """Run the law once more on the minimal example, to show what the packer made of it."""
    blocks, params = example
    try:
        law(packer, blocks, **params)
    except LawBroken as exc:
        return Counterexample(
            tuple(blocks), dict(params), exc.what, exc.packed, found_after, source=source, answer_error=exc.answer_error
        )
    except NotJudged as exc:
        return Counterexample(
            tuple(blocks),
            dict(params),
            f"on a second call the law could not be judged: {exc}",
            None,
            found_after,
            reproducible=False,
            source=source,
        )
    return Counterexample(
        tuple(blocks),
        dict(params),
        "the law held on a second call with the same blocks",
        None,
        found_after,
        reproducible=False,
        source=source,
    )
