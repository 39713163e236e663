"""Run a Markdown page's ```bash blocks as written: the runner shared by test_readme.py and test_docs_blocks.py.

A documented command that fails is a bug a reader finds first, so the pages' blocks are run, line by
line, in a fresh folder with this checkout's ``harness``. What a block may do is said in the block
itself, where a reader sees it too:

- a first line ``# <reason>: not run by the docs test`` marks a block that cannot run here (a GPU, a
  real remote server, a Ray cluster, placeholders to fill in): it is listed, never run;
- a line ``# runs once: <why>`` marks a block that cannot be rerun as it stands: it is run once (every
  other block runs twice in the same folder, since rerunning a documented block is a documented use);
- a trailing comment naming an exit status (``# exit 1: ...``, ``# exits 1``, ``# exit 0: all
  promoted, 1: a shape failed``) says which statuses a line may end with; without one, only 0.

A line ending in ``\\`` continues on the next line, as in a shell.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOT_RUN = re.compile(r"^#\s*(?P<reason>.*?)\s*:\s*not run by the docs test\.?\s*$")
RUNS_ONCE = re.compile(r"^#\s*runs once\s*:\s*(?P<reason>.*?)\s*$")
FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.MULTILINE | re.DOTALL
)
EXIT = re.compile(r"\bexits? ([0-3])\b")
MORE_EXITS = re.compile(r"(?<![\w.])([0-3]): ")
# what an untagged fence must not hold: a command a reader would copy (`harness ...`, `pip ...`)
COMMAND = re.compile(r"^\s*(\$ )?(harness|pip|python|tox|ray|benchmarks/)\s")
# files of a checkout the pages' blocks use by relative path (examples/..., harness.toml.example)
CHECKOUT_FILES = ("examples", "harness.toml.example")


@dataclass(frozen=True)
class Line:
    """One command line of a block (continuations joined) and the exit statuses it may end with."""

    text: str
    allowed: tuple[int, ...]


@dataclass(frozen=True)
class Block:
    page: str
    lineno: int  # of the opening fence, 1-based
    lang: str
    body: str
    lines: tuple[Line, ...] = field(default=())
    not_run: str | None = None  # the reason, when marked
    runs_once: str | None = None

    @property
    def first_line(self) -> str:
        return self.body.splitlines()[0] if self.body.strip() else ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.lineno}"


def trailing_comment(line: str) -> str:
    """The comment a shell would ignore at the end of ``line`` ('' if none): the first unquoted ``#``
    that starts a word."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[i + 1 :]
    return ""


def allowed_exits(line: str) -> tuple[int, ...]:
    """The exit statuses a line's comment allows: ``exit 1`` -> (1,); ``exit 0: x, 1: y`` -> (0, 1)."""
    comment = trailing_comment(line)
    found = EXIT.search(comment)
    if found is None:
        return (0,)
    codes = {int(found.group(1))} | {int(m) for m in MORE_EXITS.findall(comment[found.end() :])}
    return tuple(sorted(codes))


def command_lines(body: str) -> tuple[Line, ...]:
    lines, pending = [], ""
    for raw in body.splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.rstrip().endswith("\\") and not trailing_comment(raw):
            pending += raw.rstrip()[:-1] + " "
            continue
        text = pending + raw.strip()
        pending = ""
        lines.append(Line(text, allowed_exits(text)))
    if pending:
        lines.append(Line(pending.strip(), allowed_exits(pending)))
    return tuple(lines)


