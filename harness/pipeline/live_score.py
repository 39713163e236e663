"""The nightly's score, accumulated while its lanes run: fed from the run's sink, not re-read after it.

Post-hoc scoring (:func:`harness.pipeline.score.score_run`) re-reads every lane's Parquet once the run is
written and scores it against the golden, all after the device's last call: seconds that grow with the
corpus. Here the run's sink is teed (:func:`harness.pipeline.run.run_shapes`, ``observer``): every lane's
outputs of every group go to :meth:`LiveScore.sink` too, which hands each complete group to one
background thread through a bounded queue (``DEPTH`` groups; a full queue makes the lanes wait, so memory
stays a few groups, never the corpus). That thread reads the golden's outputs of the same blocks and
feeds the very :class:`~harness.pipeline.score.Scoring` that ``score_run`` feeds, with the same batches:
``BATCH_BLOCKS`` blocks at a time in golden order, whatever the lanes' group size (groups are re-cut at
batch boundaries), so every accumulated figure (first differing block, worst block and its ties, float
sums) is what post-hoc scoring accumulates, and score.json is the same bytes but its ``created`` time and
the seal over it (tests/test_live_score.py compares the files). After the lanes only the small end is
left (:meth:`Scoring.finish`: verdicts, the call log's pass, the body).

The thread takes only what is queued and scores batch by batch (numpy and pyarrow release the GIL), so
it works in the gaps the lanes' main thread leaves while it waits on the device.

Checks: :meth:`LiveScore.result` runs :func:`~harness.pipeline.score.check_comparable` on the written run
(golden id, fingerprint, geometry, strays) before the score is used, and refuses a score accumulated over
other blocks than the run holds. Groups that arrive out of golden order (a corpus the golden did not
record in this order) cannot be batched as post-hoc scoring batches them: the live score is then dropped
and the run scored post-hoc, which gives the same file. A failure in the thread is raised in the main
thread by the next group handed over (the lanes stop; the run is not written) or by :meth:`result`; on
any exit the thread is stopped after the batch in hand and joined (:func:`live_score`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from golden.lane_reader import LaneReader
from golden.runs import Run
from golden.store import Golden
from harness.base.errors import ScoringError, step
from harness.base.fsio import fault
from harness.base.overlap import WriteBehind
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, VoiceprintOutputs
from harness.data.schemas.files import RunLayout
from harness.data.schemas.results import Score
from harness.data.shape import EXACT
from harness.data.tolerances import Tolerances
from harness.pipeline import score as scoring

DEPTH = 2  # complete groups waiting for the scorer, at most (each holds every lane's outputs of its blocks)


class _Flush:
    """The last item: score what is buffered (the corpus's last, partial batch)."""


_FLUSH = _Flush()
Group = dict[str, LaneOutputs]


class LiveScore:
    """A :class:`~harness.pipeline.score.Scoring` fed from the run's sink in a thread (module doc)."""

    def __init__(
        self,
        golden: Golden,
        layout: RunLayout,
        lanes: Sequence[str],
        tolerances: Tolerances,
        depth: int = DEPTH,
    ) -> None:
        """``layout``: the run manifest's fields scoring reads, as the run will be written
        (:func:`harness.pipeline.run.scoring_fields`); ``lanes``: every lane a group holds (``RunPlan.lanes``)."""
        self.golden, self.tolerances = golden, tolerances
        self.scoring = scoring.Scoring(golden, layout, tolerances)
        self.lanes = list(lanes)
        missing = [n for n in self.scoring.names if n not in self.lanes]
        if missing:
            raise ScoringError(f"the live score needs lane {missing[0]!r}, which the run does not make ({self.lanes})")
        self.batch = scoring.BATCH_BLOCKS  # read now: the post-hoc path's batch size, as it is set
        self.ids: list[str] = []  # every block handed over, in arrival order
        self.dropped: str | None = None  # why the live score cannot stand for the post-hoc one (then None)
        self._group: Group = {}
        self._buffer: list[Group] = []  # groups (or the rest of one) not yet cut into batches, in order
        self._buffered = 0
        self._order: dict[str, int] | None = None
        self._reader: LaneReader | None = None
        self._golden_ids: list[str] | None = None  # the golden's blocks in order (what _read_ahead guesses from)
        self._last = -1
        self._behind: WriteBehind[Group | _Flush] = WriteBehind(self._consume, depth=depth, name="live-score")

    # -- the lanes' side (main thread) ---------------------------------------------------------------------
    def sink(self, lane: str, batch: LaneOutputs) -> None:
        """One lane's outputs of one group (the runner's sink, after the run's writer): a group is handed to
        the thread once every lane of it is here; a failure in the thread is raised here."""
        if lane in self._group:
            raise ScoringError(f"live score: lane {lane!r} gave a second batch before the group was complete")
        self._group[lane] = batch
        if len(self._group) == len(self.lanes):
            group, self._group = self._group, {}
            self.ids += group[EXACT].block_ids
            with step("live score"):
                self._behind.submit(group)

    def result(self, run: Run) -> Score:
        """The score of ``run`` (written by the lanes that fed this), sealed; the run is checked against the
        golden first, as post-hoc scoring checks it, and scored post-hoc if the live score was dropped."""
        with step("live score"):
            if self._group:
                raise ScoringError(f"live score: the lanes ended mid-group ({sorted(self._group)} of {self.lanes})")
            self._behind.submit(_FLUSH)
            self._behind.close()  # waits for the last batch; raises what the thread raised
        with step("check run"):
            ids = scoring.check_comparable(self.golden, run, self.scoring.names)
        if self.dropped is not None:
            return scoring.score_run(self.golden, run, self.tolerances)
        if ids != self.ids:
            raise ScoringError(
                f"run {run.run_id} holds {len(ids)} blocks, the live score was fed {len(self.ids)} "
                f"(first difference at block {_first_difference(ids, self.ids)}): score the run with "
                "`harness score`"
            )
        return self.scoring.finish(self.golden, run, ids)

    def abort(self) -> None:
        """Stop the thread after the batch in hand, drop the rest, join it (raises nothing)."""
        self._behind.abort()

    # -- the scorer's side (its thread) --------------------------------------------------------------------
    def _consume(self, item: Group | _Flush) -> None:
        """Score ``item`` (the thread's work); an OSError here is the live scorer's (it reads the golden), never
        the run folder's, which the main thread's writer would otherwise name when it re-raises it."""
        try:
            self._consume_group(item)
        except OSError as exc:
            raise ScoringError(
                f"live scorer (scoring the lanes against golden {self.golden.path} while they run): "
                f"{exc.strerror or exc}"
            ) from None

    def _consume_group(self, item: Group | _Flush) -> None:
        with step("live score"):
            fault("live-score")
            if self._order is None:
                self.golden.outputs()  # checked and hashed once (normally the lanes' golden reader did it)
                self._golden_ids = self.golden.block_ids()
                self._order = {b: i for i, b in enumerate(self._golden_ids)}
                # a reader of its own: the lanes' golden reader is used by their thread meanwhile
                self._reader = LaneReader(
                    self.golden.path,
                    self.golden.geometry,
                    self.golden.ops,
                    decisions=True,
                    where=f"golden {self.golden.path}",
                )
            if self.dropped is not None:
                return
            if isinstance(item, _Flush):
                if self._buffered:
                    self._score(self._buffered)
                return
            ids = item[EXACT].block_ids
            for b in ids:
                at = self._order.get(b, -1)
                if at <= self._last:  # a stray, or out of golden order: post-hoc batches cannot be cut from these
                    self.dropped = f"block {b!r} came out of golden order (or is no block of the golden)"
                    self._buffer, self._buffered = [], 0
                    return
                self._last = at
            self._buffer.append(item)
            self._buffered += len(ids)
            while self._buffered >= self.batch:
                self._score(self.batch)

    def _score(self, count: int) -> None:
        """Score the first ``count`` buffered blocks as one batch; keep the rest."""
        assert self._reader is not None
        parts, names = self._buffer, self.scoring.names
        whole = {n: LaneOutputs.concat([p[n] for p in parts]) if len(parts) > 1 else parts[0][n] for n in names}
        ids = whole[EXACT].block_ids
        chunk, rest = ids[:count], ids[count:]
        self._buffer = [{n: lane.select(rest) for n, lane in whole.items()}] if rest else []
        self._buffered = len(rest)
        lanes = {n: _complete(_cut(lane, chunk), self.scoring.ops, self.golden) for n, lane in whole.items()}
        self.scoring.add(self._reader.select(chunk), lanes)
        self._read_ahead(chunk)

    def _read_ahead(self, chunk: list[str]) -> None:
        """The golden's rows of the batch that comes next (the blocks after ``chunk`` in golden order: a whole
        corpus arrives in that order), read now while the lanes still run; else the last batch's reading is
        on the path after the device's last call. A wrong guess costs only a read: :meth:`_score` selects
        whatever batch does come."""
        assert self._reader is not None and self._order is not None and self._golden_ids is not None
        at = self._order[chunk[-1]] + 1
        if at < len(self._golden_ids):
            self._reader.read_ahead(self._golden_ids[at : at + self.batch])


def _cut(lane: LaneOutputs, chunk: list[str]) -> LaneOutputs:
    return lane if lane.block_ids == chunk else lane.select(chunk)


def _complete(lane: LaneOutputs, ops: Sequence[Op], golden: Golden) -> LaneOutputs:
    """Every voiceprint OP present, empty where no block of the batch had rows: as a lane's file reads back."""
    if all(op in lane.voiceprint for op in ops if op.is_voiceprint):
        return lane
    return LaneOutputs(
        lane.segmentation,
        {op: lane.voiceprint.get(op) or VoiceprintOutputs.empty(op, golden.geometry) for op in ops if op.is_voiceprint},
    )


def _first_difference(a: Sequence[str], b: Sequence[str]) -> str:
    for x, y in zip(a, b, strict=False):
        if x != y:
            return repr(x)
    return f"#{min(len(a), len(b))}"


@contextmanager
def live_score(golden: Golden, layout: RunLayout, lanes: Sequence[str], tolerances: Tolerances) -> Iterator[LiveScore]:
    """A :class:`LiveScore` whose thread never outlives the block: stopped and joined on any exit (a failure,
    Ctrl-C), after :meth:`LiveScore.result` or without it."""
    live = LiveScore(golden, layout, lanes, tolerances)
    try:
        yield live
    finally:
        live.abort()
