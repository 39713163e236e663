"""Run directories: every lane of one run, the exact lane always among them.

    <runs>/<run_id>/
        manifest.json           kind harness.run, sealed: shapes, lanes, mode, packer (and its
                                packing-laws verdict, judged at the start), the golden
                                (id and manifest digest) it ran against, model fingerprint,
                                environment, numeric settings, files
        exact/op{0,1,2}.parquet the run's own exact lane, interleaved with the packed shapes (the
                                golden's reproduction, and fair timing)
        k2/op{0,1,2}.parquet    packed shape k = 2 (same layout as a golden's outputs)
        calls.parquet           every network call (which blocks, cost)

Written in a temporary folder (each lane by a background writer) and renamed into place when
complete; an interrupted run leaves no directory that loads.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from golden.calls import CallLog, iter_calls
from golden.lane_reader import LaneReader
from golden.manifest import MANIFEST, check_files, read_manifest
from golden.tables import BackgroundWriter, LaneWriter
from harness.base.errors import GoldenError
from harness.base.fsio import atomic_directory, safe_name
from harness.base.jsonio import digest, dumps, seal
from harness.base.workers import SettlingPool
from harness.data.call_record import CallRecord
from harness.data.geometry import Geometry
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.parquet import RUN_COMPRESSION
from harness.data.schemas import RunManifest
from harness.data.schemas.neighbours import ControlFigures
from harness.data.shape import EXACT, Shape
from harness.host.environment import device_kind, shard_conflict

FORMAT = 2
CALLS = "calls.parquet"
# What shards must share to be merged into one run (and then one verdict).
# "laws": every shard's packer was judged on the packing laws at its start; shards whose verdicts (or
# packer identities) differ did not run the same packer, and one verdict cannot stand for both.
# "mode": the voiceprint inputs (voiceprint_inputs in code; the manifest's key is the files' contract).
# "evidence": the variant lanes (--arrangements, --repeats) and the arrangements' seed.
MERGE_KEYS = (
    "golden_id",
    "golden_manifest_sha256",
    "shapes",
    "lanes",
    "mode",
    "pad_to_fixed",
    "ops",
    "packer",
    "laws",
    "geometry",
    "numerics_profile",
    "evidence",
)


RUN_ID_SHAPES = 40  # characters of a run id that list its shapes; past them, the first ones and a count


def new_run_id(shapes: Sequence[int]) -> str:
    """``<UTC time>-k2-4-8-<6 hex>``: when, which shapes, unique. A run id is a folder name (at most 100
    characters), never a limit on the shapes: a long list is cut to its first shapes and how many it holds
    (``k2-3-4-5-6-and-25-more``); the run's manifest lists them all."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    ks = "-".join(str(k) for k in shapes) or "exact"
    if len(ks) > RUN_ID_SHAPES:
        shown: list[str] = []
        for k in shapes:
            if len("-".join([*shown, str(k)])) > RUN_ID_SHAPES - 16:
                break
            shown.append(str(k))
        ks = f"{'-'.join(shown)}-and-{len(shapes) - len(shown)}-more"
    return f"{stamp}-k{ks}-{secrets.token_hex(3)}"


def blocks_digest(block_ids: Sequence[str]) -> str:
    return digest(list(block_ids))


