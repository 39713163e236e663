"""Catalogue cases of commands and faults: usage errors, outputs that cannot be written (a folder,
a file as parent, another user's folder, a full disk), internal errors, signals and memory."""

from __future__ import annotations

from tests.catalogue_setups import (
    CFG,
    CONFIG,
    PROMOTE,
    QUIET,
    REPORT,
    RUN,
    SCORE,
    SMALL_GEOMETRY,
    case,
    mkdir,
    plugin,
    remove,
    text_file,
)
from tests.tamper import edit_manifest


def other_corpus_golden(ws) -> None:
    """goldens/q: goldens/r's copy whose manifest names another corpus file (resealed, as a golden of
    another corpus has: `golden diff` compares the recorded digests, before any output is read)."""
    import shutil

    shutil.copytree(ws / "goldens/r", ws / "goldens/q")
    edit_manifest(ws / "goldens/q", lambda m: m["files"]["corpus.parquet"].update(sha256="0" * 64), reseal=True)


# ---------------------------------------------------------------------------- usage
K = "usage"
case(K, "blocks-abc", ("corpus", "synth", "x.parquet", "--blocks", "abc"), "--blocks")
case(K, "blocks-0", ("corpus", "synth", "x.parquet", "--blocks", "0"), "--blocks")
case(K, "blocks-negative", ("corpus", "synth", "x.parquet", "--blocks", "-3"), "--blocks")
case(K, "missing-required-option", ("run", *CFG), "--golden")
case(K, "unknown-option", ("score", "--frobnicate"), "--frobnicate")
case(K, "no-such-command", ("frobnicate",), "frobnicate")
case(K, "missing-argument", ("corpus", "wav", "w.parquet"), "Missing argument 'wavs'")
case(K, "shapes-empty-entry", ("run", "--golden", "goldens/r", "--shapes", "2,,4", *CFG), "an empty entry")
case(K, "shapes-zero", ("run", "--golden", "goldens/r", "--shapes", "0", *CFG), "--shapes '0'")
case(K, "shapes-twice", ("run", "--golden", "goldens/r", "--shapes", "2,2", *CFG), "--shapes '2,2'")
case(
    K,
    "shapes-over-max",
    ("run", "--golden", "goldens/r", "--shapes", "2,100001", *CFG),
    "--shapes '2,100001': 100001 blocks per call is over the largest shape, 100000",
)
case(K, "seed-over-numpy-range", ("golden", "record", "--set", f"model.seed={2**32}", *CFG), "model.seed")
case(K, "seed-negative", ("golden", "record", "--set", "model.seed=-1", *CFG), "model.seed")
case(K, "shard-0-of-4", ("nightly", "--golden", "goldens/r", "--set", "nightly.shard=0/4", *CFG), "shard '0/4'")
case(K, "shard-garbage", ("nightly", "--golden", "goldens/r", "--set", "nightly.shard=half", *CFG), "shard 'half'")
case(K, "threads-negative", ("run", "--golden", "goldens/r", "--set", "numerics.threads=-1", *CFG), "numerics.threads")
case(
    K,
    "run-laws-examples-negative",
    ("run", "--golden", "goldens/r", "--set", "packer.laws_examples=-1", *CFG),
    "packer.laws_examples",
)
case(
    K,
    "nightly-laws-examples-abc",
    ("nightly", "--golden", "goldens/r", "--set", "packer.laws_examples=abc", *CFG),
    "packer.laws_examples",
)
case(K, "run-arrangements-0", ("run", "--golden", "goldens/r", "--arrangements", "0", *CFG), "--arrangements")
case(K, "nightly-repeats-0", ("nightly", "--golden", "goldens/r", "--repeats", "0", *CFG), "--repeats")
case(
    K,
    "run-packer-digest-without-cmd",
    ("run", "--golden", "goldens/r", "--set", f"packer.digest={'ab' * 32}", *CFG, *QUIET),
    "--packer-digest",
)
case(
    K,
    "tolerance-lenient",
    ("score", "--golden", "goldens/r", "--run", RUN, "--tolerance", "lenient"),
    "--tolerance 'lenient'",
)
case(K, "device-gpu", ("run", "--golden", "goldens/r", "--device", "gpu", *CFG), "--device 'gpu'")
case(K, "release-empty", ("golden", "record", "--release", "", *CFG), "--release ''")
case(K, "release-path", ("golden", "record", "--release", "../x", *CFG), "--release '../x'")
case(K, "corpus-seed-negative", ("corpus", "synth", "x.parquet", "--corpus-seed", "-1", *CFG), "--corpus-seed")
case(K, "step-negative", ("corpus", "wav", "w.parquet", "a.wav", "--step", "-5", *CFG), "--step")
case(K, "model-nonsense", ("corpus", "synth", "x.parquet", "--model", "nonsense"), "model spec 'nonsense'")
case(
    K,
    "model-no-module",
    ("corpus", "synth", "x.parquet", "--model", "no_such_module_x:make"),
    "cannot import 'no_such_module_x'",
)
# a factory's arguments in the spec: an unknown one names the factory's, a malformed one its form
case(
    K,
    "model-argument-unknown",
    ("corpus", "synth", "x.parquet", "--model", "lanes.simulation.simulated_device:small?speed=9"),
    "takes no argument 'speed' (it takes: c0_ms, c1_ms, timeline, concurrent)",
)
case(
    K,
    "model-argument-malformed",
    ("corpus", "synth", "x.parquet", "--model", "lanes.simulation.simulated_device:small?c0_ms"),
    "factory argument 'c0_ms' is not key=value",
)
case(
    K,
    "model-argument-out-of-range",
    ("corpus", "synth", "x.parquet", "--model", "lanes.simulation.simulated_device:small?c1_ms=-1"),
    "c1_ms must be a number of",
)
case(
    K,
    "plugin-geometry-misspelt",
    ("corpus", "synth", "x.parquet", "--model", "geo_typo:make"),
    "max_simultanous",
    plugin("geo_typo", {**{k: v for k, v in SMALL_GEOMETRY.items() if k != "max_simultaneous"}, "max_simultanous": 2}),
)
case(
    K,
    "plugin-geometry-missing-key",
    ("corpus", "synth", "x.parquet", "--model", "geo_missing:make"),
    "frame_step",
    plugin("geo_missing", {k: v for k, v in SMALL_GEOMETRY.items() if k != "frame_step"}),
)
case(
    K,
    "plugin-geometry-zero",
    ("corpus", "synth", "x.parquet", "--model", "geo_zero:make"),
    "window_samples",
    plugin("geo_zero", {**SMALL_GEOMETRY, "window_samples": 0}),
)
NO_FINGERPRINT = text_file(
    "nofp.py",
    """
from lanes.models.null_model import small

def make(seed=0, device="cpu"):
    model = small(seed=seed, device=device)
    model.describe = lambda: {"name": "nofp"}  # the fingerprint left out of its description
    return model
""",
)
for command, argv in (
    ("golden-record", ("golden", "record", "--release", "nofp")),
    ("nightly", ("nightly", "--golden", "goldens/r", "--out", "n")),
    ("run", ("run", "--golden", "goldens/r")),
    ("golden-verify", ("golden", "verify", "goldens/r")),
):
    case(
        K,
        f"plugin-describe-without-fingerprint-{command}",
        (*argv, "--model", "nofp:make", *CFG, *QUIET),
        "model 'nofp:make': describe() has no 'fingerprint'",
        NO_FINGERPRINT,
    )
