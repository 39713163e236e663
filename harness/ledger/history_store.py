"""The history of figures beside the ledger: one Parquet part per ledger commit that carried a score.

Why: the ledger keeps each shape's verdicts, not the figures behind them night after night, so a
margin that shrinks towards its limit is invisible until it fails. Here every gated check of every
promoted score is one row (:class:`harness.data.schemas.history.HistoryRow`), in
``<ledger file name>.history/<seq:08d>.parquet``.

Why Parquet parts: the harness already writes Parquet (pyarrow); DuckDB, pandas, polars and Spark
read a folder of parts as one table; an immutable part per commit gives crash safety without a
database. A part is written (atomically, fsynced) *inside* the ledger's transaction, after the new
ledger is validated and before its journal (:func:`harness.ledger.ledger_store.commit`): a kill before the
journal leaves an orphan part whose seq is past the ledger's, which every reader ignores and the
next commit of that seq replaces. Readers use only parts whose seq <= the ledger's committed seq.

A part carries its kind, format, seq, the sha256 of its rows and the digest of the score it holds the
figures of in the Parquet metadata: a part of another kind, one renamed to another seq, one truncated or
corrupt (page checksums) and one whose rows were edited are each refused with one line naming the file.

A part is also bound to *this* ledger: every row must be the figures of an event the ledger recorded at the
part's seq (the same shape, model, device kind, profile and packer; the same run), and the score digest it
names must be that event's (``LedgerEvent.score_digest``). A part of another ledger (restored from another
environment's backup, an rsync of the wrong folder) is well formed, sealed and of the right seq, yet
another run's figures: it is refused, naming the part and the ledger's commit. Which rows a commit
writes follows from the same rule: the figures of the shapes the commit recorded an event for (a release
shape the score judged gets none, so it gets no row either: :func:`rows_of`'s ``skip``).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from harness.base.errors import LedgerError
from harness.base.fsio import fault, fsync_path, is_temporary
from harness.base.jsonio import digest
from harness.data import arrow_build
from harness.data.parquet import check_schema, open_file, read_row_group, schema_metadata, write_table
from harness.data.schemas.base import validate
from harness.data.schemas.history import HISTORY_FORMAT, HISTORY_KIND, HistoryRow
from harness.data.schemas.records import Ledger, entry_key
from harness.data.schemas.results import Score
from harness.data.shape import Shape
from harness.ledger.promotion import packer_of

WHAT = "history part"
_PART = re.compile(r"^(\d{8})\.parquet$")
# a part's Arrow schema metadata keys, in PartMeta's field order
_META_KEYS = ("harness.kind", "harness.format", "harness.seq", "harness.rows_sha256", "harness.score_digest")


class PartMeta(NamedTuple):
    """A part's schema metadata as read (JSON values, None where absent): checked by :func:`read_part`."""

    kind: object
    format: object
    seq: object
    rows_sha256: object
    score_digest: object


_ARROW = {"integer": pa.int64(), "string": pa.string(), "number": pa.float64(), "boolean": pa.bool_()}


def history_folder(ledger_path: Path) -> Path:
    """``<ledger file name>.history/`` beside the ledger (``ledger.json.history/``)."""
    ledger_path = Path(ledger_path)
    return ledger_path.with_name(f"{ledger_path.name}.history")


def part_path(folder: Path, seq: int) -> Path:
    return Path(folder) / f"{seq:08d}.parquet"


def arrow_schema() -> pa.Schema:
    """The parts' Arrow schema, derived from :class:`HistoryRow` (declared once): a field that may be
    None is a nullable column, every other is not nullable."""
    fields = []
    # HistoryRow's JSON Schema: a JSON Schema document, read by its own keywords
    for name, prop in HistoryRow.model_json_schema()["properties"].items():
        kinds = [p.get("type") for p in prop.get("anyOf", [prop])]  # JSON Schema keywords
        nullable = "null" in kinds
        (kind,) = [k for k in kinds if k != "null"]
        fields.append(pa.field(name, _ARROW[kind], nullable=nullable))
    return pa.schema(fields)


def _number(value: object) -> float | None:
    """A check's figure as a float (a boolean as 0/1); None for None."""
    return None if value is None else float(value)  # type: ignore[arg-type]


def margin_of(observed: float | None, relation: str, allowed: float | None) -> float | None:
    """How much of its limit a check uses (under 1 holds): observed/allowed for '<=' with allowed > 0,
    (1-observed)/(1-allowed) for '>=' (cosine) with allowed < 1, else None (not defined)."""
    if observed is None or allowed is None:
        return None
    if relation == "<=" and allowed > 0:
        return observed / allowed
    if relation == ">=" and allowed < 1:
        return (1 - observed) / (1 - allowed)
    return None


