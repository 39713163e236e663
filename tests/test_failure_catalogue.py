"""The failure catalogue: one case per bad input or fault, every file kind and command.

Every case runs one ``harness`` command against a workspace holding one small golden, one run, one
score, one ledger with its promoted-shapes manifest, one localisation file, one corpus and one WAV
(built once per module), with exactly one thing broken. Each case asserts the promise of the README:

- the exit status: 2 when the harness could not do what was asked, 3 for an internal error
  (a ``bug:`` fault), never 1 (1 is a verdict);
- stderr is exactly one line, ``harness: error: <where>: <what>`` (or ``harness: internal
  error ...``), holding the fragment the case names (the file, key or value at fault);
- no traceback;
- nothing left or changed: every file and folder of the workspace hashed before and after
  (temporary ``.X.tmp-*`` names included; ``.X.lock`` files of the ledger are persistent
  companions, not results, and are left out).

Cases run in-process (``harness.cli.main``) where they can; in a subprocess where they need a
signal (SIGINT/SIGTERM to a command slowed by ``lanes.controls:slow``), no permission on a folder (an
unwritable folder of another uid: as root, root without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH;
``tests/catalogue_run.py``) or a separate interpreter. The cases are in ``tests/catalogue_files.py``,
``tests/catalogue_commands.py`` and ``tests/catalogue_locations.py`` (where a command may write, counts out
of bounds, files of another ledger); ``CATALOGUE_LOG=<file>``
appends every case's exit status and stderr to a file, to review the messages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tests.catalogue_commands  # noqa: F401  (registers its cases)
import tests.catalogue_files  # noqa: F401  (registers its cases)
import tests.catalogue_truth  # noqa: F401  (registers its cases)
from tests.catalogue_locations import READERS, WRITERS
from tests.catalogue_run import Base, build_base, cli_status, harness_env, run_case, snapshot
from tests.catalogue_setups import CASES, CFG, CONFIG, QUIET, Case


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    return build_base(tmp_path_factory.mktemp("catalogue-base"))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_failure(case: Case, base: Base, tmp_path, monkeypatch, capsys):
    run_case(case, base, tmp_path, monkeypatch, capsys)


def test_the_catalogue_covers_every_kind_and_command():
    """At least 80 cases; every file kind, every command, every fault."""
    kinds = {c.kind for c in CASES}
    assert (
        len(CASES) >= 80
        and {
            "golden manifest",
            "run manifest",
            "score",
            "ledger",
            "promoted-shapes manifest",
            "localisation",
            "config",
            "corpus metadata",
            "corpus rows",
            "wav",
            "parquet outputs",
            "usage",
            "output",
            "unwritable",
            "disk full",
            "internal",
            "signal",
            "memory",
            "packer",
            "wait",
        }
        <= kinds
    )
    commands = {" ".join(a for a in c.argv[:2] if not a.startswith("-")) for c in CASES}
    firsts = {w.split()[0] for w in commands}
    for name in (
        "corpus",
        "golden",
        "run",
        "score",
        "promote",
        "report",
        "nightly",
        "merge",
        "shapes",
        "ledger",
        "laws",
        "serve",
        "demo",
    ):
        assert name in firsts, name
    for sub in (
        "corpus synth",
        "corpus wav",
        "corpus capture",
        "corpus show",
        "golden record",
        "golden verify",
        "golden show",
    ):
        assert sub in commands, sub
    assert {"SIGINT", "SIGTERM", "nobody"} <= {c.how for c in CASES}
    assert any(c.status == 3 for c in CASES)
    assert all(c.status in (2, 3) for c in CASES)  # 1 is a verdict, never a failure to do what was asked
    assert len({c.id for c in CASES}) == len(CASES)


def test_every_command_that_writes_refuses_an_output_location_inside_a_golden_a_run_or_an_input():
    """Every command of the command line is a reader or a writer; each writer has its output-location case (the
    list is checked against the command tree, so a new command must say which it is)."""
    from harness.cli.command_tree import app_command

    def names(group, prefix=()):
        for name, sub in getattr(group, "commands", {}).items():
            if getattr(sub, "commands", None):
                yield from names(sub, (*prefix, name))
            else:
                yield " ".join((*prefix, name))

    assert set(names(app_command())) == set(WRITERS) | READERS
    ids = {c.name for c in CASES if c.kind == "output location"}
    for command, name in WRITERS.items():
        assert name in ids, command
        (argv,) = [c.argv for c in CASES if c.name == name]
        assert " ".join(argv[: len(command.split())]) == command, (command, argv)


def test_kinds_summary():
    """The catalogue's size by kind (printed with -s; for the record)."""
    sizes: dict[str, int] = {}
    for c in CASES:
        sizes[c.kind] = sizes.get(c.kind, 0) + 1
    print(json.dumps(sizes, indent=1), "total", len(CASES))
    assert sum(sizes.values()) == len(CASES)


# ------------------------------------------------------------------------------------------ afterwards


