"""``python -m harness.data.schemas``: print the tables of docs/schemas.md;
``python -m harness.data.schemas --json DIR``: write every file kind's JSON Schema into DIR (docs/schemas/)."""

import sys

from harness.base.errors import HarnessError
from harness.data.schemas.docs import markdown
from harness.data.schemas.json_schema import (
    write_schemas,
)

USAGE = "usage: python -m harness.data.schemas [--json DIR]"


def main(argv: list[str]) -> int:
    """0, or 2 with one line ``harness: error: <where>: <what>`` (a bad argument, a folder that cannot be
    written: nothing is written then)."""
    if not argv:
        sys.stdout.write(markdown())
        return 0
    if len(argv) != 2 or argv[0] != "--json" or not argv[1]:
        print(
            f"harness: error: python -m harness.data.schemas: expected no argument or --json DIR, got "
            f"{' '.join(argv)!r} ({USAGE})",
            file=sys.stderr,
        )
        return 2
    from pathlib import Path

    try:
        written = write_schemas(Path(argv[1]))
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
