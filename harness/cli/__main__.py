"""``python -m harness.cli``."""

from harness.cli import program

program()