def _workspace(base: Base, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(base.root, ws)
    return ws


def _harness(ws: Path, *args: str, umask: int | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=ws,
        env=harness_env(env),
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def _modes(root: Path) -> set[tuple[str, int]]:
    return {("dir" if p.is_dir() else "file", p.stat().st_mode & 0o777) for p in [root, *root.rglob("*")]}


def test_modes_follow_the_umask(base: Base, tmp_path):
    """Goldens, runs and corpora are as readable as the umask says (a CI user reads another's goldens)."""
    mask = os.umask(0)
    os.umask(mask)
    for folder in ("goldens/r", base.run):
        assert _modes(base.root / folder) == {("dir", 0o777 & ~mask), ("file", 0o666 & ~mask)}, folder
    ws = _workspace(base, tmp_path)
    done = _harness(ws, "golden", "record", "--corpus", "c.parquet", "--release", "g", *CFG, *QUIET, umask=0o002)
    assert done.returncode == 0, done.stderr
    assert _modes(ws / "goldens" / "g") == {("dir", 0o775), ("file", 0o664)}
    done = _harness(ws, "corpus", "synth", "x.parquet", "--blocks", "1", *CFG, umask=0o077)
    assert done.returncode == 0, done.stderr
    assert (ws / "x.parquet").stat().st_mode & 0o777 == 0o600


def test_a_killed_write_leaves_only_a_temporary_name_that_every_reader_ignores(base: Base, tmp_path, monkeypatch):
    """SIGKILL runs no clean-up: what it leaves is a ``.X.tmp-*`` name, never a result, and the next
    command neither reads it nor trips over it."""
    ws = _workspace(base, tmp_path)
    killed = _harness(
        ws,
        "golden",
        "record",
        "--corpus",
        "c.parquet",
        "--release",
        "n",
        *CFG,
        *QUIET,
        HARNESS_FAULT="kill:parquet:op1.parquet",
    )
    assert killed.returncode == -9
    killed = _harness(
        ws,
        "score",
        "--golden",
        "goldens/r",
        "--run",
        base.run,
        "--out",
        "score.json",
        *CFG,
        HARNESS_FAULT="kill:rename:score.json",
    )
    assert killed.returncode == -9
    left = sorted(p.name for p in [*ws.glob(".*.tmp-*"), *(ws / "goldens").glob(".*.tmp-*")])
    assert len(left) == 2 and left[0].startswith(".n.tmp-") and left[1].startswith(".score.json.tmp-"), left
    assert not (ws / "goldens" / "n").exists()
    before = snapshot(ws)
    monkeypatch.chdir(ws)
    assert cli_status("golden", "show", "goldens/r") == 0
    assert cli_status("report", "--score", "score.json", "--out", "rep") == 0  # the complete score, not the killed one
    assert cli_status("golden", "record", "--corpus", "c.parquet", "--release", "n", *CFG, *QUIET) == 0  # not "exists"
    shard = ws / "shard1" / "runs"
    shard.mkdir(parents=True)
    shutil.copytree(ws / base.run, shard / Path(base.run).name)
    shutil.copytree(ws / base.run, shard / f".{Path(base.run).name}.tmp-1-abcd")  # a shard run killed at its rename
    assert cli_status("merge", "shard1", "--golden", "goldens/r", "--out", "merged", "--no-localise", *CFG) == 0
    after = snapshot(ws)
    assert all(k in after and after[k] == v for k, v in before.items() if ".tmp-" in k)  # left alone, never read


def test_promote_says_first_that_the_golden_did_not_reproduce(base: Base, tmp_path, monkeypatch, capsys):
    """A run whose exact lane does not reproduce the golden (oneDNN off: NNPACK convolutions) may pass its
    shapes against the golden, yet nothing may be promoted: promote says why, first."""
    ws = _workspace(base, tmp_path)
    (ws / "loose.toml").write_text(CONFIG.replace("[tolerances.op0]\n", "[tolerances.op0]\nmax_abs = 0.01\n"))
    monkeypatch.chdir(ws)
    loose = ("--config", "loose.toml")
    assert (
        cli_status("run", "--golden", "goldens/r", "--runs", "runs2", "--set", "numerics.mkldnn=false", *loose, *QUIET)
        == 0
    )
    (run,) = (ws / "runs2").iterdir()
    assert cli_status("score", "--golden", "goldens/r", "--run", f"runs2/{run.name}", "--out", "s.json", *loose) == 1
    capsys.readouterr()
    # exit 1: the commit's one event failed (nothing promoted), as its last line says
    assert cli_status("promote", "--score", "s.json", "--ledger", "l.json", "--manifest", "m.json", *loose) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith("FAIL: 1 of 1 shapes not promoted by the ledger l.json") and "did not" in lines[-1]
    assert lines[0].startswith("GOLDEN NOT REPRODUCED: golden r@"), lines
    assert lines[1].startswith("shape k=2: PASS"), lines
    stays = next(line for line in lines if line.startswith("shape k=2: stays candidate"))  # after any warning
    assert "did not reproduce golden r@" in stays, lines
