"""``python -m harness.cli``."""

from harness.cli import main

main()
