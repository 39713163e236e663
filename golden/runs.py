"""Run directories: the fast lane's outputs (and the exact lane's, when interleaved) per shape.

    <runs>/<run_id>/
        manifest.json           kind harness.run: shapes, mode, golden it ran against,
                                model fingerprint, environment, numeric settings, files
        exact/op{0,1,2}.parquet the exact lane of this run (when it ran interleaved)
        k2/op{0,1,2}.parquet    packed shape k = 2 (same schema as a golden: any run can
        k4/...                  be scored against any golden)
        calls.parquet           every network call, for throughput/latency/memory per shape

Written atomically like a golden: an interrupted run leaves no directory that looks complete.
"""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass
from pathlib import Path

from golden.environment import device_kind, provenance
from golden.manifest import (
    atomic_directory,
    content_id,
    file_entries,
    read_manifest,
    verify_files,
    write_manifest,
)
from golden.tables import read_calls, read_lane, write_calls, write_lane
from harness.errors import GoldenError
from harness.geometry import Geometry
from harness.ops import Op
from harness.outputs import LaneOutputs
from lanes.backend import Backend
from lanes.runner import RunPlan, RunResult

FORMAT = 1
EXACT = "exact"


def lane_dir(shape: int | str) -> str:
    return EXACT if shape == EXACT else f"k{int(shape)}"


@dataclass(eq=False)
class Run:
    path: Path
    manifest: dict
    geometry: Geometry
    lanes: dict[str, LaneOutputs]  # "exact" and/or "k2", "k4", ...
    calls: list[dict]

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def fingerprint(self) -> str:
        return self.manifest["model"]["fingerprint"]

    @property
    def shapes(self) -> list[int]:
        return [int(k) for k in self.manifest["shapes"]]

    @property
    def device_kind(self) -> str:
        return device_kind(self.manifest["environment"])


def new_run_id(shapes: tuple[int, ...]) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-k{'-'.join(str(k) for k in shapes) or 'exact'}-{secrets.token_hex(3)}"


def write_run(root: Path, result: RunResult, plan: RunPlan, backend: Backend, golden_id: str | None,
              config: dict, corpus_ids: list[str], run_id: str | None = None, extra: dict | None = None) -> Run:
    """Store one run of the lanes (atomically) and load it back, verified."""
    lanes: dict[str, LaneOutputs] = {}
    if result.exact:
        lanes[EXACT] = result.exact[0]
    for k, out in result.fast.items():
        lanes[lane_dir(k)] = out
    fields = {
        "golden_id": golden_id,
        "shapes": list(plan.shapes),
        "mode": plan.mode,
        "pad_to_fixed": plan.pad_to_fixed,
        "ops": [int(op) for op in plan.ops],
        "corpus_blocks": list(corpus_ids),
        **provenance(backend.environment()),
        "config": config,
        **(extra or {}),
    }
    return write_run_dir(Path(root), run_id or new_run_id(plan.shapes), lanes, list(result.calls), backend.geometry,
                         fields)


def write_run_dir(root: Path, run_id: str, lanes: dict[str, LaneOutputs], calls: list, geometry: Geometry,
                  fields: dict) -> Run:
    final = root / run_id
    with atomic_directory(final) as tmp:
        rows: dict[str, int] = {}
        for name, out in lanes.items():
            for file, n in write_lane(tmp / name, out, geometry).items():
                rows[f"{name}/{file}"] = n
        rows["calls.parquet"] = write_calls(tmp / "calls.parquet", calls)
        files = file_entries(tmp, rows)
        manifest = {
            "kind": "harness.run",
            "format": FORMAT,
            "run_id": run_id,
            "content_id": content_id(files),
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "lanes": sorted(lanes),
            "geometry": geometry.to_dict(),
            **fields,
            "files": files,
        }
        write_manifest(tmp, manifest)
    return load_run(final)


def merge_runs(root: Path, runs: list[Run], run_id: str | None = None) -> Run:
    """Combine shard runs (disjoint blocks, same golden/model/shapes/mode) into one run directory."""
    if not runs:
        raise GoldenError("nothing to merge: no shard runs given")
    first = runs[0]
    for r in runs[1:]:
        for key in ("golden_id", "shapes", "mode", "pad_to_fixed", "ops", "lanes"):
            if r.manifest.get(key) != first.manifest.get(key):
                raise GoldenError(f"cannot merge {r.path} with {first.path}: {key} differs "
                                  f"({r.manifest.get(key)!r} vs {first.manifest.get(key)!r})")
        if r.fingerprint != first.fingerprint:
            raise GoldenError(f"cannot merge {r.path} with {first.path}: model fingerprints differ")
    blocks = [b for r in runs for b in r.manifest["corpus_blocks"]]
    if len(set(blocks)) != len(blocks):
        dup = next(b for b in blocks if blocks.count(b) > 1)
        raise GoldenError(f"cannot merge: block {dup!r} is in more than one shard")
    lanes = {name: LaneOutputs.concat([r.lanes[name] for r in runs]) for name in first.lanes}
    calls = [c for r in runs for c in r.calls]
    fields = {k: v for k, v in first.manifest.items()
              if k not in ("kind", "format", "run_id", "content_id", "created", "lanes", "geometry", "files")}
    fields.update({"corpus_blocks": blocks, "merged_from": [r.run_id for r in runs],
                   "shards": [r.manifest.get("shard") for r in runs]})
    fields.pop("shard", None)
    return write_run_dir(Path(root), run_id or f"merged-{new_run_id(tuple(first.shapes))}", lanes, calls,
                         first.geometry, fields)


def load_run(path: str | Path) -> Run:
    path = Path(path)
    manifest = read_manifest(path, "run")
    verify_files(path, manifest)
    try:
        geometry = Geometry.from_dict(manifest["geometry"])
        ops = [Op(o) for o in manifest["ops"]]
        lane_names = list(manifest["lanes"])
    except (KeyError, TypeError, ValueError) as exc:
        raise GoldenError(f"{path}/manifest.json: incomplete run manifest ({exc})") from None
    lanes = {name: read_lane(path / name, geometry, ops, f"{path}/{name}") for name in lane_names}
    return Run(path, manifest, geometry, lanes, read_calls(path / "calls.parquet", str(path)))