class RunWriter:
    """A run directory being written: a background writer per lane, then calls and the sealed manifest.

    Use as a context manager; :meth:`finish` renames it into place, any failure removes it."""

    def __init__(self, root: Path, run_id: str, geometry: Geometry, ops: Sequence[Op], lanes: Sequence[str]) -> None:
        self.final = Path(root) / safe_name(run_id, "run id")
        self.run_id, self.g, self.ops, self.lanes = run_id, geometry, list(ops), list(lanes)
        self._context = atomic_directory(self.final)
        self.tmp = self._context.__enter__()
        self.writers: dict[str, BackgroundWriter] = {}
        self.block_ids: list[str] = []
        self.calls: CallLog | None = None
        self._done = False
        try:
            self.calls = CallLog(self.tmp / CALLS)  # the runner appends every call here, as it makes it
            for lane in self.lanes:
                self.writers[lane] = BackgroundWriter(
                    LaneWriter(self.tmp / lane, geometry, self.ops, decisions=False, compression=RUN_COMPRESSION)
                )
        except BaseException as exc:
            self._fail(exc)
            raise

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if not self._done:
            self._fail(exc or RuntimeError("run not finished"))

    def sink(self, lane: str, batch: LaneOutputs) -> None:
        """Take one group's outputs of one lane (the runner's sink)."""
        if lane not in self.writers:
            raise GoldenError(f"run {self.run_id}: no lane {lane!r} (lanes {self.lanes})")
        if lane == EXACT:
            self.block_ids += batch.block_ids
        self.writers[lane].write(batch)

    def finish(self, fields: dict) -> Path:
        """Close every lane and the call log, write the sealed manifest, rename into place."""
        assert self.calls is not None
        files: dict[str, dict] = {}
        # every lane at once: a file's close ends in its fsync, which waits for the disk with the GIL released
        # (one after the other, 18 fsyncs of 20-150 ms were 0.76 s after the last call at N = 256)
        with SettlingPool(max(1, len(self.writers)), "run-close") as pool:
            closed = {lane: pool.submit(writer.close) for lane, writer in self.writers.items()}
        for lane, done in closed.items():
            for name, entry in done.result().items():  # a lane's failure is raised here, in lane order
                files[f"{lane}/{name}"] = entry
        files[CALLS] = self.calls.close()
        manifest = seal(
            {
                "kind": "harness.run",
                "format": FORMAT,
                "run_id": self.run_id,
                "created": dt.datetime.now(dt.UTC).isoformat(timespec="microseconds"),
                "geometry": self.g.to_dict(),
                "ops": [int(op) for op in self.ops],
                "lanes": sorted(self.lanes),
                "blocks": len(self.block_ids),
                "blocks_sha256": blocks_digest(self.block_ids),
                **fields,
                "files": files,
            },
            "manifest_sha256",
        )
        (self.tmp / MANIFEST).write_text(dumps(manifest, indent=2) + "\n")
        self._done = True
        self._context.__exit__(None, None, None)
        return self.final

    def _fail(self, exc: BaseException) -> None:
        self._done = True
        for writer in self.writers.values():
            writer.abort()
        if self.calls is not None:
            self.calls.abort()
        self._context.__exit__(type(exc), exc, None)


@dataclass(eq=False)
class Run:
    path: Path
    manifest: RunManifest
    geometry: Geometry
    trusted: bool = False  # written by this process just now: its files need no second hash
    _lanes: dict[str, LaneReader] = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def fingerprint(self) -> str:
        return self.manifest.model.fingerprint

    @property
    def shapes(self) -> list[Shape]:
        return list(self.manifest.shapes)

    @property
    def golden_id(self) -> str:
        return self.manifest.golden_id

    @property
    def device_kind(self) -> str:
        return device_kind(self.manifest.environment.device_name)

    @property
    def ops(self) -> list[Op]:
        return [Op(o) for o in self.manifest.ops]

    def lane(self, name: str) -> LaneReader:
        if name not in self._lanes:
            self.open_lanes([name])
        return self._lanes[name]

    def open_lanes(self, names: Sequence[str]) -> None:
        """Check (hash, unless trusted) and open these lanes, their files hashed all at once."""
        for name in names:
            if name not in self.manifest.lanes:
                raise GoldenError(f"{self.path}: run has no lane {name!r} (lanes {self.manifest.lanes})")
        todo = [n for n in dict.fromkeys(names) if n not in self._lanes]
        if not todo:
            return
        files = [] if self.trusted else [f for f in self.manifest.files if f.split("/")[0] in todo]
        check_files(self.path, self.manifest.files, hashed=files)
        for name in todo:
            self._lanes[name] = LaneReader(
                self.path / name, self.geometry, self.ops, decisions=False, where=f"run {self.path} lane {name}"
            )

    def block_ids(self) -> list[str]:
        ids = self.lane(EXACT).block_ids()
        if blocks_digest(ids) != self.manifest.blocks_sha256 or len(ids) != self.manifest.blocks:
            raise GoldenError(f"{self.path}/exact: its blocks are not the ones the manifest lists")
        return ids

    def calls(self) -> list[CallRecord]:
        return list(self.iter_calls())

    def iter_calls(self) -> Iterator[CallRecord]:
        """Every call, row group by row group (the log of a large corpus is never held whole)."""
        check_files(self.path, self.manifest.files, hashed=[] if self.trusted else [CALLS])
        return iter_calls(self.path / CALLS, str(self.path))


