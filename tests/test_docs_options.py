"""Every option a page uses on a `harness` command line is one that command's --help shows.

The pages (README.md, docs/*.md) are what a user copies from: an option that works but is hidden from --help
(or one that no longer exists) sends them to the source. The command lines are read from the ```bash blocks
and from inline `harness ...` code spans; each is split like a shell would, the command found by walking the
CLI's command tree, and each `--option` checked against that command's --help as the CLI prints it.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.command_tree import app_command
from tests.doc_blocks import ROOT, page_blocks

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INLINE = re.compile(r"(?<!`)`(harness [^`\n]+)`(?!`)")
OPTION = re.compile(r"^--[a-z0-9][a-z0-9-]*")


def command_lines(page: Path) -> list[tuple[str, list[str]]]:
    """(where, words) of every `harness ...` command of a page's bash blocks and inline code spans."""
    found = []
    for block in page_blocks(page):
        if block.lang == "bash":
            found += [(block.where, words) for line in block.lines for words in commands(line.text)]
    text = page.read_text()
    fences = [(m.start(), m.end()) for m in re.finditer(r"^```.*?^```", text, re.MULTILINE | re.DOTALL)]
    for m in INLINE.finditer(text):
        if not any(a <= m.start() < b for a, b in fences):
            where = f"{page.relative_to(ROOT).as_posix()}:{text.count(chr(10), 0, m.start()) + 1}"
            found += [(where, words) for words in commands(m.group(1))]
    return found


def commands(line: str) -> list[list[str]]:
    """The `harness` commands of a shell line, split as a shell would (quotes kept whole, `|`, `&&`, `;` between
    commands, a comment dropped)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.commenters = "#"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:  # an unclosed quote in prose: blanks only
        tokens = line.split()
    out: list[list[str]] = [[]]
    for token in tokens:
        if token in ("|", "||", "&&", ";", "&", "(", ")"):
            out.append([])
        else:
            out[-1].append(token)
    return [words for words in out if words[:1] == ["harness"]]


def resolve(words: list[str]) -> tuple[list[str], Any, list[str]]:
    """(the command's path, the command, the option words) of a `harness ...` command line. (The command objects
    are typer's click, duck-typed: a group has ``commands``.)"""
    command = app_command()
    path: list[str] = []
    rest = words[1:]
    options = []
    while rest:
        word = rest.pop(0)
        if word.startswith("--"):
            options.append(word)
        elif hasattr(command, "commands") and word in command.commands:
            command = command.commands[word]
            path.append(word)
        elif hasattr(command, "commands"):
            break  # not a command (a placeholder, prose): its options are not checked against a group
    options += [w for w in rest if w.startswith("--")]
    return path, command, [m.group(0) for w in options if (m := OPTION.match(w))]


@cache
def help_text(path: tuple[str, ...]) -> str:
    app_command()  # every command module registered on the app
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def shown_options(command: Any) -> set[str]:
    return {
        opt
        for p in command.params
        if p.param_type_name == "option" and not p.hidden
        for opt in (*p.opts, *p.secondary_opts)
        if opt.startswith("--")
    } | {"--help"}


ALL = [(where, words) for page in PAGES for where, words in command_lines(page)]


def test_the_pages_hold_harness_command_lines_and_the_scan_reads_them():
    assert len(ALL) > 50, f"only {len(ALL)} `harness` command lines found in the pages: the scan reads nothing"
    assert any("--packer-digest" in words for _, words in ALL)  # the option this test was written for
    (quoted,) = commands('harness laws --packer-cmd "a --wire | b" --json x.json | tail -1  # --not-an-option')
    assert quoted == ["harness", "laws", "--packer-cmd", "a --wire | b", "--json", "x.json"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_option_a_page_uses_is_in_its_commands_help(page):
    missing = []
    for where, words in command_lines(page):
        path, command, options = resolve(words)
        if hasattr(command, "commands") and not path:
            options = [o for o in options if o != "--version"]  # `harness --version`, the root's own
        known = shown_options(command)
        text = help_text(tuple(path))
        for option in options:
            if option not in known or option not in text:
                name = " ".join(["harness", *path])
                missing.append(f"{where}: `{name} {option}` ({'hidden from' if option in known else 'not in'} --help)")
    assert not missing, (
        f"{len(missing)} option(s) the page uses are not in their command's --help:\n  "
        + "\n  ".join(missing)
        + "\nShow them in --help (no hidden=True), or fix the page."
    )


def test_a_hidden_or_unknown_option_is_named():
    """Negative control: the check names an option the command hides and one it does not have."""
    (words,) = commands('harness laws --packer-cmd "x" --no-such-option 3 --packer-digest=ab')
    path, command, options = resolve(words)
    assert path == ["laws"] and options == ["--packer-cmd", "--no-such-option", "--packer-digest"]
    known = shown_options(command)
    assert "--no-such-option" not in known and "--packer-digest" in known
    option = next(p for p in command.params if "--packer-digest" in p.opts)
    option.hidden = True  # what the option was before it was shown
    try:
        assert "--packer-digest" not in shown_options(command)
    finally:
        option.hidden = False