case(
    K,
    "plugin-autocast-dtype-unknown",
    ("corpus", "synth", "x.parquet", "--model", "ac_bad:make"),
    "autocast_dtype 'fp8' is not one of",
    text_file(
        "ac_bad.py",
        "from lanes.models.diar_nn_g import DiarNNG\n\n"
        "def make(seed=0, device='cpu'):\n"
        "    model = DiarNNG('small', seed=seed, device=device)\n"
        "    model.autocast_dtype = 'fp8'\n    return model\n",
    ),
)
case(K, "laws-packer-missing", ("laws", "--packer-cmd", "/nonexistent/packer", "--examples", "1"), "packer")
case(K, "laws-examples-0", ("laws", "--examples", "0"), "--examples")
case(
    K,
    "laws-packer-no-handshake",
    ("laws", "--packer-cmd", "cat", "--examples", "1"),  # echoes the harness's hello
    "answered the hello handshake, but metadata packer_name is None",
)
case(
    K,
    "laws-packer-variables-only",
    ("laws", "--packer-cmd", "FOO=1", "--examples", "1"),
    "sets FOO but names no program to run",
)
case(
    K,
    "laws-packer-digest-not-sha256",
    ("laws", "--packer-cmd", "cat", "--packer-digest", "xyz"),
    "--packer-digest 'xyz': expected a sha256",
)
case(
    K,
    "laws-export-vectors-not-empty",
    ("laws", "--export-vectors", "vectors"),
    "the folder is not empty",
    text_file("vectors/keep.txt", "mine"),
)
case(
    K,
    "laws-export-vectors-with-packer",
    ("laws", "--export-vectors", "v", "--packer-cmd", "cat"),
    "the vectors are the harness's own packer's answers",
)
case(
    K,
    "laws-replace-a-folder-of-other-files",
    ("laws", "--export-vectors", "vectors", "--replace"),
    "not replaced: it has no index.json, so it is not a folder of exported vectors",
    text_file("vectors/keep.txt", "mine"),
)
case(
    K,
    "laws-json-and-junit-one-file",
    ("laws", "--json", "laws.xml", "--junit", "laws.xml"),
    "--json and --junit name the same file",
)
case(K, "serve-without-triton", ("serve", "--model", "small"), "triton")
case(K, "backend-ftp", ("golden", "verify", "goldens/r", "--backend", "ftp:nope", *CFG), "--backend 'ftp:nope'")
case(
    K,
    "backend-port-not-a-number",
    ("golden", "verify", "goldens/r", "--backend", "http://127.0.0.1:notaport", *CFG),
    "port 'notaport' is not a whole number from 1 to 65535",
)
case(
    K,
    "ray-workers-0",
    ("nightly", "--golden", "goldens/r", "--ray", "local", "--set", "ray.workers=0", *CFG),
    "--set 'ray.workers=0': ray.workers",
)
# a removed alias of a configuration key: one line naming the --set key, before anything is read
case(
    K,
    "removed-flag-concurrency",
    ("run", "--golden", "goldens/r", "--concurrency", "4", *CFG),
    "harness run: --concurrency was removed: use --set backend.concurrency=N",
)
case(
    K,
    "set-not-key-value",
    ("nightly", "--golden", "goldens/r", "--set", "workers", *CFG),
    "--set 'workers': expected TABLE.KEY=VALUE",
)
case(
    K,
    "set-unknown-key",
    ("nightly", "--golden", "goldens/r", "--set", "ray.worker=2", *CFG),
    "--set 'ray.worker=2': ray.worker: unknown key (did you mean 'workers'?)",
)
case(
    K,
    "set-out-of-range",
    ("golden", "record", "--set", "backend.concurrency=0", *CFG),
    "--set 'backend.concurrency=0': backend.concurrency: Input should be greater than or equal to 1",
)
case(
    K,
    "set-history-near-limit-over-1",
    ("nightly", "--golden", "goldens/r", "--set", "history.near_limit=2", *CFG),
    "--set 'history.near_limit=2': history.near_limit: Input should be less than or equal to 1",
)
case(
    K,
    "set-localise-floor-multiple-under-1",
    ("golden", "record", "--set", "localise.floor_multiple=0.5", *CFG),
    "--set 'localise.floor_multiple=0.5': localise.floor_multiple: Input should be greater than or equal to 1",
)
case(
    K,
    "set-concurrency-in-process",
    ("run", "--golden", "goldens/r", "--set", "backend.concurrency=4", *CFG),
    "applies to a Triton backend",
)
case(
    K,
    "sweep-concurrency-garbage",
    ("nightly", "--golden", "goldens/r", "--set", "load.concurrency=1,x", *CFG),
    "--set 'load.concurrency=1,x': load.concurrency",
)
case(
    K,
    "sweep-concurrency-twice",
    ("nightly", "--golden", "goldens/r", "--set", "load.concurrency=[2,2]", *CFG),
    "--set 'load.concurrency=[2,2]': load.concurrency: a concurrency is listed twice in [2, 2]",
)
case(
    K,
    "sweep-concurrency-in-process",
    ("nightly", "--golden", "goldens/r", "--set", "load.concurrency=[1,2]", *CFG, *QUIET),
    "the load sweep runs on a Triton backend",
)
case(K, "merge-not-a-shard", ("merge", "goldens", "--golden", "goldens/r", *CFG), "expected one shard run")
case(K, "merge-no-shards", ("merge", "--golden", "goldens/r", *CFG), "Missing argument 'shards'")
case(K, "corpus-path-a-directory", ("corpus", "show", "goldens", *CFG), "is a directory")
case(
    K,
    "packer-and-packer-cmd",
    ("run", "--golden", "goldens/r", "--set", "packer.spec=harness", "--set", "packer.cmd=cat", *CFG, *QUIET),
    "give one packer",
)
case(K, "ledger-shape-0", ("ledger", "--shape", "0"), "--shape")
case(K, "demo-blocks-0", ("demo", "--blocks", "0"), "--blocks")
case(K, "verify-other-model-spec", ("golden", "verify", "goldens/r", "--model", "nonsense"), "model spec 'nonsense'")
# another model is refused before any work, naming both sides; the folder of goldens lists them
case(
    K,
    "verify-other-geometry",
    ("golden", "verify", "goldens/r", *CFG, "--model", "full", *QUIET),
    "golden of another model geometry",
)
case(
    K,
    "verify-other-weights",
    ("golden", "verify", "goldens/r", *CFG, "--set", "model.seed=1", *QUIET),
    "golden of another model: recorded with fingerprint",
)
case(
    K,
    "verify-folder-of-goldens",
    ("golden", "verify", "goldens", *CFG, *QUIET),
    "goldens: not a golden; it holds 2: goldens/r, goldens/slow (pass one of them as GOLDEN)",
)
case(
    K,
    "run-folder-of-goldens",
    ("run", "--golden", "goldens", *CFG, *QUIET),
    "goldens: not a golden; it holds 2: goldens/r, goldens/slow (pass one of them as --golden)",
)
# `golden diff A B`: two goldens of one corpus only, named both; a folder of goldens is not one
case(
    K,
    "golden-diff-other-corpus",
    ("golden", "diff", "goldens/r", "goldens/q", *CFG),
    "goldens/q: recorded on another corpus than goldens/r (corpus.parquet sha256",
    other_corpus_golden,
)
case(
    K,
    "golden-diff-folder-of-goldens",
    ("golden", "diff", "goldens/r", "goldens", *CFG),
    "goldens: not a golden; it holds 2: goldens/r, goldens/slow (pass one of them as B)",
)
case(K, "golden-diff-missing", ("golden", "diff", "goldens/r", "goldens/nope", *CFG), "goldens/nope")

