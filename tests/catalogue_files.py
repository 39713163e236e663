"""Catalogue cases, one per bad file: every kind of file the harness reads, broken one way each.

Golden and run manifests, score, ledger, promoted-shapes manifest, localisation file,
configuration, corpus metadata, corpus rows and provenance, WAV files, and the Parquet output
files of goldens and runs (op files, calls.parquet), forged with care where a careless edit would
be caught by a digest first.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests.catalogue_setups import (
    CFG,
    CSHOW,
    GM,
    PROMOTE,
    QUIET,
    REPORT,
    SCORE,
    SHOW,
    case,
    copy,
    corpus_meta,
    del_key,
    first_entry,
    flip_byte,
    flip_page_byte,
    forge_golden_file,
    forge_run_file,
    json_file,
    manifest_edit,
    remove,
    rewrite_parquet,
    row0,
    run_dir,
    run_manifest_edit,
    set_column,
    set_key,
    text_file,
    truncate,
    wav_bytes,
)

# ---------------------------------------------------------------------------- golden manifest
K = "golden manifest"
case(K, "a-list", SHOW, "expected an object", text_file(f"{GM}/manifest.json", "[]"))
case(
    K,
    "files-entry-a-string",
    SHOW,
    "files.op0.parquet",
    manifest_edit(GM, set_key("files", "op0.parquet", "abc"), reseal=False),
)
case(K, "no-model", SHOW, "model: missing", manifest_edit(GM, del_key("model"), reseal=False))
case(K, "no-environment", SHOW, "environment: missing", manifest_edit(GM, del_key("environment"), reseal=False))
case(K, "format-99", SHOW, "unknown format version", manifest_edit(GM, set_key("format", 99), reseal=False))
case(K, "kind-run", SHOW, "not a golden manifest", manifest_edit(GM, set_key("kind", "harness.run"), reseal=False))
case(K, "truncated-json", SHOW, "not valid JSON", truncate(f"{GM}/manifest.json"))
case(K, "not-utf8", SHOW, "not UTF-8", text_file(f"{GM}/manifest.json", b'{"kind": "\xff\xfe"}'))
case(K, "empty", SHOW, "is empty", text_file(f"{GM}/manifest.json", ""))
case(
    K,
    "edited-noise-floor",
    SHOW,
    "edited after it was written",
    manifest_edit(GM, set_key("reproducibility", "ops", "0", "max_abs", 1.0), reseal=False),
)
case(
    K,
    "path-escapes",
    SHOW,
    "../corpus.parquet",
    manifest_edit(GM, lambda d: d["files"].__setitem__("../corpus.parquet", d["files"].pop("corpus.parquet"))),
)
case(
    K,
    "geometry-misspelt-key",
    SHOW,
    "max_simultanous",
    manifest_edit(GM, lambda d: d["geometry"].__setitem__("max_simultanous", d["geometry"].pop("max_simultaneous"))),
)
case(
    K,
    "nan-number",
    SHOW,
    "NaN",
    lambda ws: (ws / GM / "manifest.json").write_text(
        (ws / GM / "manifest.json").read_text().replace('"max_abs": 0.0', '"max_abs": NaN', 1)
    ),
)
case(
    K,
    "unknown-state-verdict",
    SHOW,
    "reproducibility.bitwise",
    manifest_edit(GM, set_key("reproducibility", "bitwise", "maybe")),
)
case(K, "op0-missing", SHOW, "op0.parquet: listed in the manifest but missing", remove(f"{GM}/op0.parquet"))
case(K, "op0-truncated", SHOW, "truncated or replaced", truncate(f"{GM}/op0.parquet", 1000))
case(K, "op0-byte-flipped", SHOW, "op0.parquet: sha256", lambda ws: flip_byte(ws / GM / "op0.parquet"))
case(K, "no-such-dir", ("golden", "show", "goldens/nope"), "no such golden directory")
case(K, "a-file-not-a-dir", ("golden", "show", "c.parquet"), "c.parquet")
case(
    K, "temporary-folder", ("golden", "show", "goldens/.r.tmp-1-abcd"), "unfinished", copy(GM, "goldens/.r.tmp-1-abcd")
)
case(K, "unlisted-data-file", SHOW, "extra.parquet: data file not listed", copy("c.parquet", f"{GM}/extra.parquet"))
case(
    K,
    "run-against-bad-golden",
    ("run", "--golden", "goldens/r", *CFG, *QUIET),
    "model: missing",
    manifest_edit(GM, del_key("model"), reseal=False),
)
case(
    K,
    "verify-edited",
    ("golden", "verify", "goldens/r", *CFG, *QUIET),
    "edited after it was written",
    manifest_edit(GM, set_key("release", "q"), reseal=False),
)
case(
    K,
    "score-given-the-folder-of-goldens",
    ("score", "--golden", "goldens", "--run", "{run}", "--out", "s2.json"),
    "goldens: not a golden; it holds 2: goldens/r, goldens/slow (pass one of them as --golden)",
)

# ---------------------------------------------------------------------------- golden adopt
REGEN = "goldens/r.regen-20270101T000000000000Z"
ADOPT = ("golden", "adopt", REGEN)


def _regen(change=None):
    """A regeneration of the workspace's golden (``change`` breaks it), beside it."""

    def setup(ws) -> None:
        copy(GM, REGEN)(ws)
        manifest_edit(REGEN, change or set_key("created", "2027-01-01T00:00:00+00:00"))(ws)

    return setup