def load_run(path: str | Path, trusted: bool = False) -> Run:
    path = Path(path)
    manifest = read_manifest(path, "run", RunManifest)
    check_files(path, manifest.files)
    for lane in manifest.lanes:
        for op in manifest.ops:
            if f"{lane}/op{op}.parquet" not in manifest.files:
                raise GoldenError(f"{path}/{MANIFEST}: lane {lane!r} lists no op{op}.parquet")
    if CALLS not in manifest.files:
        raise GoldenError(f"{path}/{MANIFEST}: lists no {CALLS}")
    return Run(path, manifest, Geometry(**manifest.geometry.model_dump(mode="json")), trusted)


def merge_conflict(a: Run, b: Run) -> str | None:
    """Why two shard runs cannot be one run (None when they can): everything that could change the
    outputs must be the same, and so must the golden they ran against."""
    first, second = a.manifest.model_dump(mode="json"), b.manifest.model_dump(mode="json")
    for key in MERGE_KEYS:
        if first.get(key) != second.get(key):
            return f"{key} differs ({first.get(key)!r} vs {second.get(key)!r})"
    if a.fingerprint != b.fingerprint:
        return f"model fingerprints differ ({a.fingerprint[:16]}... vs {b.fingerprint[:16]}...)"
    return shard_conflict(a.device_kind, first, b.device_kind, second)


def block_owners(shards: Sequence) -> dict:
    """Which shard (a run or a golden) holds each block id; a block in two shards refuses the merge."""
    owner: dict = {}
    for shard in shards:
        for b in shard.block_ids():
            if b in owner:
                raise GoldenError(f"cannot merge: block {b!r} is in {owner[b].path} and {shard.path}")
            owner[b] = shard
    return owner


def merge_runs(root: Path, runs: list[Run], order: Sequence[str], run_id: str | None = None) -> Run:
    """Combine shard runs (disjoint blocks, everything else equal) into one run, in ``order``."""
    if not runs:
        raise GoldenError("nothing to merge: no shard runs given")
    first = runs[0]
    for r in runs[1:]:
        why = merge_conflict(first, r)
        if why:
            raise GoldenError(f"cannot merge {r.path} with {first.path}: {why}")
    owner = block_owners(runs)
    missing = [b for b in order if b not in owner]
    if missing:
        raise GoldenError(
            f"shards do not cover the corpus: {len(missing)} block(s) missing, first {missing[0]!r} "
            "(did every shard i/n run?)"
        )
    lanes = list(first.manifest.lanes)
    writer = RunWriter(Path(root), run_id or f"merged-{new_run_id(first.shapes)}", first.geometry, first.ops, lanes)
    with writer:
        step = 32
        for start in range(0, len(order), step):
            ids = list(order[start : start + step])
            for lane in lanes:
                parts = []
                for r in runs:
                    mine = [b for b in ids if owner[b] is r]
                    if mine:
                        parts.append(r.lane(lane).select(mine))
                batch = LaneOutputs.concat(parts) if len(parts) > 1 else parts[0]
                writer.sink(lane, batch.select(ids))
        assert writer.calls is not None  # the constructor opens it or raises
        for r in runs:
            writer.calls.extend(r.iter_calls())
        fields = {
            k: v
            for k, v in first.manifest.model_dump(mode="json").items()
            if k
            not in (
                "kind",
                "format",
                "run_id",
                "created",
                "geometry",
                "ops",
                "lanes",
                "blocks",
                "blocks_sha256",
                "files",
                "manifest_sha256",
                "shard",
                "merged_from",
                "lanes_wall_s",
                "neighbour_controls",
            )
        }  # one shard's wall is not the merged run's: absent
        merged = {**fields, "merged_from": [r.run_id for r in runs]}
        controls = merged_controls(runs)  # every shard's control repeats, counted together (none: the key is absent)
        path = writer.finish(merged | {"neighbour_controls": controls} if controls else merged)
    return load_run(path, trusted=True)


def merged_controls(runs: Sequence[Run]) -> dict[str, dict[str, dict]]:
    """The shards' neighbour control repeats as one run's: per shape and OP, counts summed, figures the worst."""
    parts: dict[tuple[str, str], list[ControlFigures]] = {}
    op: str
    for r in runs:
        for k, per_op in (r.manifest.neighbour_controls or {}).items():
            for op, figures in per_op.items():
                parts.setdefault((k, op), []).append(figures)
    out: dict[str, dict[str, dict]] = {}
    for (k, op), found in sorted(parts.items()):
        out.setdefault(k, {})[op] = ControlFigures.merged(found).model_dump(mode="json")
    return out
