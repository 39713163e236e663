"""Catalogue cases of files that do not agree with what they claim to be, and of where a command may write.

- **Output locations**: every command that writes refuses, before any work, an output inside (or equal
  to) a golden or run directory (sealed by its manifest) and an output over one of its inputs
  (:mod:`harness.base.destinations`): the workspace is unchanged (no run inside the golden, no lock file).
- **Counts out of bounds**: every count a user can set is refused past its bound, naming it.
- **A history part of another ledger**, a history folder that is a file, an adoption journal edited by hand,
  a disk full in the live scorer.
"""

from __future__ import annotations

import json
import shutil

from tests.catalogue_setups import CFG, PROMOTE, QUIET, REPORT, RUN, case, copy, mkdir, run_dir, text_file
from tests.tamper import edit_manifest

GM = "goldens/r"
SCORE = ("score", "--golden", GM, "--run", RUN)
NIGHTLY = ("nightly", "--golden", GM, *CFG, *QUIET)
REGEN = "r.regen-20270101T000000000000Z"

# ---------------------------------------------------------------------------- where a command may write
K = "output location"
SEALED = "a golden directory is sealed by its manifest"  # an output inside one
THE_GOLDEN = "it is a golden directory, sealed by its manifest"  # an output that is one
THE_RUN = "it is a run directory, sealed by its manifest"
INPUT = "an input of this command"
case(
    K,
    "nightly-out-the-golden",
    (*NIGHTLY, "--out", GM),
    f"{GM}: cannot write the nightly output folder there: {THE_GOLDEN}",
)
case(K, "nightly-out-inside-the-golden", (*NIGHTLY, "--out", f"{GM}/n"), SEALED)
case(K, "nightly-out-a-run", (*NIGHTLY, "--out", RUN), THE_RUN)
case(
    K, "nightly-ledger-inside-the-golden", (*NIGHTLY, "--out", "n", "--set", f"nightly.ledger={GM}/ledger.json"), SEALED
)
case(
    K,
    "nightly-ledger-over-the-config",
    (*NIGHTLY, "--out", "n", "--set", "nightly.ledger=harness.toml"),
    f"cannot write the ledger over --config harness.toml, {INPUT}",
)
case(
    K,
    "merge-out-a-shard",
    ("merge", "n1", "--golden", GM, "--out", "n1", *CFG),
    f"n1: cannot write the merge output folder over shard folder n1, {INPUT}",
    mkdir("n1"),
)
case(K, "merge-out-the-golden", ("merge", "n1", "--golden", GM, "--out", GM, *CFG), THE_GOLDEN, mkdir("n1"))
case(K, "run-runs-the-golden", ("run", "--golden", GM, "--runs", GM, *CFG, *QUIET), THE_GOLDEN)
case(K, "run-runs-inside-a-run", ("run", "--golden", GM, "--runs", RUN, *CFG, *QUIET), THE_RUN)
case(
    K,
    "score-out-over-the-config",
    (*SCORE, "--out", "harness.toml", *CFG),
    f"harness.toml: cannot write the score file over --config harness.toml, {INPUT}",
)
case(K, "score-out-inside-the-run", (*SCORE, "--out", f"{RUN}/s.json", *CFG), "a run directory is sealed")
case(
    K,
    "promote-manifest-over-the-score",
    (*PROMOTE, "--ledger", "l2.json", "--manifest", "score.json"),
    f"score.json: cannot write the promoted-shapes manifest over --score score.json, {INPUT}",
)
case(K, "promote-ledger-inside-the-golden", (*PROMOTE, "--ledger", f"{GM}/l2.json"), SEALED)
case(K, "report-out-the-golden", (*REPORT[:-2], "--out", GM), THE_GOLDEN)
case(
    K,
    "report-junit-over-the-score",
    (*REPORT, "--junit", "score.json"),
    f"score.json: cannot write the JUnit file over --score score.json, {INPUT}",
)
case(
    K,
    "golden-record-goldens-the-golden",
    ("golden", "record", "--corpus", "c.parquet", "--goldens", GM, *CFG, *QUIET),
    THE_GOLDEN,
)
case(
    K,
    "golden-record-goldens-a-run",
    ("golden", "record", "--corpus", "c.parquet", "--goldens", RUN, *CFG, *QUIET),
    THE_RUN,
)
case(
    K, "golden-diff-out-inside-a-golden", ("golden", "diff", GM, "goldens/slow", "--out", f"{GM}/d.json", *CFG), SEALED
)