case(K, "adopt-not-a-regen", ("golden", "adopt", GM), "not a regenerated golden")
case(K, "adopt-incomplete-regen", ADOPT, "not a complete golden", lambda ws: (ws / REGEN).mkdir(parents=True))
case(  # a regen of a changed model (another fingerprint) is adopted: tests/test_golden_adopt.py
    K,
    "adopt-regen-of-another-release",
    ADOPT,
    "records release 'other', not 'r'",
    _regen(set_key("release", "other")),
)
case(  # what adopt would refuse is not recorded at all
    K,
    "record-regen-of-another-geometry",
    ("golden", "record", "--release", "r", "--regen", "--model", "lanes.models.null_model:full", *CFG, *QUIET),
    "--regen records a golden that replaces this one, but this model's geometry differs",
)
case(
    K,
    "adopt-regen-of-another-geometry",
    ADOPT,
    "its geometry differs",
    _regen(set_key("geometry", "embedding_dim", 64)),
)
case(
    K,
    "adopt-regen-byte-flipped",
    ADOPT,
    "op0.parquet: sha256",
    lambda ws: (_regen()(ws), flip_byte(ws / REGEN / "op0.parquet")),
)

# ---------------------------------------------------------------------------- run manifest
K = "run manifest"
case(K, "phantom-shape", SCORE, "lanes", run_manifest_edit(set_key("shapes", [2, 8])))
case(K, "shapes-x", SCORE, "shapes.0", run_manifest_edit(set_key("shapes", ["x"])))
case(K, "a-list", SCORE, "expected an object", lambda ws: (run_dir(ws) / "manifest.json").write_text("[1]"))
case(K, "no-lanes", SCORE, "lanes: missing", run_manifest_edit(del_key("lanes"), reseal=False))
case(K, "format-99", SCORE, "unknown format version", run_manifest_edit(set_key("format", 99), reseal=False))
case(K, "edited", SCORE, "edited after it was written", run_manifest_edit(set_key("pad_to_fixed", True), False))
case(
    K,
    "no-such-dir",
    ("score", "--golden", "goldens/r", "--run", "runs/nope", "--out", "s2.json"),
    "no such run directory",
)
case(K, "lane-file-modified", SCORE, "k2/op0.parquet", lambda ws: flip_byte(run_dir(ws) / "k2" / "op0.parquet"))
case(K, "calls-modified", SCORE, "calls.parquet", lambda ws: flip_byte(run_dir(ws) / "calls.parquet"))
case(K, "other-golden", SCORE, "was made against golden", run_manifest_edit(set_key("golden_id", "r@000000000000")))
case(
    K,
    "lane-file-unlisted",
    SCORE,
    "k2/op1.parquet: data file not listed",
    run_manifest_edit(del_key("files", "k2/op1.parquet")),
)
case(K, "unknown-mode", SCORE, "mode", run_manifest_edit(set_key("mode", "sideways")))

