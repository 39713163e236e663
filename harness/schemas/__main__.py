"""``python -m harness.schemas``: print the tables of docs/schemas.md."""

import sys

from harness.schemas.docs import markdown

sys.stdout.write(markdown())
