"""No printed advice leads to a refusal: every command, option and ``--set`` key a message names is accepted.

Before: ``golden record --regen`` of a changed model printed "adopt it with: harness golden adopt ...", and that
command refused it as another model; messages still advised ``--seed``, ``--threads`` and ``--model-label``, flags
every command now refuses ("--seed was removed: use --set model.seed=N"). The class: a message that tells the user
what to type. Two tests:

- every string the product can print (each string literal and f-string of harness/, lanes/, golden/, reports/;
  docstrings only where they are a command's --help), read for what it tells a user to type: ``harness COMMAND
  --option`` (the command exists and takes the option), ``--set table.key=value`` (a key of the configuration;
  a literal value is validated as the file would be), and a bare ``--option`` (some command takes it, and it is
  none of the flags removed in favour of a ``--set`` key, unless the message names the command that owns it);
- the flow the regen message starts, through the CLI: record, regenerate with a changed model, run the adopt
  command exactly as printed, then the nightly of the new model: each step accepted.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_run import harness_cli

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "lanes", "golden", "reports")
GLOBAL = {"--help", "--debug", "--version"}  # the program's own (harness.cli), before or after any command
# flags of other programs that messages name, with the program
NOT_OURS = {
    "--index-url": "pip",
    "--no-compile": "pip",
    "--http-max-input-size": "tritonserver",
    "--wire": "an example engine packer's own command line",
}

COMMAND = re.compile(r"(?:`|with: |\brun )harness ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)*)([^`;()]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
SET = re.compile(r"--set ([a-z_][\w]*\.[\w.]+)(?:=([^\s,;)`]*))?")  # TABLE.KEY=VALUE (capitals) names the form
SENTENCE = re.compile(r"(?<=[.;:])\s+|\n\s*\n")
PLACEHOLDER = re.compile(r"^(?:[A-Z0-9_|]+|N|\.\.\.|\{\}|i/n|[a-z]+(?:\|[a-z]+)+|\[[\d,]+\]|)$")


@dataclass(frozen=True)
class Text:
    where: str
    text: str


def _flat(node: ast.AST) -> str | None:
    """A string literal, an f-string (its fields as ``{}``) or a sum of them, as one text; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)  # type: ignore[misc]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _flat(node.left), _flat(node.right)
        return None if left is None or right is None else left + right
    return None


def _is_command(node: ast.AST) -> bool:
    """A typer command (its docstring is its --help)."""
    return isinstance(node, ast.FunctionDef) and any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
        for d in node.decorator_list
    )


def printed_texts() -> Iterator[Text]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "model_repository" in path.parts:
                continue
            tree = ast.parse(path.read_text())
            docstrings = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
                    first = node.body[0]
                    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and not _is_command(node):
                        docstrings.add(id(first.value))
            inside: set[int] = set()
            for node in ast.walk(tree):
                if id(node) in docstrings or id(node) in inside:
                    continue
                text = _flat(node)
                if text is None or " " not in text:  # an option's own name ("--force") is a declaration
                    continue
                inside |= {id(sub) for sub in ast.walk(node)}
                yield Text(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}", text)


def command_tree():
    from harness.cli.command_tree import app_command

    return app_command()


def options_of(command) -> set[str]:
    return {name for p in getattr(command, "params", ()) for name in (*p.opts, *p.secondary_opts)}


def every_option(group) -> set[str]:
    found = options_of(group)
    for sub in getattr(group, "commands", {}).values():
        found |= every_option(sub)
    return found


def resolve(group, words: list[str]):
    """The command the words name (None: they name none) and how many words it took."""
    command, used = group, 0
    for word in words:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command, used = sub, used + 1
    return (command if used and not getattr(command, "commands", None) else None), used


def leaves(group) -> Iterator:
    """Every command of the tree (not the groups)."""
    subs = getattr(group, "commands", None)
    if not subs:
        yield group
        return
    for sub in subs.values():
        yield from leaves(sub)


def _sentences(text: str, owned: set[tuple[int, int]]) -> list[str]:
    """The text without its `harness COMMAND ...` fragments (checked against their command), cut into sentences:
    the flags one sentence names must be one command's."""
    kept = "".join(" " if any(a <= i < b for a, b in owned) else ch for i, ch in enumerate(text))
    return [part for part in SENTENCE.split(kept) if part.strip()]


def set_key_problem(key: str, value: str | None) -> str | None:
    """Why ``--set key=value`` would be refused (None: accepted); a placeholder value checks the key alone."""
    from harness.base.errors import HarnessError
    from harness.data.schemas.config_file import ConfigFile
    from harness.release_config import load_config, parse_set

    table, _, rest = key.partition(".")
    section = ConfigFile.model_fields.get(table)
    if section is None:
        return f"no table [{table}]"
    model = section.annotation
    for part in rest.split("."):
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            return f"no key {key}"
        model = fields[part].annotation
    if value is None or PLACEHOLDER.match(value):
        return None
    try:
        load_config(None, [parse_set(f"{key}={value}")])
    except HarnessError as exc:
        return str(exc)
    return None