# ---------------------------------------------------------------------------- score
K = "score"
case(K, "no-shapes", PROMOTE, "shapes: missing", json_file("score.json", del_key("shapes")))
case(K, "no-fingerprint", PROMOTE, "fingerprint: missing", json_file("score.json", del_key("fingerprint")))
case(K, "no-verdict", PROMOTE, "verdict: missing", json_file("score.json", del_key("verdict")))
case(K, "shapes-a-list", PROMOTE, "shapes", json_file("score.json", set_key("shapes", [1, 2])))
case(K, "verdict-maybe", PROMOTE, "maybe", json_file("score.json", set_key("verdict", "maybe"), "digest"))
case(K, "format-99", PROMOTE, "unknown format version", json_file("score.json", set_key("format", 99)))
case(K, "a-ledger", ("promote", "--score", "ledger.json", "--ledger", "l2.json", *CFG), "not a score file")
case(K, "a-list", PROMOTE, "score.json", text_file("score.json", "[]"))
case(K, "edited", PROMOTE, "edited after it was written", json_file("score.json", set_key("release", "q")))
case(
    K,
    "disagrees-with-itself",
    REPORT,
    "disagrees",
    json_file(
        "score.json",
        lambda d: d["shapes"]["2"]["ops"]["0"]["checks"][0].__setitem__(
            "ok", not d["shapes"]["2"]["ops"]["0"]["checks"][0]["ok"]
        ),
        "digest",
    ),
)
case(
    K,
    "tolerance-unknown-key",
    REPORT,
    "tolerances",
    json_file("score.json", set_key("tolerances", "op0", "max_abss", 1.0), "digest"),
)
case(
    K,
    "tolerance-negative",
    PROMOTE,
    "tolerances",
    json_file("score.json", set_key("tolerances", "op0", "max_abs", -1.0), "digest"),
)
case(K, "golden-moved", PROMOTE, "cannot check the score against what it judged", remove(GM))
case(K, "not-found", ("promote", "--score", "nope.json", *CFG), "score file not found")
case(K, "a-directory", ("promote", "--score", "goldens", *CFG), "found a directory")
case(K, "other-tolerances", (*PROMOTE, "--tolerance", "bitwise"), "other tolerances")
case(K, "applied-twice", PROMOTE, "ledger.json: shape k=2: run")
case(K, "not-utf8", PROMOTE, "not UTF-8", text_file("score.json", b"\xff\xfe{}"))
case(
    K,
    "infinity",
    REPORT,
    "Infinity",
    lambda ws: (ws / "score.json").write_text(
        (ws / "score.json").read_text().replace('"max_abs": 0.0001', '"max_abs": Infinity', 1)
    ),
)