# ---------------------------------------------------------------------------- memory
K = "memory"
case(
    K,
    "run-huge-padded-shape",
    ("run", "--golden", "goldens/r", "--shapes", "100000", "--pad-to-fixed", *CFG, *QUIET),
    "memory",
)
case(
    K,
    "nightly-huge-padded-shape",
    ("nightly", "--golden", "goldens/r", "--shapes", "2,100000", *CFG, *QUIET),
    "memory",
    text_file("harness.toml", CONFIG.replace("[shapes]\n", "[shapes]\npad_to_fixed = true\n")),
)

# ---------------------------------------------------------------------------- output faults
K = "output"
case(K, "score-out-a-directory", (*SCORE[:-2], "--out", "goldens", *CFG), "it is a directory")
case(K, "score-out-under-a-file", (*SCORE[:-2], "--out", "c.parquet/s.json", *CFG), "is a file")
case(K, "score-out-inside-golden", (*SCORE[:-2], "--out", "goldens/r/s.json", *CFG), "sealed")
case(K, "synth-out-exists", ("corpus", "synth", "c.parquet", *CFG), "the file exists")
case(K, "synth-out-a-directory", ("corpus", "synth", "goldens", *CFG), "it is a directory")
case(K, "synth-out-under-a-file", ("corpus", "synth", "a.wav/x/c.parquet", *CFG), "is a file")
case(K, "report-out-a-file", (*REPORT[:-2], "--out", "c.parquet"), "is a file")
case(K, "junit-a-directory", (*REPORT, "--junit", "goldens"), "it is a directory")
case(K, "ledger-is-manifest", (*PROMOTE, "--ledger", "l.json", "--manifest", "l.json"), "same file")
case(
    K,
    "record-goldens-a-file",
    ("golden", "record", "--corpus", "c.parquet", "--goldens", "c.parquet", "--release", "n", *CFG, *QUIET),
    "is a file",
)
case(K, "record-release-exists", ("golden", "record", "--corpus", "c.parquet", *CFG, *QUIET), "exists")
case(K, "run-runs-under-a-file", ("run", "--golden", "goldens/r", "--runs", "a.wav/runs", *CFG, *QUIET), "is a file")
case(K, "nightly-out-a-file", ("nightly", "--golden", "goldens/r", "--out", "c.parquet", *CFG, *QUIET), "is a file")
case(
    K,
    "nightly-ledger-a-directory",
    ("nightly", "--golden", "goldens/r", "--out", "n", "--set", "nightly.ledger=runs", *CFG, *QUIET),
    "it is a directory",
)
case(
    K,
    "nightly-bad-ledger-before-work",
    ("nightly", "--golden", "goldens/r", "--out", "n", "--set", "nightly.ledger=ledger.json", *CFG, *QUIET),
    "not a harness ledger",
    text_file("ledger.json", "[]"),
)
case(
    K,
    "merge-out-a-file",
    ("merge", "n1", "--golden", "goldens/r", "--out", "c.parquet", *CFG),
    "is a file",
    mkdir("n1"),
)
PREVIOUS = text_file("n/score.json", '{"kind": "harness.score", "created": "2026-11-30T01:00:00+00:00"}')
case(
    K,
    "nightly-out-holds-a-previous-nightly",
    ("nightly", "--golden", "goldens/r", "--out", "n", *CFG, *QUIET),
    "--out n: already holds a nightly's output (score.json of 2026-11-30T01:00:00+00:00); pass --force",
    PREVIOUS,
)
case(
    K,
    "merge-out-holds-a-previous-nightly",
    ("merge", "n1", "--golden", "goldens/r", "--out", "n", *CFG),
    "--out n: already holds a nightly's output (score.json of 2026-11-30T01:00:00+00:00); pass --force",
    PREVIOUS,
)
case(K, "demo-out-a-file", ("demo", "--out", "c.parquet", "--model", "small", *QUIET), "is a file")
case(K, "wav-out-a-directory", ("corpus", "wav", "goldens", "a.wav", *CFG), "it is a directory")