def rows_of(score: Score, seq: int, skip: Collection[int] = ()) -> list[HistoryRow]:
    """One row per gated check of ``score`` (per shape, OP and check whose relation is not 'report'),
    as ledger commit ``seq`` records it; ordered by shape, OP and the check's order in the score.
    ``skip``: shapes the commit records no event for (the release's own shapes), so they get no row."""
    identity, _ = packer_of(score)
    rows = []
    for key, shape in sorted(score.shapes.items(), key=lambda kv: int(kv[0])):
        if int(key) in skip:
            continue
        for _, verdict in sorted(shape.ops.items()):
            for check in verdict.checks:
                if check.relation == "report" or check.ok is None:
                    continue
                observed, allowed = _number(check.observed), _number(check.allowed)
                rows.append(
                    HistoryRow(
                        seq=seq,
                        created=score.created,
                        run_id=score.run.id,
                        release=score.release,
                        golden_id=score.golden.id,
                        fingerprint=score.fingerprint,
                        device_kind=score.device_kind,
                        numerics_profile=score.numerics_profile,
                        packer_identity=identity,
                        shape=Shape(key),
                        op=check.op,
                        metric=check.metric,
                        limit=check.limit,
                        observed=observed,
                        allowed=allowed,
                        margin=margin_of(observed, check.relation, allowed),
                        ok=check.ok,
                        verdict=shape.verdict,
                    )
                )
    return rows


class Figures(NamedTuple):
    """What a commit that carries a score writes beside the ledger: the score's rows and its digest."""

    rows: list[HistoryRow]
    score_digest: str


def write_part(folder: Path, seq: int, rows: list[HistoryRow], score_digest: str | None = None) -> Path:
    """Write commit ``seq``'s rows as one part (temporary name, fsync, rename, folder fsync), replacing
    an orphan of that seq a killed commit left. Every row must carry ``seq``; ``score_digest``: the digest
    of the score the rows are the figures of (the commit's events carry it), recorded so a reader can bind
    the part to the ledger's commit."""
    wrong = [r.seq for r in rows if r.seq != seq]
    if wrong:  # a bug (exit 3): rows of another commit
        raise RuntimeError(f"history part {seq}: {len(wrong)} of {len(rows)} rows carry seq {wrong[0]}")
    plain = [r.model_dump(mode="json") for r in rows]
    meta: dict[str, object] = {  # the Arrow schema metadata, by its keys (_META_KEYS)
        "harness.kind": HISTORY_KIND,
        "harness.format": HISTORY_FORMAT,
        "harness.seq": seq,
        "harness.rows_sha256": digest(plain),
    }
    if score_digest is not None:
        meta["harness.score_digest"] = score_digest  # an Arrow schema metadata key (_META_KEYS)
    schema = arrow_schema().with_metadata({k: json.dumps(v) for k, v in meta.items()})
    # column by column from their buffers: pa.Table.from_pylist imports pandas (~1 s; harness.data.arrow_build)
    table = arrow_build.table({f.name: [row[f.name] for row in plain] for f in schema}, schema)
    path = part_path(folder, seq)
    write_table(path, table)
    fsync_path(Path(folder))  # the rename itself reaches the disk before the journal names the commit
    fault("promote:history-written")
    return path


def remove_orphan(folder: Path, seq: int) -> None:
    """Drop a part of ``seq`` a killed commit left (a commit that carries no score takes that seq)."""
    with contextlib.suppress(FileNotFoundError):
        part_path(folder, seq).unlink()


def read_part(path: Path, ledger: Ledger | None = None, ledger_path: Path | None = None) -> list[HistoryRow]:
    """One part's rows, each checked with :class:`HistoryRow`, or one LedgerError line naming the file.

    ``ledger`` (read from ``ledger_path``): the part must also be the figures of that ledger's commit of its
    seq (module doc; :func:`check_bound`)."""
    path = Path(path)
    match = _PART.match(path.name)
    if match is None:
        raise LedgerError(f"{path}: not a history part name (<seq:08d>.parquet)")
    seq = int(match.group(1))
    file = open_file(path, WHAT, LedgerError)
    meta = PartMeta(*(schema_metadata(file, key.encode(), path, WHAT, LedgerError) for key in _META_KEYS))
    if meta.kind != HISTORY_KIND:
        raise LedgerError(
            f"{path}: not a harness history part (kind {meta.kind!r}, expected "
            f"{HISTORY_KIND!r}); move it out of the history folder"
        )
    if meta.format != HISTORY_FORMAT:
        raise LedgerError(
            f"{path}: unknown history part format {meta.format!r} (this harness reads format {HISTORY_FORMAT})"
        )
    if meta.seq != seq:
        raise LedgerError(f"{path}: holds ledger commit {meta.seq!r}, not {seq} (renamed?); refusing it")
    check_schema(file, arrow_schema(), path, WHAT, LedgerError)
    plain: list[dict[str, Any]] = []  # Arrow's rows, each by its column names (validated into HistoryRow below)
    for i in range(file.num_row_groups):
        plain += read_row_group(file, i, path, WHAT, LedgerError).to_pylist()
    if digest(plain) != meta.rows_sha256:
        raise LedgerError(
            f"{path}: edited after it was written (its rows do not match harness.rows_sha256); "
            "refusing the whole history part"
        )
    rows = [validate(HistoryRow, row, f"{path}: row {i}", LedgerError) for i, row in enumerate(plain)]
    other = [r for r in rows if r.seq != seq]
    if other:
        raise LedgerError(f"{path}: {len(other)} of {len(rows)} rows carry seq {other[0].seq}, not {seq}")
    if ledger is not None:
        digest_named = meta.score_digest
        if digest_named is not None and not isinstance(digest_named, str):
            raise LedgerError(
                f"{path}: history part metadata 'harness.score_digest' is {digest_named!r}, not a "
                "sha256; refusing the whole history part"
            )
        check_bound(path, seq, rows, digest_named, ledger, Path(ledger_path or "the ledger"))
    return rows