# ---------------------------------------------------------------------------- ledger
K = "ledger"
LEDGER = ("ledger", "--ledger", "ledger.json")
case(K, "a-list", LEDGER, "not a harness ledger", text_file("ledger.json", "[]"))
case(K, "entry-a-string", LEDGER, "entries", json_file("ledger.json", first_entry(lambda e: "promoted")))
case(K, "entry-without-state", LEDGER, "state: missing", json_file("ledger.json", first_entry(del_key("state"))))
case(K, "promoted-no-history", LEDGER, "history", json_file("ledger.json", first_entry(set_key("history", []))))
case(
    K, "state-bogus", LEDGER, "bogus", json_file("ledger.json", first_entry(set_key("state", "bogus")), "ledger_sha256")
)
case(
    K,
    "verdict-maybe",
    LEDGER,
    "maybe",
    json_file("ledger.json", first_entry(lambda e: e["history"][0].__setitem__("verdict", "maybe")), "ledger_sha256"),
)
case(K, "format-99", LEDGER, "unknown format version", json_file("ledger.json", set_key("format", 99)))
case(K, "edited", PROMOTE, "edited after it was written", json_file("ledger.json", set_key("seq", 99)))
case(K, "format-2", LEDGER, "format-2 ledger names no packer identity", json_file("ledger.json", set_key("format", 2)))
case(K, "not-json", (*REPORT, "--ledger", "ledger.json"), "not valid JSON", text_file("ledger.json", "{nope"))
case(K, "missing", ("ledger", "--ledger", "nope.json"), "no such ledger")
case(K, "a-directory", (*PROMOTE, "--ledger", "goldens"), "goldens")
case(K, "not-utf8", ("shapes", "--ledger", "ledger.json"), "not UTF-8", text_file("ledger.json", b"\xff{}"))
case(
    K,
    "promoted-after-fail",
    LEDGER,
    "promoted",
    json_file("ledger.json", first_entry(lambda e: e["history"][-1].__setitem__("verdict", "fail")), "ledger_sha256"),
)
# where plain `shapes` / `ledger` read: never a guess among several, never an empty ledger created
case(
    K,
    "two-found",
    ("ledger",),
    "2 ledgers found (ledger.json, goldens/ledger.json)",
    copy("ledger.json", "goldens/ledger.json"),
)
case(K, "none-found", ("shapes",), "no ledger found in ledger.json, goldens/ledger.json", remove("ledger.json"))
case(
    K,
    "none-beside-the-golden",
    ("shapes", "--golden", "goldens/r"),
    "goldens/ledger.json: no ledger beside the golden goldens/r",
)
case(K, "golden-not-a-golden", ("ledger", "--golden", "c.parquet"), "--golden c.parquet: not a golden")

# ---------------------------------------------------------------------------- ledger history
K = "ledger history"
PART = "ledger.json.history/00000001.parquet"  # the part the workspace's one promote wrote
HISTORY = ("history", "--ledger", "ledger.json", "--shape", "2")


def _part_data_byte(ws) -> None:
    """Flip the last byte of the part's largest column chunk: page data, caught only by its checksum."""
    meta = pq.ParquetFile(ws / PART).metadata
    col = max((meta.row_group(0).column(i) for i in range(meta.num_columns)), key=lambda c: c.total_compressed_size)
    flip_byte(
        ws / PART,
        min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None)
        + col.total_compressed_size
        - 1,
    )


def _part_edited(ws) -> None:
    """The part rewritten by hand (pyarrow), its metadata kept: one figure changed."""
    table = pq.read_table(ws / PART)
    i = table.schema.get_field_index("observed")
    values = table.column(i).to_pylist()
    values[0] = 0.5 if values[0] is None else values[0] * 2 + 1
    pq.write_table(
        table.set_column(i, "observed", pa.array(values, pa.float64())).replace_schema_metadata(table.schema.metadata),
        ws / PART,
    )


case(K, "corrupt-part", HISTORY, f"{PART}: history part is corrupt in row group 0", _part_data_byte)
case(
    K,
    "truncated-part",
    HISTORY,
    f"{PART}: not a readable Parquet history part",
    lambda ws: (ws / PART).write_bytes((ws / PART).read_bytes()[:100]),
)
case(
    K,
    "other-kind-part",
    HISTORY,
    f"{PART}: not a harness history part",
    lambda ws: pq.write_table(pa.table({"x": [1]}), ws / PART),
)
case(K, "hand-edited-part", HISTORY, f"{PART}: edited after it was written", _part_edited)