# unwritable folders (of another uid; as root, the command runs without CAP_DAC_OVERRIDE: tests/catalogue_run.py)
U = "unwritable"
case(U, "corpus-synth", ("corpus", "synth", "ro/c.parquet", *CFG), "ro", how="nobody")
case(
    U,
    "golden-record",
    ("golden", "record", "--corpus", "c.parquet", "--goldens", "ro", "--release", "n", *CFG, *QUIET),
    "ro",
    how="nobody",
)
case(U, "run", ("run", "--golden", "goldens/r", "--runs", "ro/runs", *CFG, *QUIET), "ro", how="nobody")
case(U, "score", (*SCORE[:-2], "--out", "ro/s.json", *CFG), "ro", how="nobody")
case(U, "promote", (*PROMOTE, "--ledger", "ro/l.json", "--manifest", "ro/m.json"), "ro", how="nobody")
case(
    U,
    "nightly",
    ("nightly", "--golden", "goldens/r", "--out", "ro/n", "--set", "nightly.ledger=ro/l.json", *CFG, *QUIET),
    "ro",
    how="nobody",
)
case(U, "report", (*REPORT[:-2], "--out", "ro/rep"), "ro", how="nobody")
case(U, "unreadable-config", ("corpus", "show", "c.parquet", "--config", "ro/secret.toml"), "secret.toml", how="nobody")
case(U, "unreadable-corpus", ("corpus", "show", "ro/secret.parquet", *CFG), "secret.parquet", how="nobody")

