"""A set of outputs is one unit (a reader sees the old set or the new one), an interrupted command says what it
committed, and a signal is never lost.

The first is tested by killing (SIGKILL: no clean-up runs) or interrupting each command at every step of its writing
(``HARNESS_FAULT``, harness.base.fsio.fault) over a previous set, then reading every member: all must be the old set's
or all the new one's. The previous set is made of marker files ("OLD <member>") so that every member of the old set
is told from the new one, whatever the two runs' contents.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import OutputError, command_record, committed, interrupted_message, request_interrupt
from harness.base.errors import clear_interrupt as _clear
from harness.base.outputset import output_set, pin
from harness.pipeline.score import score_run, write_score
from tests.pipeline import run_shapes

POINTS = ("staged", "generation", "linked", "switched")
NIGHTLY = ("score.json", "localisation.json", "report", "junit.xml", "summary.txt")
NIGHTLY_SEEN = (
    "score.json",
    "report/report.json",
    "report/report.md",
    "report/report.html",
    "junit.xml",
    "summary.txt",
)
AUDIT = ("audit.json", "junit.xml", "report.html", "report.md")
PAGES = ("report.json", "report.md", "report.html")


def harness(*args: str, fault: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_FAULT", "HARNESS_DEBUG")}
    if fault:
        env["HARNESS_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env, timeout=600, cwd=cwd
    )


def old_set(folder: Path, name: str, members: tuple[str, ...], seen: tuple[str, ...]) -> None:
    """A previous set of markers, published as a set is."""
    with output_set(folder, name, members) as stage:
        for rel in seen:
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_text(f"OLD {rel}\n")


def view(folder: Path, seen: tuple[str, ...]) -> dict[str, str | None]:
    """What a reader sees at each member's usual name (None: nothing)."""
    return {rel: (folder / rel).read_text() if (folder / rel).is_file() else None for rel in seen}


def generation(seen: dict[str, str | None]) -> str:
    """'old' or 'new' when every member is of one set; fails naming the members of each set otherwise."""
    old = sorted(rel for rel, text in seen.items() if text == f"OLD {rel}\n")
    new = sorted(rel for rel, text in seen.items() if text is not None and text != f"OLD {rel}\n")
    missing = sorted(rel for rel, text in seen.items() if text is None)
    assert not missing and (not old or not new), (
        f"a mixed set: {len(old)} of {len(seen)} members old {old}, {len(new)} new {new}, {len(missing)} missing "
        f"{missing} (a reader must see the old set or the new one)"
    )
    return "old" if old else "new"


def no_temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name)


# ------------------------------------------------------------------------------------------ the mechanism


def test_a_set_replaces_the_previous_one_whole_and_a_member_it_lacks_disappears(tmp_path):
    out = tmp_path / "out"
    old_set(out, "s", ("a.txt", "sub", "b.txt"), ("a.txt", "sub/x", "b.txt"))
    with output_set(out, "s", ("a.txt", "sub", "b.txt")) as stage:
        (stage / "a.txt").write_text("new a")
        (stage / "sub").mkdir()
        (stage / "sub" / "x").write_text("new x")
    assert view(out, ("a.txt", "sub/x", "b.txt")) == {"a.txt": "new a", "sub/x": "new x", "b.txt": None}
    assert not (out / "b.txt").is_symlink()  # the name went with the member
    assert len(list(out.glob(".s.gen-*"))) == 2  # the current one and the previous one (for pinned readers)


def test_members_written_at_their_name_by_something_else_are_adopted_then_replaced_whole(tmp_path):
    """An old layout (plain files, a real report folder): the first publish still goes old set -> new set."""
    out = tmp_path / "out"
    (out / "report").mkdir(parents=True)
    (out / "report" / "report.md").write_text("plain md")
    (out / "score.json").write_text("plain score")
    with output_set(out, "n", ("score.json", "report")) as stage:
        (stage / "report").mkdir()
        (stage / "report" / "report.md").write_text("new md")
        (stage / "score.json").write_text("new score")
    assert view(out, ("score.json", "report/report.md")) == {"score.json": "new score", "report/report.md": "new md"}
    assert (out / "report").is_symlink() and no_temporaries(out) == []