# ---------------------------------------------------------------------------- promoted-shapes manifest
K = "promoted-shapes manifest"
SHAPES = ("shapes", "--manifest", "promoted-shapes.json")
case(K, "a-list", SHAPES, "not a promoted-shapes manifest", text_file("promoted-shapes.json", "[]"))
case(K, "format-99", SHAPES, "unknown format version", json_file("promoted-shapes.json", set_key("format", 99)))
case(K, "edited", SHAPES, "edited after it was written", json_file("promoted-shapes.json", set_key("ledger_seq", 7)))
case(K, "no-models", SHAPES, "models: missing", json_file("promoted-shapes.json", del_key("models"), "manifest_sha256"))
case(
    K,
    "of-another-ledger",
    (*SHAPES, "--ledger", "ledger.json"),
    "another ledger state",
    json_file("promoted-shapes.json", set_key("ledger_sha256", "0" * 64), "manifest_sha256"),
)
case(K, "not-found", ("shapes", "--manifest", "nope.json"), "not found")
case(
    K, "format-2", SHAPES, "format-2 promoted-shapes manifest", json_file("promoted-shapes.json", set_key("format", 2))
)


def each_packer(change):
    def outer(d: dict) -> None:
        for m in d["models"].values():
            for dv in m["devices"].values():
                for p in dv["profiles"].values():
                    for pk in p["packers"].values():
                        change(pk)

    return outer


case(
    K,
    "shape-zero",
    SHAPES,
    "ops.0",
    json_file("promoted-shapes.json", each_packer(lambda pk: pk["ops"].__setitem__("0", [0])), "manifest_sha256"),
)
# a forger adds k=8 and re-seals: the ledger never promoted it (every reader re-derives the manifest)
case(
    K,
    "resealed-with-a-shape",
    (*SHAPES, "--ledger", "ledger.json"),
    "lists k=8 for OP 0",
    json_file("promoted-shapes.json", each_packer(lambda pk: pk["ops"]["0"].append(8)), "manifest_sha256"),
)
case(
    K,
    "may-without-packer",
    ("shapes", "--may", "--ledger", "ledger.json", "--k", "2", "--op", "0", "--device", "cpu"),
    "needs --packer",
)

# ---------------------------------------------------------------------------- localisation file
K = "localisation"
LOC = (*REPORT, "--localisation", "localisation.json")
case(K, "not-json", LOC, "not valid JSON", text_file("localisation.json", "nope"))
case(
    K,
    "of-another-score",
    LOC,
    "localises another score",
    json_file("localisation.json", set_key("score_digest", "0" * 64)),
)
case(K, "format-99", LOC, "unknown format version", json_file("localisation.json", set_key("format", 99)))
case(K, "shapes-a-list", LOC, "shapes", json_file("localisation.json", set_key("shapes", [])))
case(K, "a-list", LOC, "localisation.json", text_file("localisation.json", "[]"))

# ---------------------------------------------------------------------------- configuration
K = "config"
BADCFG = ("corpus", "show", "c.parquet", "--config", "bad.toml")


def cfg(text: str | bytes):
    return text_file("bad.toml", text)


case(K, "not-utf8", BADCFG, "not UTF-8", cfg(b'[model]\nspec = "sm\xe9ll"\n'))
case(K, "not-toml", BADCFG, "not valid TOML", cfg("[model\n"))
case(K, "unknown-key", BADCFG, "tolerances.op0.max_abss", cfg("[tolerances.op0]\nmax_abss = 1e-3\n"))
case(
    K,
    "unknown-key-did-you-mean",
    BADCFG,
    "shapes.candidate: unknown key (did you mean 'candidates'?)",
    cfg("[shapes]\ncandidate = [2]\n"),
)
case(K, "inf-tolerance", BADCFG, "tolerances.op0.max_abs", cfg("[tolerances.op0]\nmax_abs = inf\n"))
case(K, "nan-tolerance", BADCFG, "tolerances.op1.min_cosine", cfg("[tolerances.op1]\nmin_cosine = nan\n"))
case(K, "negative-mask-fraction", BADCFG, "masks.min_active_fraction", cfg("[masks]\nmin_active_fraction = -0.1\n"))
case(K, "mask-fraction-over-1", BADCFG, "masks.min_active_fraction", cfg("[masks]\nmin_active_fraction = 1.5\n"))
case(K, "negative-min-active-frames", BADCFG, "masks.min_active_frames", cfg("[masks]\nmin_active_frames = -3\n"))
case(K, "seed-out-of-range", BADCFG, "model.seed", cfg('[model]\nspec = "small"\nseed = 99999999999\n'))
case(K, "a-directory", ("corpus", "show", "c.parquet", "--config", "goldens"), "found a directory")
case(K, "missing", ("corpus", "show", "c.parquet", "--config", "nope.toml"), "configuration file not found")
case(K, "release-without-1", BADCFG, "must include 1", cfg("[shapes]\nrelease = [2]\n"))
case(K, "threads-a-string", BADCFG, "numerics.threads", cfg('[numerics]\nthreads = "two"\n'))
case(K, "no-candidates", BADCFG, "shapes.candidates", cfg("[shapes]\ncandidates = []\n"))
case(K, "device-gpu", BADCFG, "release.device", cfg('[release]\ndevice = "gpu"\n'))
case(K, "noise-floor-factor-below-1", BADCFG, "noise_floor_factor", cfg("[tolerances.op0]\nnoise_floor_factor = 0.5\n"))
case(K, "unknown-tolerance-mode", BADCFG, "mode", cfg('[tolerances.op2]\nmode = "lenient"\n'))
case(
    K,
    "record-with-bad-config",
    ("golden", "record", "--corpus", "c.parquet", "--release", "n", "--config", "bad.toml", *QUIET),
    "corpus.blocks",
    cfg("[corpus]\nblocks = 0\n"),
)

