"""Goldens: one directory per release, stored and loaded, never produced here.

    <root>/<release>/
        manifest.json     sealed (manifest_sha256) record: files with sha256 and rows, model
                          fingerprint, geometry, environment, numerics, config, corpus summary,
                          the exact lane's reproducibility (noise floor)
        corpus.parquet    the corpus used (harness.corpus schema); scoring never opens it
        op0.parquet       exact-lane segmentation   (golden.tables documents the layout)
        op1.parquet       exact-lane voiceprints, with the WEIGHTS/IDX they were called with
        op2.parquet
        calls.parquet     every network call: lane, shape, OP, bytes, wall time, blocks

Recording (running the exact lane twice and judging its reproducibility) is the pipeline's job
(:mod:`harness.pipeline.record`); this module only writes what it is given and loads it back.
The golden id is re-derived from the manifest on every load: ``<release>@<12 hex>`` of the
manifest's own canonical digest, so an edited manifest cannot keep its id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from golden.adoption import refuse_mid_adoption
from golden.calls import iter_calls
from golden.lane_reader import LaneReader
from golden.locate import refuse_folder_of_goldens
from golden.manifest import MANIFEST, PendingHashes, check_files, read_manifest
from golden.tables import LaneWriter
from harness.base.errors import GoldenError
from harness.base.fsio import safe_name
from harness.base.jsonio import digest, dumps, seal
from harness.data.call_record import CallRecord
from harness.data.corpus_reader import CorpusReader
from harness.data.geometry import Geometry
from harness.data.masks import VoiceprintRows
from harness.data.ops import Op
from harness.data.schemas import GoldenManifest
from harness.host.environment import device_kind

FORMAT = 2
CORPUS = "corpus.parquet"
CALLS = "calls.parquet"
OUTPUT_FILES = ("op0.parquet", "op1.parquet", "op2.parquet")


def golden_path(root: Path, release: str) -> Path:
    return Path(root) / safe_name(release, "release name")


def golden_id_of(manifest: dict) -> str:
    body = {k: v for k, v in manifest.items() if k not in ("golden_id", "manifest_sha256")}
    return f"{manifest['release']}@{digest(body)[:12]}"  # over the JSON as written (or read), by its key names


def seal_golden_manifest(fields: dict, files: dict[str, dict]) -> dict:
    """The manifest of a golden: ``fields`` (provenance, corpus, reproducibility, ...) plus the
    files' entries, its golden id and its seal."""
    manifest = {
        "kind": "harness.golden",
        "format": FORMAT,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **fields,
        "files": files,
    }
    manifest["golden_id"] = golden_id_of(manifest)  # the JSON being sealed: its id is its content's
    return seal(manifest, "manifest_sha256")


def write_manifest(directory: Path, manifest: dict) -> None:
    (Path(directory) / MANIFEST).write_text(dumps(manifest, indent=2) + "\n")


def new_lane_writer(directory: Path, geometry: Geometry, ops: list[Op]) -> LaneWriter:
    """The writer of a golden's outputs (with the per-frame decisions scoring reads back)."""
    return LaneWriter(directory, geometry, ops, decisions=True)


