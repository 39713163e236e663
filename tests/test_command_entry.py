"""Every command enters the pipeline the same way: the CLI parses options into typed inputs, calls one function
of a command module, and prints its Answer (harness.pipeline.answer). These tests read the CLI's source: a
command that reaches into the pipeline or the core by another door, or prints and exits on its own, is named."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.pipeline.answer import FAILED, HOLDS, Answer

CLI = Path(__file__).resolve().parents[1] / "harness" / "cli"
PROJECT = ("harness", "golden", "lanes", "reports")
# the command modules, one per CLI module, named after it: one function per command, each answering with an Answer
MIRROR = {
    "audit_cmds.py": "audit",
    "corpus_cmds.py": "corpus",
    "golden_cmds.py": "golden",
    "init_cmd.py": "init",
    "inspect_cmds.py": "inspect",
    "job_cmds.py": "job",
    "lane_cmds.py": "lane",
    "model_cmds.py": "model",
}
ENTRY = {f"harness.pipeline.commands.{group}" for group in MIRROR.values()}
ALLOWED = {  # what else the CLI may import of the project, and why
    "harness": "the version line",
    "harness.release_config": "the options and --set merged into the one configuration",
    "harness.base.errors": "the exit status of each kind of error",
    "harness.data.limits": "the options' ranges",
    "harness.data.shape": "--shapes parsed",
    "harness.base.fsio": "the process: faults injected in tests, the cache folder",
    "harness.base.process_settings": "the process: tuned before torch is imported",
    "harness.base.env_vars": "the process: HARNESS_DEBUG read before the options are",
    "golden.locate": "a folder of goldens refused before the configuration is read",
    "harness.pipeline.answer": "the answer printed",
    "harness.pipeline.nightly_job": "the nightly's job, built from the options",
    "harness.pipeline.distributed": "the Ray options, built from the configuration",
    "harness.pipeline.backends": "the backend choice, built from the configuration",
}


def _imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in ("harness.pipeline", "harness.pipeline.commands"):  # `from ... import golden`
                yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names)
            else:
                yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)


def stray_imports(source: str, where: str) -> list[str]:
    """Every import of the project that is neither a command module nor allowed, as 'where:line: module'."""
    found = []
    for line, module in _imports(ast.parse(source)):
        if module.split(".")[0] not in PROJECT or module.startswith("harness.cli"):
            continue
        if module not in ENTRY and module not in ALLOWED:
            found.append(f"{where}:{line}: {module}")
    return found


def _is_command(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
        for d in fn.decorator_list
    )


def entered_module(alias: str) -> str:
    """The command module a CLI function calls through ``<group>_commands`` (``from harness.pipeline.commands import
    golden as golden_commands``)."""
    return f"harness.pipeline.commands.{alias.removesuffix('_commands')}"


def entry_faults(source: str, where: str) -> list[str]:
    """Every command function that does not end in exactly one ``answer(<group>_commands.<function>(...))`` of its
    own command module (the one named after the CLI module ``where``), or that prints or exits itself."""
    own = MIRROR.get(where)
    faults = []
    for fn in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and _is_command(n)):
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        answers = [c for c in calls if c.func.id == "answer"]
        entered = [
            c
            for c in answers
            if len(c.args) == 1
            and isinstance(c.args[0], ast.Call)
            and isinstance(c.args[0].func, ast.Attribute)
            and isinstance(c.args[0].func.value, ast.Name)
            and entered_module(c.args[0].func.value.id) in ENTRY
        ]
        strangers = [c for c in entered if own and entered_module(c.args[0].func.value.id) != entered_module(own)]
        if strangers:
            faults.append(f"{where}: {fn.name} answers with another group's command module (its own: commands.{own})")
        if len(answers) != 1 or len(entered) != 1:
            faults.append(f"{where}: {fn.name} does not answer with one command module's function")
        printed = [c for c in calls if c.func.id in ("say", "print")]
        exits = [n for n in ast.walk(fn) if isinstance(n, ast.Raise) and "Exit" in ast.unparse(n)]
        if printed or exits:
            faults.append(f"{where}: {fn.name} prints or exits itself")
    return faults


def _sources() -> Iterator[tuple[str, str]]:
    for path in sorted(CLI.glob("*.py")):
        yield path.read_text(), path.name


def test_the_cli_reaches_the_pipeline_through_the_command_modules_only():
    strays = [s for source, name in _sources() for s in stray_imports(source, name)]
    assert strays == [], f"{len(strays)} import(s) past the command modules: {strays}; move the work into one"


def test_every_command_answers_with_one_command_modules_function():
    faults = [f for source, name in _sources() for f in entry_faults(source, name)]
    commands = sum(
        1
        for source, _ in _sources()
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.FunctionDef) and _is_command(n)
    )
    assert commands >= 20 and faults == [], faults


def test_the_checks_name_a_command_that_takes_another_door():
    """The negative controls: a command reaching into the pipeline, one printing its own lines, one calling a
    command module without answering."""
    stray = "from harness.pipeline.inspect import describe_golden\nfrom harness.ledger.ledger_store import x\n"
    assert stray_imports(stray, "x.py") == ["x.py:1: harness.pipeline.inspect", "x.py:2: harness.ledger.ledger_store"]
    assert stray_imports(
        "from harness.pipeline.commands import golden\nfrom harness.pipeline import inspect\n", "y.py"
    ) == ["y.py:2: harness.pipeline.inspect"]
    printing = (
        "@app.command('x')\ndef x():\n    from harness.pipeline.commands import golden as golden_commands\n"
        "    for line in golden_commands.golden_show(a, b, c).lines:\n        say(line)\n"
    )
    assert entry_faults(printing, "z.py") == [
        "z.py: x does not answer with one command module's function",
        "z.py: x prints or exits itself",
    ]
    honest = (
        "@app.command('x')\ndef x():\n    from harness.pipeline.commands import golden as golden_commands\n"
        "    answer(golden_commands.golden_show(a, b, c))\n"
    )
    assert entry_faults(honest, "z.py") == []
    assert entry_faults(honest, "golden_cmds.py") == []
    assert entry_faults(honest, "lane_cmds.py") == [
        "lane_cmds.py: x answers with another group's command module (its own: commands.lane)"
    ]


def test_every_cli_module_has_its_command_module_and_no_other_exists():
    """The command line mirrored: a CLI module per group, a pipeline module of the same name per CLI module."""
    cli = {p.name for p in CLI.glob("*_cmd*.py")}
    assert cli == set(MIRROR), f"CLI modules without a declared command module: {sorted(cli ^ set(MIRROR))}"
    pipeline = CLI.parent / "pipeline" / "commands"
    assert {p.stem for p in pipeline.glob("*.py")} - {"__init__"} == set(MIRROR.values())


def test_an_answer_holds_or_fails_and_nothing_else():
    assert Answer.of(["a"]).status == HOLDS and Answer.of(["a"], held=False).status == FAILED
    with pytest.raises(ValueError, match="status is 0 or 1"):
        Answer(["a"], 2)  # bad input and internal errors are raised, never answered