# ---------------------------------------------------------------------------- corpus metadata
K = "corpus metadata"
case(K, "an-int", CSHOW, "harness.corpus", rewrite_parquet("c.parquet", "bad.parquet", metadata=corpus_meta(5)))
case(K, "a-list", CSHOW, "harness.corpus", rewrite_parquet("c.parquet", "bad.parquet", metadata=corpus_meta([1])))
case(
    K,
    "sample-rate-abc",
    CSHOW,
    "sample_rate",
    rewrite_parquet(
        "c.parquet",
        "bad.parquet",
        metadata=corpus_meta({"version": 1, "sample_rate": "abc", "window_samples": 16000, "windows_per_block": 8}),
    ),
)
case(
    K,
    "version-99",
    CSHOW,
    "unknown format version",
    rewrite_parquet(
        "c.parquet",
        "bad.parquet",
        metadata=corpus_meta({"version": 99, "sample_rate": 16000, "window_samples": 16000, "windows_per_block": 8}),
    ),
)
case(K, "not-json", CSHOW, "is not JSON", rewrite_parquet("c.parquet", "bad.parquet", metadata=corpus_meta(b"{x")))
case(K, "absent", CSHOW, "no 'harness.corpus' metadata", rewrite_parquet("c.parquet", "bad.parquet", metadata=None))
case(
    K,
    "other-geometry",
    CSHOW,
    "window_samples",
    rewrite_parquet(
        "c.parquet",
        "bad.parquet",
        metadata=corpus_meta({"version": 1, "sample_rate": 16000, "window_samples": 32000, "windows_per_block": 8}),
    ),
)
case(
    K,
    "unknown-key",
    CSHOW,
    "speakers",
    rewrite_parquet(
        "c.parquet",
        "bad.parquet",
        metadata=corpus_meta(
            {"version": 1, "sample_rate": 16000, "window_samples": 16000, "windows_per_block": 8, "speakers": 3}
        ),
    ),
)
case(
    K,
    "record-refuses-it",
    ("golden", "record", "--corpus", "bad.parquet", "--release", "n", *CFG, *QUIET),
    "sample_rate",
    rewrite_parquet(
        "c.parquet",
        "bad.parquet",
        metadata=corpus_meta({"version": 1, "sample_rate": "abc", "window_samples": 16000, "windows_per_block": 8}),
    ),
)

# ---------------------------------------------------------------------------- corpus rows and provenance
K = "corpus rows"


def bad_rows(table_change):
    return rewrite_parquet("c.parquet", "bad.parquet", table_change)