# disk full (HARNESS_FAULT=enospc:<point>)
F = "disk full"


def enospc(point: str) -> tuple[tuple[str, str], ...]:
    return (("HARNESS_FAULT", f"enospc:{point}"),)


case(F, "corpus-synth", ("corpus", "synth", "x.parquet", *CFG), "No space left", env=enospc("parquet:x.parquet"))
case(F, "corpus-wav", ("corpus", "wav", "w.parquet", "a.wav", *CFG), "No space left", env=enospc("parquet:w.parquet"))
case(
    F,
    "golden-record-outputs",
    ("golden", "record", "--corpus", "c.parquet", "--release", "n", *CFG, *QUIET),
    "No space left",
    env=enospc("parquet:op1.parquet"),
)
case(
    F,
    "golden-record-rename",
    ("golden", "record", "--corpus", "c.parquet", "--release", "n", *CFG, *QUIET),
    "No space left",
    env=enospc("rename:n"),
)
case(F, "run", ("run", "--golden", "goldens/r", *CFG, *QUIET), "No space left", env=enospc("parquet:op2.parquet"))
case(F, "score", SCORE, "No space left", env=enospc("write:s2.json"))
case(
    F,
    "promote-journal",
    PROMOTE,
    "No space left",
    env=enospc("write:.ledger.json.journal"),
    setup=remove("ledger.json"),
)
case(F, "report", REPORT, "No space left", env=enospc("write:report.md"))
case(
    F,
    "nightly",
    ("nightly", "--golden", "goldens/r", "--out", "n", *CFG, *QUIET),
    "No space left",
    env=enospc("parquet:op0.parquet"),
)

