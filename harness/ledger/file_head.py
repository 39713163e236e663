"""What a ledger-side JSON file says it is, read before it is validated.

A ledger, a promoted-shapes manifest, a journal and a score are each refused in one line when they are
not what they should be (another file's kind, a format this harness no longer reads, a journal of an
older harness), before the schema's own error, which would bury that in a list of fields. Those few
keys are read here, once, from the raw JSON, and by attribute wherever a file is refused.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileHead:
    """A JSON file's ``kind`` and ``format`` as written (None where absent, null, or not a JSON object), what
    to name it by in a refusal, and its keys."""

    kind: object
    format: object
    named: object  # its kind, or "a JSON list" (str, ...) where it is not an object
    keys: frozenset[str]

    @classmethod
    def of(cls, data: object) -> FileHead:
        if not isinstance(data, dict):
            return cls(None, None, f"a JSON {type(data).__name__}", frozenset())
        # the raw JSON, not yet validated: its kind and format read by name, to refuse it in one line
        kind, format_ = data.get("kind"), data.get("format")
        return cls(kind, format_, kind, frozenset(data))