def regen_in_the_run(ws) -> None:
    """A regen of goldens/r inside the run directory (where a wrong --goldens once recorded it)."""
    target = run_dir(ws) / REGEN
    shutil.copytree(ws / GM, target)
    edit_manifest(target, lambda d: d.__setitem__("created", "2027-01-01T00:00:00+00:00"), reseal=True)


case(
    K,
    "golden-adopt-inside-a-run",
    ("golden", "adopt", f"{RUN}/{REGEN}"),
    "cannot write the golden folder there: it is a run directory",
    regen_in_the_run,
)
case(K, "demo-out-the-golden", ("demo", "--out", GM, "--model", "small", *QUIET), THE_GOLDEN)
case(
    K, "audit-out-the-golden", ("audit", "missing.parquet", "--golden-model", "small", "--out", GM, *QUIET), THE_GOLDEN
)
case(K, "laws-vectors-inside-the-golden", ("laws", "--export-vectors", f"{GM}/vectors"), SEALED)
case(K, "laws-json-inside-the-golden", ("laws", "--json", f"{GM}/laws.json", "--examples", "1"), SEALED)
case(
    K,
    "corpus-synth-over-the-config",
    ("corpus", "synth", "harness.toml", "--force", *CFG),
    f"cannot write the corpus over --config harness.toml, {INPUT}",
)
case(K, "corpus-synth-inside-the-golden", ("corpus", "synth", f"{GM}/c2.parquet", *CFG), SEALED)
case(
    K,
    "corpus-wav-over-its-wav",
    ("corpus", "wav", "a.wav", "a.wav", "--force", *CFG),
    f"a.wav: cannot write the corpus over WAV a.wav, {INPUT}",
)
case(
    K,
    "corpus-capture-over-its-capture",
    ("corpus", "capture", "c.parquet", "c.parquet", "--force", *CFG),
    f"c.parquet: cannot write the corpus over CAPTURED c.parquet, {INPUT}",
)
case(K, "init-inside-the-golden", ("init", f"{GM}/harness.toml"), SEALED)

# every command that writes, and the case above that refuses its output location
WRITERS = {
    "nightly": "nightly-out-the-golden",
    "merge": "merge-out-a-shard",
    "run": "run-runs-the-golden",
    "score": "score-out-over-the-config",
    "promote": "promote-manifest-over-the-score",
    "report": "report-out-the-golden",
    "golden record": "golden-record-goldens-the-golden",
    "golden diff": "golden-diff-out-inside-a-golden",
    "golden adopt": "golden-adopt-inside-a-run",
    "demo": "demo-out-the-golden",
    "audit": "audit-out-the-golden",
    "laws": "laws-vectors-inside-the-golden",
    "corpus synth": "corpus-synth-over-the-config",
    "corpus wav": "corpus-wav-over-its-wav",
    "corpus capture": "corpus-capture-over-its-capture",
    "init": "init-inside-the-golden",
}
READERS = {"golden verify", "golden show", "corpus show", "shapes", "ledger", "history", "serve", "model check"}

# ---------------------------------------------------------------------------- counts out of bounds
K = "usage"
case(
    K,
    "set-laws-examples-1e20",
    (*NIGHTLY, "--set", "packer.laws_examples=100000000000000000000"),
    "packer.laws_examples: Input should be less than or equal to 1000000 (got 100000000000000000000)",
)
case(
    K,
    "run-laws-examples-over-bound",
    ("run", "--golden", GM, "--set", "packer.laws_examples=1000001", *CFG, *QUIET),
    "--set 'packer.laws_examples=1000001': packer.laws_examples: Input should be less than or equal to 1000000",
)
case(K, "laws-examples-over-bound", ("laws", "--examples", "1000001"), "1000000")
case(
    K,
    "arrangements-over-bound",
    ("run", "--golden", GM, "--arrangements", "65", *CFG, *QUIET),
    "evidence.arrangements: Input should be less than or equal to 64",
)
case(
    K, "repeats-over-bound", (*NIGHTLY, "--repeats", "65"), "evidence.repeats: Input should be less than or equal to 64"
)
case(
    K,
    "set-concurrency-over-bound",
    ("golden", "record", "--set", "backend.concurrency=1025", *CFG),
    "backend.concurrency: Input should be less than or equal to 1024",
)
case(
    K,
    "sweep-concurrency-over-bound",
    (*NIGHTLY, "--set", "load.concurrency=[1,2000]"),
    "load.concurrency.1: Input should be less than or equal to 1024",
)
case(
    K,
    "set-load-blocks-over-bound",
    (*NIGHTLY, "--set", "load.blocks=10000001"),
    "load.blocks: Input should be less than or equal to 10000000",
)
case(K, "synth-blocks-over-bound", ("corpus", "synth", "x.parquet", "--blocks", "10000001", *CFG), "10000000")
case(
    K,
    "shard-count-over-bound",
    (*NIGHTLY, "--set", "nightly.shard=1/100000000000000000000"),
    "shard '1/100000000000000000000': at most 10000000 shards",
)
case(
    K,
    "set-ray-workers-over-bound",
    (*NIGHTLY, "--set", "ray.workers=4097"),
    "ray.workers: Input should be less than or equal to 4096",
)
case(
    K,
    "set-ray-retries-over-bound",
    (*NIGHTLY, "--set", "ray.retries=101"),
    "ray.retries: Input should be less than or equal to 100",
)
case(K, "serve-instances-over-bound", ("serve", "--instances", "257"), "256")
case(
    K, "synth-step-over-bound", ("corpus", "synth", "x.parquet", "--step", "100000000000000000000", *CFG), "1000000"
)  # a recording is windows x step long: 1e9 asked for 39 GiB (exit 3), 1e20 never ended
case(
    K,
    "set-min-active-frames-over-bound",
    ("golden", "record", "--set", "masks.min_active_frames=10000000000", *CFG),
    "masks.min_active_frames: Input should be less than or equal to 1000000",
)