# internal errors (HARNESS_FAULT=bug:<point>): status 3, one line naming the command and step
B = "internal"


def bug(point: str) -> tuple[tuple[str, str], ...]:
    return (("HARNESS_FAULT", f"bug:{point}"),)


case(
    B,
    "corpus-synth",
    ("corpus", "synth", "x.parquet", *CFG),
    "internal error in 'corpus synth'",
    status=3,
    env=bug("parquet:x.parquet"),
)
case(
    B,
    "golden-record",
    ("golden", "record", "--corpus", "c.parquet", "--release", "n", *CFG, *QUIET),
    "exact lane x2",
    status=3,
    env=bug("parquet:op0.parquet"),
)
case(
    B,
    "run",
    ("run", "--golden", "goldens/r", *CFG, *QUIET),
    "internal error in 'run'",
    status=3,
    env=bug("parquet:op0.parquet"),
)
case(B, "score", SCORE, "internal error in 'score'", status=3, env=bug("write:s2.json"))
case(
    B,
    "promote",
    PROMOTE,
    "commit ledger and manifest",
    status=3,
    env=bug("promote:before-journal"),
    setup=remove("ledger.json"),
)
case(B, "report", REPORT, "internal error in 'report'", status=3, env=bug("write:report.html"))
case(
    B,
    "nightly-subprocess",
    ("nightly", "--golden", "goldens/r", "--out", "n", *CFG, *QUIET),
    "internal error in 'nightly'",
    status=3,
    env=bug("parquet:op1.parquet"),
    how="subprocess",
)
case(
    B,
    "nightly-live-score",
    ("nightly", "--golden", "goldens/r", "--out", "n", *CFG, *QUIET),
    "live score",
    status=3,
    env=bug("live-score"),
)  # the scorer's thread (harness.pipeline.live_score)