CAPTURE = ("corpus", "capture", "out.parquet", "bad.parquet", *CFG)
NULLABLE_ITEMS = pa.list_(pa.int64())  # as an engine's capture or an older file declares them: a null can be written
case(
    K,
    "null-inside-offsets",
    CSHOW,
    "null value inside",
    bad_rows(set_column("offsets", row0(lambda v: [v[0], None, *v[2:]]), NULLABLE_ITEMS)),
)
case(
    K,
    "null-inside-offsets-capture",
    CAPTURE,
    "null value inside",
    bad_rows(set_column("offsets", row0(lambda v: [v[0], None, *v[2:]]), NULLABLE_ITEMS)),
)
case(K, "duplicate-block-id", CSHOW, "appears twice", bad_rows(set_column("block_id", lambda v: [v[1], *v[1:]])))
case(
    K,
    "provenance-not-json",
    CSHOW,
    "provenance is not JSON",
    bad_rows(set_column("provenance", row0(lambda v: "{nope"))),
)
case(
    K,
    "provenance-a-list",
    CSHOW,
    "provenance: must be a JSON object",
    bad_rows(set_column("provenance", row0(lambda v: "[1, 2]"))),
)
case(K, "missing-column", CSHOW, "missing column 'valid'", bad_rows(lambda t: t.drop_columns(["valid"])))
case(K, "offsets-decrease", CSHOW, "OFFSETS", bad_rows(set_column("offsets", row0(lambda v: [v[1], v[0], *v[2:]]))))
case(K, "valid-over-window", CSHOW, "VALID", bad_rows(set_column("valid", row0(lambda v: [10**6, *v[1:]]))))
case(K, "flipped-byte", ("corpus", "show", "c.parquet", *CFG), "c.parquet", lambda ws: flip_page_byte(ws / "c.parquet"))
case(K, "no-rows", CSHOW, "holds no blocks", bad_rows(lambda t: t.slice(0, 0)))
case(K, "not-parquet", CSHOW, "not a readable Parquet", text_file("bad.parquet", "hello"))
case(K, "nan-in-span", CSHOW, "SPAN", bad_rows(set_column("span", row0(lambda v: [float("nan"), *v[1:]]))))
case(
    K,
    "offsets-wrong-type",
    CSHOW,
    "OFFSETS",
    bad_rows(set_column("offsets", lambda v: [[float(x) for x in r] for r in v], pa.list_(pa.float64()))),
)
case(
    K,
    "record-refuses-bad-row",
    ("golden", "record", "--corpus", "bad.parquet", "--release", "n", *CFG, *QUIET),
    "VALID",
    bad_rows(set_column("valid", lambda v: [*v[:-1], [10**6, *v[-1][1:]]])),
)
case(K, "capture-output-exists", ("corpus", "capture", "c.parquet", "c.parquet", *CFG), "the file exists")
case(K, "not-found", ("corpus", "show", "nope.parquet", *CFG), "corpus file not found")

# ---------------------------------------------------------------------------- WAV files
K = "wav"
WAV = ("corpus", "wav", "w.parquet", "bad.wav", *CFG)
PCM = np.zeros(8000, "<i2").tobytes()
case(
    K,
    "same-audio-twice",
    ("corpus", "wav", "w.parquet", "a.wav", "b.wav", *CFG),
    "the same audio",
    copy("a.wav", "b.wav"),
)
case(K, "odd-16-bit-data", WAV, "not a whole number", text_file("bad.wav", wav_bytes(PCM + b"\x01")))
case(K, "sample-rate-8000", WAV, "8000 Hz", text_file("bad.wav", wav_bytes(PCM, rate=8000)))
case(K, "not-riff", WAV, "not a RIFF/WAVE file", text_file("bad.wav", "hello world, not audio"))
case(
    K,
    "no-data-chunk",
    WAV,
    "no data chunk",
    text_file(
        "bad.wav",
        b"RIFF"
        + struct.pack("<I", 28)
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + struct.pack("<HHIIHH", 1, 1, 16000, 32000, 2, 16),
    ),
)
case(K, "truncated-data", WAV, "truncated", text_file("bad.wav", wav_bytes(PCM, data_size=len(PCM) * 2)))
case(K, "8-bit", WAV, "unsupported sample format", text_file("bad.wav", wav_bytes(b"\x80" * 100, bits=8)))
case(
    K, "nan-samples", WAV, "NaN", text_file("bad.wav", wav_bytes(np.full(100, np.nan, "<f4").tobytes(), tag=3, bits=32))
)
case(K, "missing-file", ("corpus", "wav", "w.parquet", "nope.wav", *CFG), "nope.wav")
case(K, "a-directory", ("corpus", "wav", "w.parquet", "goldens", *CFG), "goldens")
case(K, "empty-data", WAV, "no samples", text_file("bad.wav", wav_bytes(b"")))
case(K, "zero-channels", WAV, "channels", text_file("bad.wav", wav_bytes(PCM, channels=0)))