def check_bound(
    path: Path, seq: int, rows: list[HistoryRow], score_digest: str | None, ledger: Ledger, ledger_path: Path
) -> None:
    """Refuse a part that is not the figures of ``ledger``'s commit ``seq``: a row of a shape, model, device
    kind, profile or packer the commit recorded no event for, a row of another run than that event's, or a
    score digest other than the commit's (parts written before the digest was recorded name none: their rows'
    runs are still checked). One line naming the part, the ledger and its commit."""
    events = {key: e for key, entry in ledger.entries.items() for e in entry.history if e.seq == seq}
    applied = next(iter(events.values()), None)

    def refuse(holds: str) -> LedgerError:
        did = (
            f"commit {seq} of {ledger_path} applied run {applied.run_id} (score {applied.score_digest[:12]}...)"
            if applied is not None
            else f"commit {seq} of {ledger_path} recorded no shape"
        )
        return LedgerError(
            f"{path}: not this ledger's history part: it holds {holds}, but {did}; refusing it (a "
            "part of another ledger, restored or copied here?): move it out of the history folder"
        )

    for row in rows:
        event = events.get(
            entry_key(row.fingerprint, row.device_kind, row.numerics_profile, row.packer_identity, row.shape)
        )
        if event is None or event.run_id != row.run_id:
            raise refuse(
                f"the figures of run {row.run_id} for shape k={row.shape} (packer {row.packer_identity}, "
                f"{row.device_kind}, profile {row.numerics_profile})"
            )
    if score_digest is not None and applied is not None and {e.score_digest for e in events.values()} != {score_digest}:
        raise refuse(f"the figures of score {score_digest[:12]}... (run {rows[0].run_id if rows else '?'})")


def committed_rows(folder: Path, ledger: Ledger, ledger_path: Path | None = None) -> list[HistoryRow]:
    """The rows of the parts in ``folder`` whose seq is at most ``ledger``'s, ordered by seq, each part
    bound to ``ledger``'s commit of its seq (:func:`check_bound`)."""
    folder = Path(folder)
    ledger_seq = ledger.seq
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise LedgerError(
            f"{folder}: the ledger's history folder is a file, not a folder; move it aside (the next "
            "commit writes a new history folder there)"
        )
    parts = []
    for path in folder.iterdir():
        if is_temporary(path.name) or not path.name.endswith(".parquet"):
            continue  # a write in flight (or one a kill left), a note: never read as a part
        match = _PART.match(path.name)
        if match is None:  # DuckDB or pandas would read it as part of the table: refused, not skipped
            raise LedgerError(
                f"{path}: a Parquet file that is not a history part (<seq:08d>.parquet) in the "
                "ledger's history folder; move it elsewhere"
            )
        if int(match.group(1)) <= ledger_seq:
            parts.append((int(match.group(1)), path))
    rows: list[HistoryRow] = []
    for _, path in sorted(parts):
        rows += read_part(path, ledger, ledger_path)
    return rows


def series(
    rows: list[HistoryRow],
    *,
    shape: int,
    op: int,
    metric: str | None = None,
    device_kind: str | None = None,
    numerics_profile: str | None = None,
    packer_identity: str | None = None,
) -> list[HistoryRow]:
    """The rows of one shape and OP (and metric, device, profile, packer when given), ordered by seq."""
    picked = [
        r
        for r in rows
        if r.shape == shape
        and r.op == op
        and (metric is None or r.metric == metric)
        and (device_kind is None or r.device_kind == device_kind)
        and (numerics_profile is None or r.numerics_profile == numerics_profile)
        and (packer_identity is None or r.packer_identity == packer_identity)
    ]
    return sorted(picked, key=lambda r: r.seq)  # stable: within a seq, as written