def test_a_failure_or_a_signal_before_the_switch_publishes_nothing_and_leaves_no_temporary(tmp_path):
    out = tmp_path / "out"
    old_set(out, "s", ("a.txt",), ("a.txt",))
    with pytest.raises(OutputError, match="No space"), output_set(out, "s", ("a.txt",)) as stage:
        (stage / "a.txt").write_text("new")
        raise OutputError(f"{stage / 'a.txt'}: cannot write (No space left on device)")
    request_interrupt("SIGTERM")
    try:
        with pytest.raises(KeyboardInterrupt), output_set(out, "s", ("a.txt",)) as stage:
            (stage / "a.txt").write_text("new")
    finally:
        _clear()
    assert generation(view(out, ("a.txt",))) == "old" and no_temporaries(out) == []
    assert len(list(out.glob(".s.gen-*"))) == 1
    fresh = tmp_path / "fresh" / "deeper"
    with pytest.raises(ValueError), output_set(fresh, "s", ("a.txt",)):
        raise ValueError
    assert not (tmp_path / "fresh").exists()  # the folders it made for the set went too


def test_an_os_error_of_the_callers_block_is_its_own_not_a_publish_failure(tmp_path):
    """What the block itself raises (a bug, a file it failed to read) is not re-labelled 'cannot publish'."""
    out = tmp_path / "out"
    old_set(out, "s", ("a.txt",), ("a.txt",))
    with pytest.raises(FileNotFoundError, match="the block's own"), output_set(out, "s", ("a.txt",)):
        raise FileNotFoundError("the block's own missing input")
    assert generation(view(out, ("a.txt",))) == "old" and no_temporaries(out) == []
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(OutputError, match="cannot publish the s outputs"), output_set(blocked / "out", "s", ("a.txt",)):
        pass  # the publish's own failure (its folder cannot be made) is named as one


def test_a_stage_left_by_a_killed_publisher_is_removed_by_the_next_publish(tmp_path):
    out = tmp_path / "out"
    old_set(out, "s", ("a.txt",), ("a.txt",))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = out / f".s.tmp-{int(dead.stdout)}-0badc0de"
    left.mkdir()
    (left / "a.txt").write_text("half")
    live = out / f".s.tmp-{os.getppid()}-0123abcd"  # a publisher still staging: never touched
    live.mkdir()
    with output_set(out, "s", ("a.txt",)) as stage:
        (stage / "a.txt").write_text("new")
    assert not left.exists() and live.exists() and generation(view(out, ("a.txt",))) == "new"


def test_pin_reads_every_member_through_one_generation(tmp_path):
    out = tmp_path / "out"
    old_set(out, "s", ("a.txt", "sub"), ("a.txt", "sub/x"))
    first = pin([out / "a.txt", out / "sub" / "x", tmp_path / "elsewhere"])
    with output_set(out, "s", ("a.txt", "sub")) as stage:  # published between the pin and the reads
        (stage / "a.txt").write_text("new a")
    assert [p.read_text() for p in first[:2]] == ["OLD a.txt\n", "OLD sub/x\n"]
    assert first[2] == tmp_path / "elsewhere"


SCRIPT = """
import sys
from pathlib import Path
from harness.base.fsio import atomic_write
from harness.base.outputset import output_set
with output_set(Path(sys.argv[1]), "s", ("a.txt", "sub", "b.txt")) as stage:
    atomic_write(stage / "a.txt", "new a")
    atomic_write(stage / "sub" / "x", "new x")
    atomic_write(stage / "b.txt", "new b")
"""


@pytest.mark.parametrize("point", ["rename:a.txt", "rename:x", "rename:b.txt", *(f"set:s:{p}" for p in POINTS)])
def test_a_kill_at_every_step_of_a_publish_leaves_the_old_set_or_the_new_one(tmp_path, point):
    out = tmp_path / "out"
    seen = ("a.txt", "sub/x", "b.txt")
    old_set(out, "s", ("a.txt", "sub", "b.txt"), seen)
    env = {**os.environ, "HARNESS_FAULT": f"kill:{point}"}
    killed = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert generation(view(out, seen)) == ("new" if point == "set:s:switched" else "old")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr  # what the kill left is no obstacle, and is cleared
    assert generation(view(out, seen)) == "new" and len(list(out.glob(".s.gen-*"))) <= 2


def test_the_interrupted_line_names_what_was_committed_and_what_the_next_command_finishes():
    assert interrupted_message("SIGTERM") == "interrupted (SIGTERM); nothing partial was written as complete"
    committed("x/ledger.json", "the ledger")  # outside a command: not recorded (a library caller's own business)
    assert "after committing" not in interrupted_message("SIGTERM")
    with command_record():
        committed("n/runs/r1", "the run")
        committed("g/.ledger.json.journal", "the journal", "the next command that opens the ledger finishes it")
        line = interrupted_message("SIGINT")
    assert line == (
        "interrupted (SIGINT) after committing: the run (n/runs/r1); the journal (g/.ledger.json.journal); "
        "the next command that opens the ledger finishes it; nothing else was written, and nothing "
        "partial was written as complete"
    )