# signals: SIGINT (Ctrl-C) and SIGTERM (a CI job cancelled) while a slowed command works
S = "signal"
SLOW = (("HARNESS_SLOW_SECONDS", "1"),)
SLOWREC = (
    "golden",
    "record",
    "--corpus",
    "c.parquet",
    "--release",
    "n",
    "--model",
    "lanes.controls:slow",
    *CFG,
    *QUIET,
)
SLOWRUN = ("run", "--golden", "goldens/slow", "--model", "lanes.controls:slow", *CFG, *QUIET)
SLOWNIGHT = ("nightly", "--golden", "goldens/slow", "--out", "n", "--model", "lanes.controls:slow", *CFG, *QUIET)
case(
    S,
    "sigint-golden-record",
    SLOWREC,
    "nothing partial was written as complete",
    env=SLOW,
    how="SIGINT",
    wait_for="goldens/.n.tmp-*/.op0.parquet.tmp-*",
)
case(
    S,
    "sigterm-golden-record",
    SLOWREC,
    "nothing partial was written as complete",
    env=SLOW,
    how="SIGTERM",
    wait_for="goldens/.n.tmp-*/.corpus.parquet.tmp-*",
)  # the corpus copy, written while the lanes run
case(
    S,
    "sigint-run",
    SLOWRUN,
    "nothing partial was written as complete",
    env=SLOW,
    how="SIGINT",
    wait_for="runs/.*.tmp-*",
)
case(
    S,
    "sigterm-run",
    SLOWRUN,
    "nothing partial was written as complete",
    env=SLOW,
    how="SIGTERM",
    wait_for="runs/.*.tmp-*",
)
case(
    S,
    "sigint-nightly",
    SLOWNIGHT,
    "nothing partial was written as complete",
    env=SLOW,
    how="SIGINT",
    wait_for="n/runs/.*.tmp-*",
)
case(
    S,
    "sigterm-nightly",
    SLOWNIGHT,
    "nothing partial was written as complete",
    env=SLOW,
    how="SIGTERM",
    wait_for="n/runs/.*.tmp-*",
)


# the same signals delivered at exact points (HARNESS_FAULT=term|int:<point>), in-process: mid-write, before
# a rename, between the files of a report; the command stops at its next check point


def signal_at(action: str, point: str) -> tuple[tuple[str, str], ...]:
    return (("HARNESS_FAULT", f"{action}:{point}"),)


case(
    S,
    "sigterm-writing-a-corpus",
    ("corpus", "synth", "x.parquet", "--blocks", "40", *CFG),
    "interrupted (SIGTERM)",
    env=signal_at("term", "parquet:x.parquet"),
)
case(
    S,
    "sigint-writing-golden-outputs",
    ("golden", "record", "--corpus", "c.parquet", "--release", "n", *CFG, *QUIET),
    "interrupted (SIGINT)",
    env=signal_at("int", "parquet:op1.parquet"),
)
case(S, "sigterm-before-the-score-is-renamed", SCORE, "interrupted (SIGTERM)", env=signal_at("term", "write:s2.json"))
case(S, "sigterm-between-report-pages", REPORT, "interrupted (SIGTERM)", env=signal_at("term", "write:report.md"))
case(
    S, "sigterm-as-the-report-is-published", REPORT, "interrupted (SIGTERM)", env=signal_at("term", "set:report:linked")
)  # the last moment before the pages switch: none of them switch
case(
    S,
    "sigint-before-the-ledger-journal",
    PROMOTE,
    "interrupted (SIGINT)",
    env=signal_at("int", "promote:before-journal"),
    setup=remove("ledger.json"),
)
case(
    S,
    "sigterm-writing-a-run",
    ("run", "--golden", "goldens/r", *CFG, *QUIET),
    "interrupted (SIGTERM)",
    env=signal_at("term", "parquet:calls.parquet"),
)
