"""``python -m harness.data.schemas``: print the tables of docs/schemas.md."""

import sys

from harness.data.schemas.docs import markdown

sys.stdout.write(markdown())
