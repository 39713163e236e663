"""Recording, loading and verifying goldens.

A golden is one directory per release::

    <root>/<release>/
        manifest.json     sha256 of every file, row counts, model fingerprint, geometry,
                          harness/torch/numpy/pyarrow versions, device (CUDA, cuDNN, driver),
                          numeric settings in force, the release config, reproducibility
        corpus.parquet    the corpus used (harness.corpus schema)
        op0.parquet       exact-lane segmentation      (golden.tables documents the columns)
        op1.parquet       exact-lane voiceprints, with the WEIGHTS/IDX they were called with
        op2.parquet
        calls.parquet     every network call: lane, shape, OP, bytes, wall time, peak memory

Recording runs the exact lane twice, interleaved block by block, and stores whether it
reproduced bitwise and, if not, its noise floor per OP. Nothing is ever overwritten: a
second recording of the same release needs ``regen=True`` and lands beside the first, with
a summary of what changed (as pytest-regressions does).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from golden.environment import device_kind, differences, machine_environment, provenance
from golden.manifest import (
    atomic_directory,
    content_id,
    file_entries,
    read_manifest,
    verify_files,
    write_manifest,
)
from golden.tables import read_calls, read_lane, write_calls, write_lane
from harness.corpus.schema import Corpus, read_corpus, write_corpus
from harness.errors import GoldenError
from harness.geometry import Geometry
from harness.masks import VoiceprintRows
from harness.ops import ALL_OPS, Op
from harness.outputs import LaneOutputs
from harness.scoring import compare_segmentation, compare_voiceprint
from lanes.backend import Backend
from lanes.runner import Progress, RunPlan, run_lanes

FORMAT = 1


@dataclass(eq=False)
class Golden:
    path: Path
    manifest: dict
    geometry: Geometry
    corpus: Corpus
    outputs: LaneOutputs

    @property
    def golden_id(self) -> str:
        return self.manifest["golden_id"]

    @property
    def fingerprint(self) -> str:
        return self.manifest["model"]["fingerprint"]

    @property
    def release(self) -> str:
        return self.manifest["release"]

    @property
    def device_kind(self) -> str:
        return device_kind(self.manifest["environment"])

    def noise_floor(self, op: Op) -> dict | None:
        return self.manifest.get("reproducibility", {}).get("ops", {}).get(str(int(op)))

    def voiceprint_inputs(self) -> dict[Op, dict[str, VoiceprintRows]]:
        return {op: v.inputs() for op, v in self.outputs.voiceprint.items()}

    def subset(self, block_ids: list[str]) -> Golden:
        """The same golden restricted to some blocks (a shard); files are not touched."""
        pos = {b: i for i, b in enumerate(self.corpus.ids)}
        unknown = [b for b in block_ids if b not in pos]
        if unknown:
            raise GoldenError(f"{self.path}: golden has no block {unknown[0]!r}")
        corpus = self.corpus.subset([pos[b] for b in block_ids])
        manifest = {**self.manifest, "corpus": corpus.summary()}
        return Golden(self.path, manifest, self.geometry, corpus, self.outputs.select(list(block_ids)))


def golden_path(root: Path, release: str) -> Path:
    return Path(root) / release


def record_golden(
    root: Path,
    release: str,
    corpus: Corpus,
    backend: Backend,
    plan: RunPlan,
    config: dict,
    regen: bool = False,
    progress: Progress | None = None,
) -> tuple[Golden, dict | None]:
    """Run the exact lane twice over ``corpus`` and store the golden atomically.

    Returns the golden and, with ``regen``, a summary of how it differs from the previous one.
    """
    final = golden_path(root, release)
    previous = None
    if final.exists():
        if not regen:
            raise GoldenError(f"{final}: a golden for release {release!r} exists; record with --regen to write a "
                              "new one beside it (nothing is overwritten)")
        previous = final
        final = final.with_name(f"{release}.regen-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S%fZ')}")
    plan = RunPlan(shapes=(), release_shapes=plan.release_shapes, mode=plan.mode, include_exact=True,
                   exact_repeats=2, ops=plan.ops, mask_policy=plan.mask_policy)
    result = run_lanes(corpus.blocks, backend, plan, progress=progress)
    first, second = result.exact
    _refuse_non_finite(first)
    repro = reproducibility(first, second, backend.geometry)
    with atomic_directory(final) as tmp:
        write_corpus(tmp / "corpus.parquet", corpus, backend.geometry)
        rows = write_lane(tmp, first, backend.geometry)
        rows["calls.parquet"] = write_calls(tmp / "calls.parquet", result.calls)
        rows["corpus.parquet"] = len(corpus)
        files = file_entries(tmp, rows)
        manifest = {
            "kind": "harness.golden",
            "format": FORMAT,
            "release": release,
            "golden_id": f"{release}@{content_id(files)}",
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "geometry": backend.geometry.to_dict(),
            **provenance(backend.environment()),
            "config": config,
            "ops": [int(op) for op in plan.ops],
            "mode": plan.mode,
            "corpus": corpus.summary(),
            "reproducibility": repro,
            "files": files,
        }
        write_manifest(tmp, manifest)
    golden = load_golden(final)
    changes = summarize_changes(load_golden(previous), golden) if previous is not None else None
    return golden, changes


def load_golden(path: str | Path, expect_fingerprint: str | None = None) -> Golden:
    """Load a golden, checking every sha256, every schema and (if given) the model fingerprint."""
    path = Path(path)
    manifest = read_manifest(path, "golden")
    verify_files(path, manifest)
    if expect_fingerprint is not None and manifest["model"]["fingerprint"] != expect_fingerprint:
        raise GoldenError(
            f"{path}: golden of another model: recorded with fingerprint {manifest['model']['fingerprint'][:16]}... "
            f"({manifest['model'].get('name', '?')}), this model is {expect_fingerprint[:16]}..."
        )
    try:
        geometry = Geometry.from_dict(manifest["geometry"])
        ops = [Op(o) for o in manifest.get("ops", [int(o) for o in ALL_OPS])]
    except (KeyError, TypeError, ValueError) as exc:
        raise GoldenError(f"{path}/manifest.json: bad geometry or ops ({exc})") from None
    corpus = read_corpus(path / "corpus.parquet", geometry)
    outputs = read_lane(path, geometry, ops, str(path))
    if outputs.segmentation.block_ids != corpus.ids:
        raise GoldenError(f"{path}/op0.parquet: blocks do not match corpus.parquet")
    for name, entry in manifest["files"].items():
        if entry.get("rows") is not None and name.startswith("op"):
            have = outputs.segmentation.logprobs.shape[0] * geometry.windows_per_block if name == "op0.parquet" \
                else outputs.voiceprint[Op(int(name[2]))].rows
            if have != entry["rows"]:
                raise GoldenError(f"{path / name}: {have} rows, manifest says {entry['rows']}")
    return Golden(path, manifest, geometry, corpus, outputs)


def reproducibility(first: LaneOutputs, second: LaneOutputs, geometry: Geometry) -> dict:
    """How the exact lane differs from itself: bitwise per OP, else its noise floor."""
    ops = {}
    seg = compare_segmentation(first.segmentation, second.segmentation, geometry, near_tie_margin=0.0).totals()
    ops["0"] = {"bitwise": seg["bitwise"], "max_abs": seg["max_abs"], "max_ulp": seg["max_ulp"],
                "argmax_flips": seg["argmax_flips_near_tie"] + seg["argmax_flips_confident"]}
    for op, vp in first.voiceprint.items():
        t = compare_voiceprint(vp, second.voiceprint[op], geometry).totals()
        ops[str(int(op))] = {"bitwise": t["bitwise"], "max_abs": t["max_abs"], "max_ulp": t["max_ulp"],
                             "min_cosine": t["min_cosine"], "max_rel_l2": t["max_rel_l2"]}
    return {"repeats": 2, "bitwise": all(v["bitwise"] for v in ops.values()), "ops": ops}


def verify_golden(golden: Golden, backend: Backend, plan: RunPlan, progress: Progress | None = None) -> dict:
    """Re-run the exact lane and compare with the golden (bitwise expected on the same setup)."""
    rerun = run_lanes(golden.corpus.blocks, backend,
                      RunPlan(shapes=(), release_shapes=plan.release_shapes, mode=plan.mode, include_exact=True,
                              ops=tuple(Op(o) for o in golden.manifest["ops"]), mask_policy=plan.mask_policy),
                      voiceprint_inputs=golden.voiceprint_inputs(), progress=progress)
    env = backend.environment()
    return verification(golden, rerun.exact[0], backend.fingerprint, machine_environment(env),
                        env.get("numerics_in_force") or {})


def verification(golden: Golden, exact: LaneOutputs, fingerprint: str, env_now: dict, numerics_now: dict) -> dict:
    """Compare an exact-lane rerun with the golden; name what differs in the environment."""
    geometry = golden.geometry
    ops = {}
    seg = compare_segmentation(golden.outputs.segmentation, exact.segmentation, geometry, 0.0).totals()
    ops["0"] = {"bitwise": seg["bitwise"], "max_abs": seg["max_abs"], "max_ulp": seg["max_ulp"]}
    for op, vp in golden.outputs.voiceprint.items():
        t = compare_voiceprint(vp, exact.voiceprint[op], geometry).totals()
        ops[str(int(op))] = {"bitwise": t["bitwise"], "max_abs": t["max_abs"], "max_ulp": t["max_ulp"],
                             "min_cosine": t["min_cosine"]}
    env_diff = differences(golden.manifest["environment"], env_now)
    numerics_then = golden.manifest.get("numerics", {}).get("in_force") or {}
    env_diff += [f"numerics.{k}: {numerics_then.get(k)!r} -> {numerics_now.get(k)!r}"
                 for k in sorted(set(numerics_then) | set(numerics_now)) if numerics_then.get(k) != numerics_now.get(k)]
    same_setup = fingerprint == golden.fingerprint and not env_diff
    bitwise = all(v["bitwise"] for v in ops.values())
    reproducible = golden.manifest.get("reproducibility", {}).get("bitwise", True)
    within_floor = all(
        v["max_abs"] <= (golden.noise_floor(Op(int(k))) or {}).get("max_abs", 0.0) for k, v in ops.items()
    )
    if bitwise:
        status, passed = "bitwise", True
    elif not reproducible and within_floor:
        status, passed = "within-noise-floor", True  # the golden itself was not bitwise-reproducible
    elif same_setup:
        status, passed = "failed", False
    else:
        status, passed = "drift", False
    return {"golden_id": golden.golden_id, "status": status, "passed": passed, "bitwise": bitwise,
            "same_setup": same_setup, "ops": ops, "environment_differences": env_diff,
            "fingerprint_matches": fingerprint == golden.fingerprint,
            "golden_reproducible": reproducible}


def describe_verification(v: dict) -> str:
    """One line for people and CI logs."""
    worst = max(v["ops"].items(), key=lambda kv: kv[1]["max_abs"])
    if v["status"] == "bitwise":
        return f"golden {v['golden_id']}: reproduced bitwise"
    if v["status"] == "within-noise-floor":
        return (f"golden {v['golden_id']}: reproduced within its recorded noise floor "
                f"(max_abs {worst[1]['max_abs']:.3g})")
    detail = f"OP {worst[0]} max_abs {worst[1]['max_abs']:.3g}, max_ulp {worst[1]['max_ulp']}"
    if v["status"] == "failed":
        return f"golden {v['golden_id']}: NOT reproduced on the same model and environment ({detail})"
    why = "; ".join(v["environment_differences"]) or "model fingerprint differs"
    return f"golden {v['golden_id']}: drift ({detail}); what differs: {why}"


def summarize_changes(old: Golden, new: Golden) -> dict:
    """What a regenerated golden changes, per OP (for the --regen summary)."""
    out = {"old": old.golden_id, "new": new.golden_id, "fingerprint_changed": old.fingerprint != new.fingerprint,
           "environment": differences(old.manifest["environment"], new.manifest["environment"]), "ops": {}}
    if old.corpus.ids != new.corpus.ids:
        out["corpus_changed"] = True
        return out
    seg = compare_segmentation(old.outputs.segmentation, new.outputs.segmentation, new.geometry, 0.1).totals()
    out["ops"]["0"] = {k: seg[k] for k in ("bitwise", "max_abs", "max_ulp", "argmax_flips_near_tie",
                                           "argmax_flips_confident")}
    for op, vp in new.outputs.voiceprint.items():
        if op in old.outputs.voiceprint:
            t = compare_voiceprint(old.outputs.voiceprint[op], vp, new.geometry).totals()
            out["ops"][str(int(op))] = {k: t[k] for k in ("bitwise", "max_abs", "min_cosine", "missing_rows",
                                                           "extra_rows")}
    return out


def golden_calls(golden: Golden) -> list[dict]:
    return read_calls(golden.path / "calls.parquet", str(golden.path))


def _refuse_non_finite(outputs: LaneOutputs) -> None:
    seg = outputs.segmentation
    bad = ~np.isfinite(seg.logprobs).all(axis=(2, 3))
    if bad.any():
        b, w = (int(v) for v in np.argwhere(bad)[0])
        raise GoldenError(f"refusing to record a golden: OP 0 output of block {seg.block_ids[b]!r} window {w} "
                          "holds NaN/Inf")
    for op, vp in outputs.voiceprint.items():
        bad_rows = np.flatnonzero(~np.isfinite(vp.embedding).all(axis=1))
        if bad_rows.size:
            i = int(bad_rows[0])
            raise GoldenError(f"refusing to record a golden: OP {int(op)} embedding of block {vp.block_ids[i]!r} "
                              f"window {int(vp.window[i])} speaker {int(vp.speaker[i])} holds NaN/Inf")
