"""Goldens recorded in shards (``golden record --ray``) merged into the one golden a single process records.

Each shard golden holds the exact lane's outputs of its blocks, its calls and its own noise floor
(the exact lane run twice over its blocks). Merged: the staged corpus copied in its order, the
outputs in corpus order, every call, and the worst of the floors (:func:`merge_noise_floors`; the per-module
ones: :func:`harness.localisation.module_floors.merge_module_floors`);
provenance from the shards, which must agree on everything that could change the outputs (model,
geometry, configuration, device kind, library versions, numeric settings), or the merge is refused
naming the difference, as shard runs are (:func:`golden.runs.merge_conflict`).
"""

from __future__ import annotations

from pathlib import Path

from golden.calls import write_calls
from golden.runs import block_owners
from golden.store import CALLS, CORPUS, Golden, load_golden, new_lane_writer, seal_golden_manifest, write_manifest
from golden.tables import BackgroundWriter
from harness.base.errors import GoldenError, short
from harness.base.fsio import atomic_directory
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import CorpusWriter
from harness.data.masks import MaskPolicy
from harness.data.outputs import LaneOutputs
from harness.host.environment import shard_conflict
from harness.judging.reproduction import merge_noise_floors
from harness.localisation.module_floors import merge_module_floors
from harness.pipeline.golden_counts import refuse_unjudgeable

# What shard goldens must share (besides the environment's numeric keys and the numerics in force).
SAME_KEYS = ("release", "geometry", "model", "config", "ops", "mode", "backend")
# Manifest keys the merge writes anew.
OWN_KEYS = (
    "kind",
    "format",
    "created",
    "files",
    "golden_id",
    "manifest_sha256",
    "corpus",
    "reproducibility",
    "module_floors",
)
STEP = 32


def golden_conflict(a: Golden, b: Golden) -> str | None:
    """Why two shard goldens cannot be one golden (None when they can)."""
    first, second = a.manifest.model_dump(mode="json"), b.manifest.model_dump(mode="json")
    for key in SAME_KEYS:
        if first.get(key) != second.get(key):
            return f"{key} differs ({short(first.get(key), 120)} vs {short(second.get(key), 120)})"
    return shard_conflict(a.device_kind, first, b.device_kind, second)


def merge_goldens(final: Path, parts: list[Golden], corpus: Path) -> Golden:
    """One golden at ``final`` from shard goldens covering ``corpus`` (the staged, validated corpus)."""
    if not parts:
        raise GoldenError("nothing to merge: no shard goldens given")
    first = parts[0]
    for g in parts[1:]:
        why = golden_conflict(first, g)
        if why:
            raise GoldenError(f"cannot merge shard golden {g.path} with {first.path}: {why}")
    owner = block_owners(parts)
    reader = CorpusReader(corpus, first.geometry)
    order = reader.ids()
    missing = [b for b in order if b not in owner]
    if missing or len(owner) != len(order):
        what = f"first {missing[0]!r} missing" if missing else "they hold blocks the corpus does not"
        raise GoldenError(
            f"shard goldens do not cover the corpus {corpus} ({len(owner)} of {len(order)} blocks; {what})"
        )
    with atomic_directory(final) as tmp:
        with CorpusWriter(tmp / CORPUS, first.geometry) as writer:
            for row in reader.rows():
                writer.add(*row)
            summary = writer.close()
        assert writer.entry is not None  # close() sets it
        files = {CORPUS: writer.entry}
        outputs = BackgroundWriter(new_lane_writer(tmp, first.geometry, first.ops))
        try:
            for start in range(0, len(order), STEP):
                ids = order[start : start + STEP]
                pieces = [
                    g.outputs().select([b for b in ids if owner[b] is g])
                    for g in parts
                    if any(owner[b] is g for b in ids)
                ]
                batch = LaneOutputs.concat(pieces) if len(pieces) > 1 else pieces[0]
                outputs.write(batch.select(ids))
        except BaseException:
            outputs.abort()
            raise
        files.update(outputs.close())
        files[CALLS] = write_calls(tmp / CALLS, (c for g in parts for c in g.iter_calls()))
        # the manifest holds the configuration as its JSON; its masks table is typed here
        masks = MaskPolicy.model_validate(first.manifest.config.get("masks") or {})
        refuse_unjudgeable(files, summary, first.ops, masks, first.geometry)
        # the floors as their manifest JSON: what the merges take, and what they give is written
        floors = [g.manifest.reproducibility.model_dump(mode="json") for g in parts]
        module_floors = [
            None if f is None else f.model_dump(mode="json") for f in (g.manifest.module_floors for g in parts)
        ]
        fields = {  # the manifest's JSON: the first shard's provenance, then what the merge writes anew
            **{k: v for k, v in first.manifest.model_dump(mode="json").items() if k not in OWN_KEYS},
            "corpus": summary.model_dump(),
            "reproducibility": merge_noise_floors(floors),
            **merge_module_floors(module_floors),
        }
        write_manifest(tmp, seal_golden_manifest(fields, files))
    return load_golden(final)
