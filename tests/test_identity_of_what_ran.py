"""A packer's identity is of what ran: hashed before its process starts, run from the file hashed, held to it.

Each case runs a real packer process (tests/protocol_packer.py) through the command line. The adversaries: a
packer that rewrites its own file argument as its hello comes (in every session, or only in the packing laws'
session of a nightly: two sessions, two contents), and a program that is a symlink the packer re-points as it
starts. Before, both ran one content and recorded another under one identity, exit 0. Now the first is refused
in one line naming the file, nothing kept; the second records the program that ran. The controls: the same
commands without the rewrite pass, with the identity of the files as they are.

Also here, the lines a packer's failure prints: a packer that closed its stdin is said to have closed its stdin,
a file argument that cannot be read never suggests ``--packer-digest`` (which stands in for the program only),
and a 200 KB argument keeps the error line on a screen.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from harness.base.errors import SCREEN
from harness.laws import LAW_GEOMETRY
from tests.catalogue_setups import CFG, CONFIG, QUIET
from tests.workspace_cli import PY, ROOT, harness, make_workspace, one_error_line

SCRIPT = ROOT / "tests" / "protocol_packer.py"


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    """A workspace with the catalogue's configuration and a 4-block golden of the small model."""
    return make_workspace(tmp_path_factory.mktemp("what-ran"))


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def laws(ws: Path, cmd: str) -> subprocess.CompletedProcess:
    return harness(ws, "laws", "--packer-cmd", cmd, "--examples", "2")


# ------------------------------------------------------------------ a packer that rewrites its own file


def test_a_packer_that_rewrites_its_file_argument_before_its_hello_is_refused_naming_the_file(ws, tmp_path):
    own = tmp_path / "packer.conf"
    own.write_text("level = 1\n")
    line = one_error_line(laws(ws, f"{PY} {SCRIPT} --mode plain --touch {own}"))
    assert f"its file argument '{own}' changed" in line and "while the packer ran" in line, line
    assert "touched by" in own.read_text()  # the rewrite happened: the packer did run


def test_negative_control_the_same_packer_leaving_its_file_alone_holds_the_laws(ws, tmp_path):
    own = tmp_path / "packer.conf"
    own.write_text("level = 1\n")
    done = laws(ws, f"{PY} {SCRIPT} --mode plain --variant {own}")  # the file is an argument, left as it is
    assert done.returncode == 0 and "all 8 laws hold" in done.stdout, done.stdout + done.stderr


def test_a_file_rewritten_between_the_fast_lanes_session_and_the_laws_session_keeps_nothing(ws, tmp_path):
    """The issue's example: the packing laws' session (its own process, at the laws' geometry) sees another
    content than the fast lane's. Before: the ledger recorded a failed event and the nightly printed PASS,
    exit 0. Now the nightly stops before any run is kept, naming the file; the ledger is as it was."""
    own = tmp_path / "packer.conf"
    own.write_text("level = 1\n")
    cmd = f"{PY} {SCRIPT} --mode plain --touch {own} --touch-window {LAW_GEOMETRY.window_samples}"
    before = snapshot(ws / "goldens")
    done = harness(ws, "nightly", "--golden", "goldens/r", "--out", str(tmp_path / "n"), *CFG, *QUIET,
                   "--set", f"packer.cmd={cmd}", "--set", "packer.laws_examples=2", "--arrangements", "1")  # fmt: skip
    line = one_error_line(done)
    assert f"its file argument '{own}' changed" in line, line
    assert snapshot(ws / "goldens") == before and not (tmp_path / "n" / "runs").exists()


# ------------------------------------------------------------------ a program re-pointed as it starts


def _wrapper(path: Path, note: str) -> Path:
    path.write_text(f'#!/bin/sh\n# {note}\nexec {PY} {SCRIPT} "$@"\n')
    path.chmod(0o755)
    return path


def _program_part(run: Path) -> dict:
    manifest = json.loads((run / "manifest.json").read_text())
    (part,) = [p for p in manifest["packer"]["digest_parts"] if p["kind"] == "program"]
    return {"part": part, "identity": manifest["packer"]["identity"], "laws": manifest["laws"]}


