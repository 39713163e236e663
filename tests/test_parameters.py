"""No function or method of the harness takes more than 8 parameters.

A function of 9, 10, 14 parameters is a bag of values every caller unpacks and every hop passes on,
one by one, in the right order: a value added means every signature on the way changes, and two
neighbours of the same type swapped pass silently. Related values go down whole instead, as one
frozen dataclass (a ``NightlyJob``, a ``CheckDetails``) or the object they already belong to.

Counted: positional-only, positional and keyword-only parameters; not ``self`` / ``cls``, not
``*args`` / ``**kwargs``. Read with ``ast`` (nothing is imported): every ``.py`` under harness/, lanes/,
golden/ and reports/, but the Triton model repositories (the server's Python backend, its own API) and
harness/cli/ (typer commands: one parameter per option is how the command line is declared).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "lanes", "golden", "reports")
ALLOWED = 8
ADVICE = (
    "group related parameters into a frozen dataclass that goes down whole (or pass the object they "
    "already belong to, e.g. the job or the configuration) instead of unpacking them into parameters"
)


def checked_files() -> list[Path]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "model_repository" in rel or rel.startswith("harness/cli/"):
                continue
            out.append(path)
    return out


def parameter_count(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return sum(1 for name in names if name not in ("self", "cls"))


def offenders(source: str, where: str) -> Iterator[str]:
    """``where:function: N parameters (allowed 8)`` for every function of ``source`` over the limit."""
    for node in ast.walk(ast.parse(source, filename=where)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = parameter_count(node)
            if n > ALLOWED:
                yield f"{where}:{node.name}: {n} parameters (allowed {ALLOWED})"


def test_no_function_takes_more_than_eight_parameters() -> None:
    files = checked_files()
    assert len(files) > 100, f"only {len(files)} files found under {PACKAGES}: the walk is wrong"
    found = [
        line
        for path in files
        for line in offenders(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    ]
    assert not found, (
        f"{len(found)} function(s) take more than {ALLOWED} parameters:\n  " + "\n  ".join(found) + f"\n{ADVICE}"
    )


NINE = """
class Job:
    def run(self, a, b, c, /, d, e, *args, f, g, h, i=1, **kwargs):
        pass
"""

EIGHT = """
def run(a, b, c, /, d, e, *args, f, g, h=1, **kwargs):
    async def inner(x):
        pass
"""


def test_the_counter_reports_nine_parameters() -> None:
    # positional-only, positional and keyword-only count; self, *args and **kwargs do not
    assert list(offenders(NINE, "nine.py")) == ["nine.py:run: 9 parameters (allowed 8)"]


def test_the_counter_lets_eight_parameters_pass() -> None:
    assert list(offenders(EIGHT, "eight.py")) == []


def test_cls_is_not_counted_either() -> None:
    source = "class A:\n    @classmethod\n    def make(cls, a, b, c, d, e, f, g, h):\n        pass\n"
    assert list(offenders(source, "a.py")) == []
    assert list(offenders(source.replace("h)", "h, i)"), "a.py")) == ["a.py:make: 9 parameters (allowed 8)"]