# ---------------------------------------------------------------------------- the history beside the ledger
K = "ledger history"
PART = "ledger.json.history/00000001.parquet"
OTHER_RUN = "20270101T000000Z-k2-0ther0"


def part_of_another_ledger(ws) -> None:
    """What another ledger's commit 1 wrote (its own run, its own score), copied over this ledger's part: the
    harness's own writer, so its kind, format, seq, schema and rows' seal are all in order."""
    from harness.data.schemas import Score
    from harness.ledger.history_store import history_folder, rows_of, write_part

    score = Score.model_validate(json.loads((ws / "score.json").read_text()))
    other = score.model_copy(update={"run": score.run.model_copy(update={"id": OTHER_RUN})})
    (ws / PART).unlink()
    write_part(history_folder(ws / "ledger.json"), 1, rows_of(other, 1), "0" * 64)


case(
    K,
    "part-of-another-ledger",
    ("history", "--ledger", "ledger.json", "--shape", "2"),
    f"{PART}: not this ledger's history part: it holds the figures of run {OTHER_RUN}",
    part_of_another_ledger,
)
case(
    K,
    "nightly-part-of-another-ledger",
    (*NIGHTLY, "--out", "n", "--set", "nightly.ledger=ledger.json"),
    f"{PART}: not this ledger's history part",
    part_of_another_ledger,
)


def history_folder_a_file(ws) -> None:
    shutil.rmtree(ws / "ledger.json.history")
    (ws / "ledger.json").unlink()
    (ws / "ledger.json.history").write_text("not a folder\n")


case(
    K,
    "history-folder-a-file",
    PROMOTE,
    "ledger.json.history: cannot write the ledger's history folder: it is a file, not a folder",
    history_folder_a_file,
)

# ---------------------------------------------------------------------------- an adoption journal edited by hand
K = "golden manifest"


def swapped_journal(ws) -> None:
    """A regen beside goldens/r and a journal (as an older harness wrote it: no seal) whose ids were swapped by
    hand: finishing it would move the regen, not the old golden, to the history name."""
    copy(GM, f"goldens/{REGEN}")(ws)
    new = edit_manifest(
        ws / "goldens" / REGEN, lambda d: d.__setitem__("created", "2027-01-01T00:00:00+00:00"), reseal=True
    )
    old = json.loads((ws / GM / "manifest.json").read_text())
    text_file(
        "goldens/.r.adopt.json",
        json.dumps(
            {
                "source": REGEN,
                "history": "r.history-20261201T000000Z",
                "old_golden_id": new["golden_id"],
                "new_golden_id": old["golden_id"],
            }
        ),
    )(ws)


case(
    K,
    "adopt-journal-ids-swapped",
    ("golden", "adopt", f"goldens/{REGEN}"),
    "goldens/.r.adopt.json: a golden adoption journal without its seal",
    swapped_journal,
)

# ---------------------------------------------------------------------------- a disk full in the live scorer
case(
    "disk full",
    "nightly-live-scorer",
    ("nightly", "--golden", GM, "--out", "n", *CFG, *QUIET),
    "live scorer (scoring the lanes against golden goldens/r while they run): No space left on device",
    env=(("HARNESS_FAULT", "enospc:live-score"),),
)