@pytest.mark.parametrize("repoint", [True, False], ids=["re-pointed", "control"])
def test_a_symlinked_program_re_pointed_as_it_starts_is_recorded_as_the_program_that_ran(ws, tmp_path, repoint):
    """The command names ``engine-packer``, a link to build A; A re-points it to build B as it starts. Before,
    the program was hashed after the start: B's content was recorded for what A did. Now it is hashed first and
    the process runs that very file: the run records A, and the laws' session (another process of the same
    command) runs A too, so the laws verdict is of the packer that packed (identities equal)."""
    a, b = _wrapper(tmp_path / "build-a", "build A"), _wrapper(tmp_path / "build-b", "build B")
    link = tmp_path / "engine-packer"
    link.symlink_to(a)
    env = f"REPOINT={link}={b} " if repoint else ""
    runs = tmp_path / "runs"
    done = harness(ws, "run", "--golden", "goldens/r", "--runs", str(runs), *CFG, *QUIET, "--arrangements", "1",
                   "--set", f"packer.cmd={env}{link} --mode plain", "--set", "packer.laws_examples=2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.readlink(link) == str(b if repoint else a)  # the adversary did re-point it (or, the control, not)
    (run,) = runs.iterdir()
    found = _program_part(run)
    assert found["part"] == {"kind": "program", "path": str(a), "sha256": hashlib.sha256(a.read_bytes()).hexdigest()}
    assert found["laws"]["packer_identity"] == found["identity"] and found["laws"]["verdict"] == "hold", found


# ------------------------------------------------------------------ the lines of a packer's failure


def test_a_packer_that_closed_its_stdin_is_said_to_have_closed_its_stdin(ws):
    line = one_error_line(laws(ws, f"{PY} {SCRIPT} --mode close-stdin"))
    assert "closed its stdin before reading" in line and "stdout" not in line.split("closed its")[1][:10], line


def test_negative_control_a_packer_that_exited_is_said_to_have_exited(ws):
    line = one_error_line(laws(ws, f"{PY} {SCRIPT} --mode crash-after"))
    assert "exited with status 7" in line and "closed its" not in line, line


def test_a_file_argument_that_cannot_be_read_names_the_file_and_never_suggests_packer_digest(ws):
    unreadable = "/proc/self/mem"  # a file that no one reads whole (EIO), root included
    line = one_error_line(laws(ws, f"{PY} {SCRIPT} --mode plain --variant {unreadable}"))
    assert "cannot read its file argument" in line and "/mem" in line, line
    assert "--packer-digest" in line and "stands in for the program only" in line, line  # said why it cannot help
    assert "give its digest with --packer-digest" not in line and "; give --packer-digest" not in line


def test_negative_control_a_program_that_cannot_be_found_is_named_as_such(ws):
    line = one_error_line(laws(ws, "/nonexistent/engine-packer --wire"))
    assert "cannot start '/nonexistent/engine-packer': No such file or directory" in line, line


def _run_with_packer(ws: Path, tmp_path: Path, variant: str) -> subprocess.CompletedProcess:
    """``harness run`` with a packer command from the configuration file (200 KB cannot be one argv word)."""
    config = tmp_path / "big.toml"
    cmd = f"{PY} {SCRIPT} --mode nameless --variant {shlex.quote(variant)}"
    config.write_text(CONFIG + f"[packer]\ncmd = {json.dumps(cmd)}\n")
    return harness(ws, "run", "--golden", "goldens/r", "--runs", str(tmp_path / "runs"), "--config", str(config))


@pytest.mark.parametrize("size", [100_000, 200_000])
def test_a_packer_argument_of_hundreds_of_kb_keeps_the_error_line_on_a_screen(ws, tmp_path, size):
    """100 KB starts (and names itself without a version); 200 KB is past what exec takes for one word."""
    line = one_error_line(_run_with_packer(ws, tmp_path, "x" * size))
    assert len(line) <= SCREEN + 40 and " characters]" in line, line[:300]
    assert ("packer_version" if size < 131072 else "Argument list too long") in line, line[-300:]  # still says what


def test_negative_control_a_short_packer_command_is_quoted_whole(ws, tmp_path):
    line = one_error_line(_run_with_packer(ws, tmp_path, "short"))
    assert "--variant short'" in line and " characters]" not in line, line