@dataclass(eq=False)
class Golden:
    """A loaded golden: its manifest now, its files when asked (each hashed on first use)."""

    path: Path
    manifest: GoldenManifest
    geometry: Geometry
    _outputs: LaneReader | None = field(default=None, repr=False)

    @property
    def golden_id(self) -> str:
        return self.manifest.golden_id

    @property
    def manifest_sha256(self) -> str:
        return self.manifest.manifest_sha256

    @property
    def fingerprint(self) -> str:
        return self.manifest.model.fingerprint

    @property
    def release(self) -> str:
        return self.manifest.release

    @property
    def device_kind(self) -> str:
        return device_kind(self.manifest.environment.device_name)

    @property
    def ops(self) -> list[Op]:
        return [Op(o) for o in self.manifest.ops]

    @property
    def blocks(self) -> int:
        return self.manifest.corpus.blocks

    def floors(self) -> dict[int, dict]:
        """Each OP's noise floor, as the JSON the judges' limits take."""
        return {int(k): v.model_dump(mode="json") for k, v in self.manifest.reproducibility.ops.items()}

    def outputs(self) -> LaneReader:
        """The exact lane's outputs (files hashed and checked the first time)."""
        if self._outputs is None:
            names = [n for n in self.manifest.files if n in OUTPUT_FILES]
            check_files(self.path, self.manifest.files, hashed=names)
            self._outputs = LaneReader(self.path, self.geometry, self.ops, decisions=True, where=f"golden {self.path}")
            ids = self._outputs.block_ids()
            if len(ids) != self.blocks:
                raise GoldenError(
                    f"{self.path}/op0.parquet: {len(ids)} blocks, the manifest's corpus has {self.blocks}"
                )
        return self._outputs

    def block_ids(self) -> list[str]:
        return self.outputs().block_ids()

    def corpus(self) -> CorpusReader:
        """The corpus the golden was recorded on (hashed first; only lanes that run need it)."""
        check_files(self.path, self.manifest.files, hashed=[CORPUS])
        return self._corpus_reader()

    def corpus_hashed_meanwhile(self, verified: bool = False) -> tuple[CorpusReader, PendingHashes]:
        """The corpus, its sha256 computed in a thread while it is read (the file is the golden's
        largest: hashing it first would add a pass): call ``wait()`` on the second value before
        keeping anything made from it. ``verified``: the caller hashed it already (a Ray driver,
        once for all its shards), so it is not hashed again."""
        check_files(self.path, self.manifest.files)
        return self._corpus_reader(), PendingHashes(self.path, self.manifest.files, [] if verified else [CORPUS])

    def _corpus_reader(self) -> CorpusReader:
        reader = CorpusReader(self.path / CORPUS, self.geometry)
        if len(reader) != self.blocks:
            raise GoldenError(f"{self.path / CORPUS}: {len(reader)} blocks, the manifest says {self.blocks}")
        return reader

    def calls(self) -> list[CallRecord]:
        return list(self.iter_calls())

    def iter_calls(self) -> Iterator[CallRecord]:
        """Every call, row group by row group."""
        check_files(self.path, self.manifest.files, hashed=[CALLS])
        return iter_calls(self.path / CALLS, str(self.path))

    def voiceprint_inputs(self, block_ids: list[str]) -> dict[Op, dict[str, VoiceprintRows]]:
        """The WEIGHTS/IDX each of these blocks was called with (isolated mode replays them)."""
        return {op: v.inputs() for op, v in self.outputs().select_voiceprints(block_ids).items()}


def load_golden(path: str | Path, expect_fingerprint: str | None = None) -> Golden:
    """Load a golden's manifest (schema, seal, golden id, file sizes, model fingerprint)."""
    path = Path(path)
    refuse_folder_of_goldens(path)  # `goldens`, the folder of goldens: named as such, listing them
    manifest = read_manifest(path, "golden", GoldenManifest, derived=_refuse_edited_id)
    refuse_mid_adoption(path, manifest.golden_id)  # the old golden, left at a regen's name by a killed adopt
    missing = [
        n for n in ("op0.parquet", CORPUS, CALLS, *(f"op{o}.parquet" for o in manifest.ops)) if n not in manifest.files
    ]
    if missing:
        raise GoldenError(f"{path}/{MANIFEST}: lists no {missing[0]}")
    check_files(path, manifest.files)
    if expect_fingerprint is not None and manifest.model.fingerprint != expect_fingerprint:
        raise GoldenError(
            f"{path}: golden of another model: recorded with fingerprint {manifest.model.fingerprint[:16]}... "
            f"({manifest.model.name}), this model is {expect_fingerprint[:16]}...: give the command "
            "the model it was recorded with (--model and --set model.seed=N, or the config's [model]; "
            "`harness golden show` names it), "
            "or record a golden of this model"
        )
    return Golden(path, manifest, Geometry(**manifest.geometry.model_dump(mode="json")))


def _refuse_edited_id(path: Path, data: dict, manifest: GoldenManifest) -> None:
    """A golden id is its content's: one that is not was edited (and the manifest re-sealed). ``data`` is the
    manifest's JSON as read: the id is computed over that JSON."""
    if golden_id_of(data) != manifest.golden_id:
        raise GoldenError(
            f"{path}: golden_id {manifest.golden_id!r} is not the one its content "
            f"derives ({golden_id_of(data)!r}): the manifest was edited"
        )