# ------------------------------------------------------------------------------------------ the commands


@pytest.fixture(scope="module")
def world(tmp_path_factory, recorded_golden, backend):
    """A golden (12 blocks, small model), a run of shape 2 and its score."""
    root = tmp_path_factory.mktemp("sets")
    run = run_shapes(backend, recorded_golden, root, (2,))
    score = write_score(root / "score.json", score_run(recorded_golden, run, _cfg().tolerances))
    return {"root": root, "golden": recorded_golden.path, "run": run.path, "score": score}


def _cfg():
    from harness.data.schemas.config_file import ModelSection
    from harness.release_config import release_config

    return release_config(model=ModelSection(spec="small"))


def merge_cli(world, out: Path, fault: str | None = None) -> subprocess.CompletedProcess:
    """The nightly's last part (score, promote, report, JUnit, summary: harness.pipeline.nightly.finalize) on the
    world's run, into ``out``, with a ledger of its own (``--force``: ``out`` may hold a previous set)."""
    return harness(
        "merge",
        str(world["run"]),
        "--golden",
        str(world["golden"]),
        "--out",
        str(out),
        "--model",
        "small",
        "--no-localise",
        "--force",
        "--set",
        f"nightly.ledger='{out.parent / 'ledger.json'}'",
        "--set",
        f"nightly.manifest='{out.parent / 'promoted.json'}'",
        fault=fault,
    )


NIGHTLY_KILLS = [
    "rename:score.json",
    "rename:report.json",
    "rename:report.md",
    "rename:junit.xml",
    "rename:summary.txt",
    *(f"set:nightly:{p}" for p in POINTS),
]


@pytest.mark.parametrize("point", NIGHTLY_KILLS)
def test_a_nightly_killed_at_every_step_leaves_its_previous_outputs_or_its_new_ones(world, tmp_path, point):
    out = tmp_path / "n"
    old_set(out, "nightly", NIGHTLY, NIGHTLY_SEEN)
    killed = merge_cli(world, out, f"kill:{point}")
    assert killed.returncode == -9, killed.stderr
    assert generation(view(out, NIGHTLY_SEEN)) == ("new" if point == "set:nightly:switched" else "old")


def test_a_nightly_interrupted_after_the_ledger_commit_says_what_it_committed(world, tmp_path):
    out = tmp_path / "n"
    old_set(out, "nightly", NIGHTLY, NIGHTLY_SEEN)
    stopped = merge_cli(world, out, "term:promote:both-written")
    assert stopped.returncode == 2 and stopped.stdout == "", stopped.stderr
    (line,) = stopped.stderr.strip().splitlines()
    assert line.startswith("harness: error: interrupted (SIGTERM) after committing: the merged run (")
    assert (
        f"the ledger and the promoted-shapes manifest {tmp_path / 'promoted.json'} ({tmp_path / 'ledger.json'})" in line
        and "score, report" not in line
    )
    assert generation(view(out, NIGHTLY_SEEN)) == "old"  # the nightly's own outputs were not written: not claimed
    ledger = json.loads((tmp_path / "ledger.json").read_text())
    assert ledger["seq"] == 1  # the commit the line names is there
    done = merge_cli(world, tmp_path / "n2")
    assert done.returncode in (0, 1), done.stderr


def test_a_promotion_interrupted_after_its_journal_says_the_next_command_finishes_it(world, tmp_path):
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted.json"
    stopped = harness(
        "promote",
        "--score",
        str(world["score"]),
        "--ledger",
        str(ledger),
        "--manifest",
        str(manifest),
        fault="term:promote:journal-written",
    )
    assert stopped.returncode == 2, stopped.stderr
    (line,) = stopped.stderr.strip().splitlines()
    assert f"after committing: the journal of the ledger commit (the new ledger and manifest) ({tmp_path}/." in line
    assert "the next command that opens the ledger finishes the journaled commit" in line
    shown = harness("shapes", "--ledger", str(ledger), "--manifest", str(manifest))  # finishes it, as the line says
    assert shown.returncode == 0 and not (tmp_path / ".ledger.json.journal").exists(), shown.stderr
    assert json.loads(ledger.read_text())["seq"] == 1