def advice_problems() -> list[str]:
    from harness.cli.app import REMOVED_FLAGS

    tree = command_tree()
    assert REMOVED_FLAGS
    known = every_option(tree) | GLOBAL
    problems = []
    for item in printed_texts():
        owned: set[tuple[int, int]] = set()  # spans of flags inside a `harness COMMAND ...` fragment
        for match in COMMAND.finditer(item.text):
            words = match.group(1).split()
            command, used = resolve(tree, words)
            if command is None:
                problems.append(f"{item.where}: `harness {match.group(1)}` names no command")
                continue
            tail = " ".join(words[used:]) + match.group(2)
            for flag in FLAG.finditer(tail):
                name = flag.group(1)
                if name not in options_of(command) | GLOBAL:
                    problems.append(f"{item.where}: `harness {' '.join(words[:used])}` takes no {name}")
            owned.add((match.start(), match.end()))
        for match in SET.finditer(item.text):
            problem = set_key_problem(match.group(1), match.group(2))
            if problem is not None:
                problems.append(f"{item.where}: --set {match.group(1)}={match.group(2)}: {problem}")
        for sentence in _sentences(item.text, owned):
            flags = {m.group(1) for m in FLAG.finditer(sentence)} - set(NOT_OURS) - {"--set"} - GLOBAL
            for name in sorted(flags - known):
                problems.append(f"{item.where}: {name} is an option of no command")
            if flags and flags <= known and not any(flags <= options_of(c) | GLOBAL for c in leaves(tree)):
                removed = sorted(f for f in flags if f in REMOVED_FLAGS)
                hint = f" (use --set {REMOVED_FLAGS[removed[0]]} for {removed[0]})" if removed else ""
                problems.append(f"{item.where}: no command takes {', '.join(sorted(flags))} together{hint}")
    return problems


def test_every_command_option_and_key_a_message_names_is_accepted():
    assert advice_problems() == []


def test_the_scan_sees_broken_advice(monkeypatch):
    """Negative control: messages that name a removed flag, a missing command, an option a command lacks and a
    key no table holds are each found; and the scan reads f-strings and sums of strings."""
    import tests.test_printed_advice as me

    broken = [
        Text("x:1", "give the model it was recorded with (--model/--seed or the config's [model])"),
        Text("x:2", "adopt it with: harness golden adpot {} (it becomes {})"),
        Text("x:3", "run `harness golden record --regen --force` again"),
        Text("x:4", "set it with --set nightly.shards=2 and retry"),
        Text("x:5", "use --no-such-flag to go on"),
    ]
    monkeypatch.setattr(me, "printed_texts", lambda: iter(broken))
    found = "\n".join(advice_problems())
    assert "x:1: no command takes --model, --seed together (use --set model.seed=N for --seed)" in found, found
    assert "x:2: `harness golden adpot` names no command" in found, found
    assert "x:3: `harness golden record` takes no --force" in found, found
    assert "x:4: --set nightly.shards=2: no key nightly.shards" in found, found
    assert "x:5: --no-such-flag is an option of no command" in found, found


def test_the_scan_reads_the_products_messages():
    """The scan is not empty: it finds the adopt advice and the model check advice."""
    texts = [t.text for t in printed_texts()]
    assert any(t.startswith("adopt it with: harness golden adopt {}") for t in texts)
    assert any("`harness model check --model {}` checks it all" in t for t in texts)


@pytest.mark.slow
def test_a_changed_model_is_one_printed_command_from_its_first_verdict(capsys, monkeypatch, tmp_path):
    """record -> record --regen with another model (seed 1) -> the printed adopt command, verbatim -> nightly."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "h.toml").write_text('[corpus]\nblocks = 8\n[model]\nspec = "lanes.models.null_model:small"\n')
    base = ("--config", "h.toml", "--no-progress")
    assert harness_cli(capsys, monkeypatch, "golden", "record", "--release", "rel", *base)[0] == 0
    code, out, err = harness_cli(
        capsys, monkeypatch, "golden", "record", "--release", "rel", "--regen", "--set", "model.seed=1", *base
    )
    assert code == 0, err
    assert "the model changed (null-small-seed1, fingerprint " in out, out
    [hint] = [line for line in out.splitlines() if line.startswith("adopt it with: harness ")]
    command = shlex.split(hint.removeprefix("adopt it with: harness ").split(" (it becomes")[0])
    code, out, err = harness_cli(capsys, monkeypatch, *command)
    assert code == 0, err
    assert "the new model starts unpromoted" in out and "the old model's promotions stay with it" in out, out
    code, out, err = harness_cli(
        capsys, monkeypatch, "nightly", "--golden", "goldens/rel", "--out", "night", "--shapes", "2",
        "--set", "model.seed=1", *base,
    )  # fmt: skip
    assert code == 0 and out.splitlines()[-1].startswith("PASS: 1 shape promoted (k=2)"), (out, err)
