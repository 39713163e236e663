"""Deterministic corpus shards, so a CI matrix can spread a corpus over machines.

A block belongs to shard ``i`` of ``n`` (1-based, as CI matrices count) by the sha256 of its
id, not its position: the same block lands in the same shard whatever order the corpus
file lists it in, and shards never overlap.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from harness.errors import HarnessError


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
        if not match:
            raise HarnessError(f"--shard {text!r}: expected i/n, e.g. 1/4 (1-based)")
        i, n = int(match.group(1)), int(match.group(2))
        if n < 1 or not 1 <= i <= n:
            raise HarnessError(f"--shard {text!r}: need 1 <= i <= n")
        return cls(i, n)

    def owns(self, block_id: str) -> bool:
        digest = hashlib.sha256(block_id.encode()).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def select(self, block_ids: list[str]) -> list[int]:
        return [j for j, b in enumerate(block_ids) if self.owns(b)]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
