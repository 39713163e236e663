"""Progress during the warm-up. Lines keep coming while one long call runs, the warm-up is its own
phase ("warm-up: OP 0 k=4 (3 of 12)"), and the estimate of the time left does not count the warm-up as
per-call work. Nothing here depends on speed: the slow call blocks on an event the progress lines set, and
the estimate is checked on a fake clock."""

from __future__ import annotations

import io
import re
import threading

import pytest

from harness.base.errors import HarnessError
from harness.progress import PlainLines, progress_bar
from lanes.running.run_plan import RunPlan
from lanes.running.runner import LaneHooks, run_lanes


class Wrapped:
    """The small model's in-process backend, with a hook before every call (a slow call, a fake clock)."""

    def __init__(self, inner, before):
        self.inner, self.before = inner, before
        self.geometry, self.fingerprint, self.name = inner.geometry, inner.fingerprint, "wrapped"
        self.concurrency, self.device_kind = 1, "cpu"

    def call(self, *call):
        self.before()
        return self.inner.call(*call)

    def call_many(self, calls):
        return [self.call(*c) for c in calls]

    def environment(self):
        return self.inner.environment()

    def close(self):
        pass


class Recorder(io.StringIO):
    """stderr: sets ``seen`` once ``wanted`` lines matching ``pattern`` were written."""

    def __init__(self, pattern: str, wanted: int = 2):
        super().__init__()
        self.pattern, self.wanted, self.seen = re.compile(pattern), wanted, threading.Event()

    def write(self, text: str) -> int:
        n = super().write(text)
        if len(self.pattern.findall(self.getvalue())) >= self.wanted:
            self.seen.set()
        return n

    def isatty(self) -> bool:
        return False


def test_lines_keep_coming_while_one_warm_up_call_blocks(backend, small_corpus, monkeypatch):
    """The first (warm-up) call blocks until two progress lines naming the warm-up step were printed: the old
    progress printed only from tick(), which the blocked main thread never reaches, so this waited in vain."""
    stderr = Recorder(r"warm-up: OP 0 exact lane \(1 of 6\)")
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setenv("HARNESS_PROGRESS_SECONDS", "0.01")
    released = []

    def before():
        if not released:
            released.append(stderr.seen.wait(timeout=120))

    plan = RunPlan(shapes=(2,))  # the exact lane and k=2, 3 OPs each: 6 warm-up steps
    blocks = small_corpus.blocks[:2]
    with progress_bar("nightly 2 blocks", plan.calls(2)) as tick:
        run_lanes(blocks, Wrapped(backend, before), plan, lambda lane, out: None, hooks=LaneHooks(progress=tick))
    assert released == [True], f"no progress line during the blocked warm-up call; stderr:\n{stderr.getvalue()}"
    assert "nightly 2 blocks: 9 calls, done (100 %)" in stderr.getvalue()


def test_estimate_left_does_not_count_the_warm_up(backend, small_corpus):
    """On a fake clock, warm-up calls take 100 s and counted calls 1 s: the first estimate of the time left
    (printed with the first counted work) is within 1.5x of the time the rest really took. Counting the warm-up
    as work (the old estimate: elapsed since the start / calls done) puts it tens of times too high."""
    now = [0.0]
    out = io.StringIO()
    plan = RunPlan(shapes=(2, 4))
    total = plan.calls(8)
    lines = PlainLines("nightly", total, clock=lambda: now[0], out=out)
    seen: list[tuple[float, int, str]] = []

    def before():
        now[0] += 100.0 if lines.label is not None else 1.0

    def tick(n: int) -> None:
        lines(n)
        seen.append((now[0], lines.done, lines.line()))

    tick.phase = lines.phase  # type: ignore[attr-defined]
    run_lanes(
        small_corpus.blocks[:8], Wrapped(backend, before), plan, lambda lane, o: None, hooks=LaneHooks(progress=tick)
    )
    end = now[0]
    first_at, done, first = seen[0]
    estimate = float(re.search(r"about (\d+) s left", first).group(1))
    really = end - first_at
    assert really / 1.5 <= estimate <= really * 1.5, (
        f"first estimate {estimate:.0f} s left, the rest took {really:.0f} s (allowed 1.5x either way); line: {first}"
    )
    warm_up = 3 * 100.0 * 3  # 3 lanes x 3 OPs, 100 s each (a warm-up voiceprint call without rows is not sent)
    assert first_at >= warm_up - 300, first  # the warm-up happened and took fake minutes
    old = first_at / done * (total - done)  # the old estimate: elapsed since the start, the warm-up included
    assert old > 3 * really, old  # ... which this test's bound refuses


def test_warm_up_phase_line_names_the_step_and_gives_no_estimate():
    now = [0.0]
    lines = PlainLines("nightly 64 blocks", 120, clock=lambda: now[0])
    lines.phase("warm-up: OP 0 k=4 (3 of 12)")
    now[0] = 370.0
    assert lines.line() == "nightly 64 blocks: 0/120 calls (0 %), warm-up: OP 0 k=4 (3 of 12), 370 s elapsed"
    lines.phase(None)
    now[0] = 380.0
    lines(12)
    assert lines.line() == "nightly 64 blocks: 12/120 calls (10 %), 380 s elapsed, about 90 s left"
    assert lines.line(final=True) == "nightly 64 blocks: 12 calls, done (10 %), 380 s elapsed"


def test_nightly_says_where_its_output_goes_as_it_starts(
    tmp_path, recorded_golden, backend, small_config, capsys, monkeypatch
):
    """The first stderr line of a nightly (before any progress) names the output folder, the report and the ledger:
    the demo used to say where its output was only at the end."""
    import shutil

    from harness.pipeline.nightly import nightly
    from harness.pipeline.nightly_job import NightlyJob

    monkeypatch.setenv("HARNESS_PROGRESS_SECONDS", "3600")
    golden = tmp_path / "goldens" / recorded_golden.path.name
    shutil.copytree(recorded_golden.path, golden)
    out = tmp_path / "out"
    nightly(
        NightlyJob(small_config.with_overrides(candidates=(2,)), golden, out, localise=False, progress=True), backend
    )
    first = capsys.readouterr().err.splitlines()[0]
    assert first == (
        f"writing to {out}/ (report at {out}/report/report.html; ledger {tmp_path}/goldens/ledger.json, "
        f"manifest {tmp_path}/goldens/promoted-shapes.json when done)"
    )


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf"])
def test_a_progress_interval_that_is_not_seconds_is_one_line(value, monkeypatch):
    """0 would make the ticker print without pause; text used to be an internal error (a ValueError)."""
    monkeypatch.setenv("HARNESS_PROGRESS_SECONDS", value)
    stderr = Recorder("x")
    monkeypatch.setattr("sys.stderr", stderr)
    with pytest.raises(
        HarnessError,
        match=rf"HARNESS_PROGRESS_SECONDS='{value}': expected seconds between progress "
        r"lines, a number > 0",
    ):
        with progress_bar("x", 10, announce="writing to x/"):
            pass
    assert stderr.getvalue() == ""  # refused before the start line: the refusal is the only line
