"""One way for the tests to run the ``harness`` command line in-process: (exit status, stdout, stderr)."""

from __future__ import annotations

import sys

from harness import cli


def harness_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def laws_cli(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    return harness_cli(capsys, monkeypatch, "laws", *args)