def parse_blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of a Markdown page (indented ones, in list items, dedented)."""
    blocks = []
    for match in FENCE.finditer(text):
        body = textwrap.dedent(match.group("body"))
        lineno = text.count("\n", 0, match.start()) + 1
        lang = match.group("lang")
        not_run = runs_once = None
        comments = [raw.strip() for raw in body.splitlines() if raw.strip().startswith("#")]
        first = body.lstrip().splitlines()[0].strip() if body.strip() else ""
        if (m := NOT_RUN.match(first)) is not None:
            not_run = m.group("reason")
        for comment in comments:
            if (m := RUNS_ONCE.match(comment)) is not None:
                runs_once = m.group("reason")
        blocks.append(
            Block(page, lineno, lang, body, command_lines(body) if lang == "bash" else (), not_run, runs_once)
        )
    return blocks


def page_blocks(path: Path) -> list[Block]:
    return parse_blocks(path.read_text(), path.relative_to(ROOT).as_posix())


def harness_env(**extra: str) -> dict[str, str]:
    """This checkout's ``harness`` (the venv running the tests) first on PATH, and the checkout on
    PYTHONPATH (``--model lanes.controls:leaky`` imports from it)."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **extra}


def fresh_folder(folder: Path) -> Path:
    """``folder`` with copies of the checkout files the blocks use by relative path."""
    for name in CHECKOUT_FILES:
        source = ROOT / name
        if source.is_dir():
            # (a Cargo example's build folder, where one was built in place, is no file a block uses)
            shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__", "target"))
        else:
            shutil.copy2(source, folder / name)
    return folder


def tail(text: str, lines: int = 25) -> str:
    kept = text.rstrip().splitlines()
    return "\n".join((["..."] if len(kept) > lines else []) + kept[-lines:])


def run_lines(
    lines: tuple[Line, ...] | list[Line],
    cwd: Path,
    env: dict[str, str],
    *,
    title: str,
    transcript: list[str] | None = None,
    timeout: float = 1800,
) -> list[str]:
    """Run each line with ``bash -c`` in ``cwd``; fail at the first line ending in a status it does not
    allow (or printing a traceback), naming ``title``, the line, and its stderr."""
    __tracebackhide__ = True  # the failure message says it all; pytest's frames would bury it
    transcript = [] if transcript is None else transcript
    for number, line in enumerate(lines, 1):
        done = subprocess.run(
            ["bash", "-c", line.text], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
        transcript.append(f"$ {line.text}\n{done.stdout}{done.stderr}[exit {done.returncode}]")
        traceback = "Traceback (most recent call last)" in done.stderr
        if done.returncode not in line.allowed or traceback:
            what = (
                "printed a traceback"
                if done.returncode in line.allowed
                else f"exit status: observed {done.returncode}, allowed {' or '.join(map(str, line.allowed))}"
            )
            raise AssertionError(
                f"{title}: command line {number} of {len(lines)} failed ({what})\n"
                f"  line: {line.text}\n  in: {cwd}\n"
                f"  stderr:\n{textwrap.indent(tail(done.stderr) or '(empty)', '    ')}\n"
                f"  stdout:\n{textwrap.indent(tail(done.stdout, 10) or '(empty)', '    ')}\n"
                "Run the line in a fresh folder to reproduce it; fix the page (or the command), or mark the "
                "block '# <reason>: not run by the docs test' if it cannot run here."
            )
    return transcript


def run_block(block: Block, cwd: Path, env: dict[str, str], *, timeout: float = 1800) -> list[str]:
    """Run a block's lines in ``cwd``: twice (a rerun in the same folder must work too) unless the
    block says it runs once, and why, or its first run left the folder exactly as it found it (no file
    or folder made, changed or removed: the rerun would repeat the first run)."""
    __tracebackhide__ = True
    repeats = 1 if block.runs_once else 2
    transcript: list[str] = []
    before = folder_state(cwd)
    for run in range(1, repeats + 1):
        title = (
            f"{block.where}: the ```bash block starting {block.first_line!r}, "
            f"run {run} of {repeats}{' (the rerun, in the same folder)' if run == 2 else ''}"
        )
        run_lines(block.lines, cwd, env, title=title, transcript=transcript, timeout=timeout)
        if run == 1 and repeats == 2 and folder_state(cwd) == before:
            # the rerun would be run 1 again, in the folder run 1 found (`harness laws`: CI time, a minute)
            transcript.append(f"{block.where}: run 1 left the folder as it found it: no rerun")
            break
    return transcript


def folder_state(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``folder``: (size, mtime in ns) by relative path."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}
