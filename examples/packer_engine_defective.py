#!/usr/bin/env python3
"""A defective external packer: examples/packer_engine_example.py with a known rebase bug.

    harness laws --packer-cmd "python examples/packer_engine_defective.py"     # exit 1, minimal example

Every block after the first gets its OFFSETS shifted one sample too far: the bug of a packer
that rebases by ``previous span end + 1``. Its windows read one sample of the wrong audio (or,
for the last window of the last block, run past SPAN); the harness must catch it, shrink it to a
minimal block set, and say which law broke. Standalone like the example (numpy + pyarrow only).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from packer_engine_example import main  # noqa: E402  (the sibling script, not a package import)

if __name__ == "__main__":
    sys.exit(main(["--bug", "off-by-one", *sys.argv[1:]]))