# ---------------------------------------------------------------------------- Parquet outputs of goldens and runs
K = "parquet outputs"
case(K, "golden-op0-flipped-resealed", SCORE, "op0.parquet", forge_golden_file("op0.parquet", flip_page_byte))
case(
    K,
    "golden-op1-other-schema",
    SCORE,
    "op1.parquet",
    forge_golden_file("op1.parquet", lambda p: pq.write_table(pq.read_table(p).drop_columns(["speaker"]), p)),
)
case(
    K,
    "golden-op0-metadata-format-99",
    SCORE,
    "unknown format version",
    forge_golden_file(
        "op0.parquet",
        lambda p: pq.write_table(
            pq.read_table(p).replace_schema_metadata(
                {
                    b"harness.data.outputs": json.dumps(
                        {"format": 99, "op": 0, "frames": 5, "classes": 7, "embedding_dim": 32, "decisions": True}
                    ).encode()
                }
            ),
            p,
        ),
    ),
)
case(K, "golden-op0-not-parquet", SCORE, "op0.parquet", forge_golden_file("op0.parquet", lambda p: p.write_text("x")))
case(
    K,
    "golden-corpus-flipped-resealed",
    ("golden", "verify", "goldens/r", *CFG, *QUIET),
    "corpus.parquet",
    forge_golden_file("corpus.parquet", flip_page_byte),
)
case(K, "run-k2-flipped-resealed", SCORE, "op0.parquet", forge_run_file("k2/op0.parquet", flip_page_byte))
case(
    K,
    "run-calls-other-schema",
    SCORE,
    "calls.parquet",
    forge_run_file("calls.parquet", lambda p: pq.write_table(pq.read_table(p).drop_columns(["lane"]), p)),
)
case(K, "run-calls-flipped-resealed", SCORE, "calls.parquet", forge_run_file("calls.parquet", flip_page_byte))
case(
    K,
    "run-exact-rows-missing",
    SCORE,
    "exact",
    forge_run_file("exact/op0.parquet", lambda p: pq.write_table(pq.read_table(p).slice(0, 8), p)),
)

K = "capture"
AUDIT = ("audit", "--golden-model", "small", "--set", "numerics.threads=1", *QUIET)
case(K, "capture-missing", (*AUDIT, "missing.parquet"), "capture file not found")
case(
    K,
    "capture-not-parquet",
    (*AUDIT, "cap.parquet"),
    "not a readable Parquet capture file",
    text_file("cap.parquet", "hello"),
)
case(K, "capture-is-a-corpus", (*AUDIT, "c.parquet"), "corpus")
case(K, "capture-is-a-golden-output", (*AUDIT, "goldens/r/op0.parquet"), "output file")
case(K, "capture-is-a-folder", (*AUDIT, "goldens/r"), "goldens/r")
case(
    K,
    "audit-golden-model-nonsense",
    ("audit", "--golden-model", "nonsense", *QUIET, "missing.parquet"),
    "model spec 'nonsense'",
)
case(
    K,
    "audit-golden-model-pt-missing",
    ("audit", "--golden-model", "nope.pt", *QUIET, "missing.parquet"),
    "TorchScript model 'nope.pt' not found",
)
case(
    K,
    "audit-golden-model-empty-module",
    ("audit", "--golden-model", ":make", *QUIET, "missing.parquet"),
    "model spec ':make'",
)
