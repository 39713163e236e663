"""``nightly.shard`` as text, ``i/n``: one rule for every place it is given (the configuration's validator, which
every command runs, and :meth:`harness.corpus.shards.Shard.parse`), so a value one command refuses no other
command takes."""

from __future__ import annotations

import re

from harness.data.limits import MAX_SHARDS

PATTERN = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def shard_refusal(text: str | None) -> str | None:
    """Why ``text`` is no shard ``i/n`` (None: it is one); the message quotes the value, cut where it is long."""
    match = PATTERN.fullmatch(text or "")
    shown = repr(text) if text is None or len(text) <= 40 else repr(text.strip()[:37] + "...")
    if not match:
        return f"shard {shown}: expected i/n, e.g. 1/4 (1-based)"
    if max(len(match.group(1)), len(match.group(2))) > len(str(MAX_SHARDS)) or int(match.group(2)) > MAX_SHARDS:
        # the digits' length first: never int() a thousand digits
        return f"shard {shown}: at most {MAX_SHARDS} shards (a corpus holds at most that many blocks)"
    i, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= i <= n:
        return f"shard {shown}: need 1 <= i <= n"
    return None


def parse_shard(text: str) -> tuple[int, int]:
    """``(i, n)`` of a valid shard (call :func:`shard_refusal` first: ValueError otherwise)."""
    why = shard_refusal(text)
    if why is not None:
        raise ValueError(why)
    match = PATTERN.fullmatch(text)
    assert match is not None
    return int(match.group(1)), int(match.group(2))
