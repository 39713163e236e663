"""One network call of the call log (``calls.parquet``), by attribute: what the lanes log and what its readers get.

The lanes write these records, the call log (``golden.calls``) reads its rows back as them, and the readers in the
core (throughput, the evidence kinds' counters) read their attributes; all three layers meet only in the data
layer, so the record lives here. It is also a read-only mapping of its columns, because an evidence kind's
``observe(calls)`` (``harness.evidence.kind.CallCounter``) is a team-facing protocol that hands out the call log's
rows as mappings: a team's kind may read ``call["wall_s"]``, and compare a row with a dict of its columns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, eq=False)  # equality is the mapping's: a record equals a dict of the same columns
class CallRecord(Mapping[str, object]):
    """One network call: what was sent (which blocks) and what it cost. As a mapping, its columns in the call
    log's order, ``block_ids`` as a list (the call log's Arrow row, as ``to_pylist`` gave it)."""

    lane: str  # "exact" or "fast"
    shape: int  # the lane's blocks per call (k); padding counts
    op: int
    blocks: int  # real blocks in this call
    windows: int
    rows: int
    request_bytes: int
    wall_s: float
    peak_device_bytes: int | None
    replica: int = 0
    block_ids: tuple[str, ...] = ()  # as sent: a variant's copy c >= 1 of a block is "id~c"
    variant: str = ""  # the variant's lane (lanes.running.variants) that made this call; "" for plain and exact lanes

    @classmethod
    def of(cls, call: Mapping[str, Any]) -> CallRecord:
        """``call`` as a record: itself when it is one (the call log's rows are), else a mapping of the call
        log's columns (a team's or a test's; ``replica``, ``block_ids`` and ``variant`` may be left out)."""
        if isinstance(call, CallRecord):
            return call
        given = {name: call[name] for name in CALL_COLUMNS if name in call}
        ids = given.pop(_IDS, None)
        return cls(**given, block_ids=tuple(ids or ()))

    def to_dict(self) -> dict[str, object]:
        """The call's columns as a dict (a fresh one: the mapping view's items)."""
        out = {name: getattr(self, name) for name in CALL_COLUMNS}  # (asdict deep-copies: slow per call)
        out[_IDS] = list(self.block_ids)
        return out

    def __getitem__(self, key: str) -> object:
        if key == _IDS:
            return list(self.block_ids)  # a list, as the Arrow row held it
        if key in _COLUMN_SET:
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(CALL_COLUMNS)

    def __len__(self) -> int:
        return len(CALL_COLUMNS)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, name) for name in CALL_COLUMNS))


CALL_COLUMNS = tuple(f.name for f in fields(CallRecord))  # the call log's columns, in its schema's order
_COLUMN_SET = frozenset(CALL_COLUMNS)
_IDS = "block_ids"  # the one column whose mapping value (a list) is not the attribute (a tuple)