def test_a_report_killed_at_every_step_leaves_its_previous_pages_or_its_new_ones(world, tmp_path):
    """Each kill over the previous pages; then the same over an old layout (plain files, adopted)."""
    out = tmp_path / "rep"
    for point in [*(f"rename:{p}" for p in PAGES), *(f"set:report:{p}" for p in POINTS)]:
        old_set(out, "report", PAGES, PAGES)
        killed = harness("report", "--score", str(world["score"]), "--out", str(out), fault=f"kill:{point}")
        assert killed.returncode == -9, (point, killed.stderr)
        assert generation(view(out, PAGES)) == ("new" if point == "set:report:switched" else "old"), point
    plain = tmp_path / "plain"
    plain.mkdir()
    for p in PAGES:
        (plain / p).write_text(f"OLD {p}\n")
    killed = harness("report", "--score", str(world["score"]), "--out", str(plain), fault="kill:set:report:linked")
    assert killed.returncode == -9 and generation(view(plain, PAGES)) == "old", killed.stderr
    done = harness("report", "--score", str(world["score"]), "--out", str(plain))
    assert done.returncode == 0 and generation(view(plain, PAGES)) == "new", done.stderr
    facts = json.loads((plain / "report.json").read_text())
    assert json.dumps(facts).count(json.loads(world["score"].read_text())["run"]["id"]) >= 1


# ------------------------------------------------------------------------------------------ audit


@pytest.fixture(scope="module")
def capture(tmp_path_factory, backend):
    from harness.corpus.synth import synth_corpus
    from harness.pipeline.capture import serve_and_capture

    path = tmp_path_factory.mktemp("capture") / "c.parquet"
    serve_and_capture(path, synth_corpus(backend.geometry, 4).blocks, backend, 2)
    return path


AUDIT_KILLS = [*(f"rename:{p}" for p in AUDIT), *(f"set:audit:{p}" for p in POINTS)]


def audit_cli(capture: Path, out: Path, fault: str | None = None, *extra: str) -> subprocess.CompletedProcess:
    return harness(
        "audit", str(capture), "--golden-model", "small", "--out", str(out), "--no-progress", *extra, fault=fault
    )


@pytest.mark.parametrize(
    "fault", [*(f"kill:{p}" for p in AUDIT_KILLS), "term:rename:junit.xml", "term:set:audit:linked"]
)
def test_an_audit_killed_or_interrupted_at_every_step_leaves_the_previous_audit_or_the_new_one(
    capture, tmp_path, fault
):
    out = tmp_path / "audit"
    old_set(out, "audit", AUDIT, AUDIT)
    stopped = audit_cli(capture, out, fault)
    assert stopped.returncode == (-9 if fault.startswith("kill:") else 2), stopped.stderr
    assert generation(view(out, AUDIT)) == ("new" if fault == "kill:set:audit:switched" else "old")
    if fault.startswith("term:"):
        assert stopped.stderr.strip().splitlines()[-1] == (
            "harness: error: interrupted (SIGTERM); nothing partial was written as complete"
        )


def test_an_audit_over_a_previous_one_interrupted_mid_write_keeps_the_previous_set_whole(capture, backend, tmp_path):
    """The issue's case: an audit's four files in the folder, then another audit (other tolerances: another
    verdict) interrupted by SIGTERM between its files: the previous set stays whole, byte for byte."""
    from harness.pipeline.audit import audit_capture

    out = tmp_path / "audit"
    audit_capture(capture, out, _cfg(), lambda: backend)
    before = view(out, AUDIT)
    assert all(before.values())
    stopped = audit_cli(capture, out, "term:rename:junit.xml", "--tolerance", "bitwise")
    assert stopped.returncode == 2, stopped.stderr
    assert view(out, AUDIT) == before


# ------------------------------------------------------------------------------------------ signals


@pytest.mark.parametrize(
    "fault", ["int:cli:start", "int:cli:imported", "int:cli:returned", "term:cli:start", "term:cli:returned"]
)
def test_a_signal_at_any_moment_of_a_short_command_ends_it_with_status_2(recorded_golden, fault):
    """``golden show`` reaches no check point: a signal recorded before, during or after it (the moments are fault
    points, not wall-clock sleeps) still ends the command with status 2 and one line, never 0."""
    shown = harness("golden", "show", str(recorded_golden.path), fault=fault)
    sig = "SIGINT" if fault.startswith("int:") else "SIGTERM"
    assert shown.returncode == 2, (fault, shown.returncode, shown.stderr)
    assert shown.stderr.strip().splitlines() == [
        f"harness: error: interrupted ({sig}); nothing partial was written as complete"
    ], shown.stderr
