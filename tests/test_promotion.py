"""The promotion record must never lie: the ledger (candidate -> promoted -> revoked), the
promoted-shapes manifest the engine reads, and every ordinary or hostile way to make them disagree:
two writers at once, a kill at each step, a replayed score, a score that disagrees with itself, a
typo in a path. Driven through the real CLI wherever the case is reachable from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import LedgerError
from harness.base.jsonio import seal
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas import PromotedShapes, Score
from harness.data.schemas.config_file import EvidenceSection
from harness.data.tolerances import SegmentationTolerance, Tolerances, VoiceprintTolerance
from harness.ledger.ledger_store import commit, journal_path, load_ledger, load_manifest, read_consistent
from harness.ledger.promoted_manifest import allowed_shapes, derive_manifest
from harness.ledger.promotion import apply_score, empty_ledger
from harness.pipeline.promote import promote_file
from harness.pipeline.score import score_run, write_score
from harness.release_config import release_config
from tests.pipeline import record, run_shapes
from tests.tamper import edit_json

RELEASE = {"0": [1], "1": [1], "2": [1]}
# tolerances: LOOSE below; one arrangement (CI time: the subject is the ledger and manifest, not the evidence)
CONFIG = release_config(
    numerics=NumericSettings(threads=1), evidence=EvidenceSection(arrangements=1, neighbours=False, canaries=False)
)
# The release's tolerances here: the defaults, with sample-size gates a 6-block corpus can meet ...
LOOSE = Tolerances(
    op0=SegmentationTolerance(max_flip_rate=0.01),
    op1=VoiceprintTolerance(max_failed_row_rate=0.5),
    op2=VoiceprintTolerance(max_failed_row_rate=0.5),
)
LOOSE_TOML = (
    "[tolerances.op0]\nmax_flip_rate = 0.01\n[tolerances.op1]\nmax_failed_row_rate = 0.5\n"
    "[tolerances.op2]\nmax_failed_row_rate = 0.5\n"
)
# ... and a stricter release no corpus here can satisfy: every score judged with it fails
STRICT = Tolerances(op0=SegmentationTolerance(max_flip_rate=1e-9))
STRICT_TOML = "[tolerances.op0]\nmax_flip_rate = 1e-9\n"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A golden of the small model (6 blocks) and a factory of real runs and scores against it."""
    tmp = tmp_path_factory.mktemp("promotion")
    backend, _, golden = record("small", tmp, blocks=6, numerics=CONFIG.numerics, config=CONFIG)
    made = {"n": 0}

    def scored(shapes: tuple[int, ...], tolerances: Tolerances = LOOSE, where: Path | None = None) -> Path:
        made["n"] += 1
        run = run_shapes(backend, golden, tmp / f"r{made['n']}", shapes, CONFIG)
        path = (where or tmp) / f"score-{made['n']}.json"
        write_score(path, score_run(golden, run, tolerances))
        return path

    (tmp / "strict.toml").write_text(STRICT_TOML + "[numerics]\nthreads = 1\n")
    (tmp / "default.toml").write_text(LOOSE_TOML + "[numerics]\nthreads = 1\n")
    return {
        "tmp": tmp,
        "golden": golden,
        "scored": scored,
        "strict": tmp / "strict.toml",
        "default": tmp / "default.toml",
    }


def harness(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def promote_cli(score: Path, ledger: Path, manifest: Path, config: Path, **kw) -> subprocess.CompletedProcess:
    return harness(
        "promote",
        "--score",
        str(score),
        "--ledger",
        str(ledger),
        "--manifest",
        str(manifest),
        "--config",
        str(config),
        **kw,
    )


def load_score(path: Path) -> Score:
    """A score file as the model promotion takes (the file itself is read as JSON elsewhere)."""
    return Score.model_validate(json.loads(Path(path).read_text()))


def lists(manifest: PromotedShapes, k: int) -> bool:
    """Does the manifest allow k anywhere (any model, device, profile, packer, OP)?"""
    return any(t[5] == k for t in allowed_shapes(manifest))


def allowed(manifest_path: Path, k: int) -> bool:
    if not manifest_path.exists():
        return False
    return _lists(json.loads(manifest_path.read_text()), k)


def state(ledger_path: Path, k: int) -> str | None:
    if not ledger_path.exists():
        return None
    entries = [e for e in json.loads(ledger_path.read_text())["entries"].values() if e["shape"] == k]
    return entries[0]["state"] if entries else None


def one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# ---------------------------------------------------------------------------------------------- the rules


def test_promote_then_revoke_naming_the_revoking_run(world):
    s1 = load_score(world["scored"]((2,)))
    s2 = load_score(world["scored"]((2,), STRICT))
    book, t1 = apply_score(empty_ledger(), s1, s1.run.created, RELEASE)
    assert [(t.shape, t.before, t.after) for t in t1] == [(2, "candidate", "promoted")]
    book, t2 = apply_score(book, s2, s2.run.created, RELEASE)
    assert [(t.before, t.after) for t in t2] == [("promoted", "revoked")]
    (entry,) = book.entries.values()
    assert entry.revoked_by == s2.run.id and [e.state for e in entry.history] == ["promoted", "revoked"]
    assert any(r.startswith("OP 0 flip_rate_upper95") for r in entry.history[-1].reasons)
    manifest = derive_manifest(book, RELEASE)
    assert manifest.ledger_sha256 == book.ledger_sha256 and not lists(manifest, 2)


def _lists(manifest: dict, k: int) -> bool:
    return any(
        k in ks
        for m in manifest["models"].values()
        for d in m["devices"].values()
        for p in d["profiles"].values()
        for pk in p["packers"].values()
        for ks in pk["ops"].values()
    )


def test_the_release_shape_is_never_promoted(world):
    s = load_score(world["scored"]((1, 2)))
    book, transitions = apply_score(empty_ledger(), s, s.run.created, RELEASE)
    assert [t.shape for t in transitions] == [2]
    profile = derive_manifest(book, RELEASE).models[s.fingerprint].devices["cpu"].profiles[s.numerics_profile]
    assert profile.release_ops == {"0": [1], "1": [1], "2": [1]}
    assert profile.packers[s.packer["identity"]].ops == {"0": [1, 2], "1": [1, 2], "2": [1, 2]}


def test_the_manifest_is_keyed_by_model_device_and_numerics_profile(world):
    s = load_score(world["scored"]((2,)))
    book, _ = apply_score(empty_ledger(), s, s.run.created, RELEASE)
    other = s.model_copy(
        update={"numerics_profile": "np-0000000000", "run": s.run.model_copy(update={"id": s.run.id + "x"})}
    )
    book, _ = apply_score(book, other, s.run.created, RELEASE)
    profiles = derive_manifest(book, RELEASE).models[s.fingerprint].devices["cpu"].profiles
    assert set(profiles) == {s.numerics_profile, "np-0000000000"}
    assert profiles[s.numerics_profile].numerics["threads"] == 1


def test_a_run_whose_golden_did_not_reproduce_promotes_nothing(world):
    s = load_score(world["scored"]((2,)))
    s = s.model_copy(update={"verification": s.verification.model_copy(update={"passed": False, "status": "drift"})})
    book, (t,) = apply_score(empty_ledger(), s, s.run.created, RELEASE)
    assert t.after == "candidate" and "did not reproduce golden" in t.reasons[-1]


# ---------------------------------------------------------------------------------------------- through the CLI


def test_replay_of_an_older_passing_score_is_refused(world, tmp_path):
    old_pass = world["scored"]((2,))
    new_fail = world["scored"]((2,), STRICT)
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote_cli(old_pass, ledger, manifest, world["default"]).returncode == 0
    assert promote_cli(new_fail, ledger, manifest, world["strict"]).returncode == 1  # committed: k refused
    assert state(ledger, 2) == "revoked" and not allowed(manifest, 2)
    before = (ledger.read_bytes(), manifest.read_bytes())
    replay = promote_cli(old_pass, ledger, manifest, world["default"])
    one_line_error(replay, "already in the ledger")
    assert (ledger.read_bytes(), manifest.read_bytes()) == before
    # the same old run re-scored later is still an old run: refused as older than the last event
    rescored = tmp_path / "rescored.json"
    from golden.runs import load_run

    data = json.loads(old_pass.read_text())
    write_score(rescored, score_run(world["golden"], load_run(data["run"]["path"]), LOOSE))
    l2, m2 = tmp_path / "l2.json", tmp_path / "m2.json"
    assert promote_cli(new_fail, l2, m2, world["strict"]).returncode == 1
    one_line_error(promote_cli(rescored, l2, m2, world["default"]), "is older than the shape's last event")


def test_a_score_whose_verdict_strings_lie_is_refused(world, tmp_path):
    failing = world["scored"]((2,), STRICT)

    def lie(s: dict) -> None:
        s["verdict"] = "pass"
        shape = s["shapes"]["2"]
        shape["verdict"] = "pass"
        shape["reasons"] = []
        for v in shape["ops"].values():
            v["passed"] = True
            for c in v["checks"]:
                if c["ok"] is False:
                    c["ok"] = True

    forged = tmp_path / "forged.json"
    forged.write_text(failing.read_text())
    edit_json(forged, lie)  # a careless edit: the digest no longer matches
    one_line_error(
        promote_cli(forged, tmp_path / "l.json", tmp_path / "m.json", world["strict"]), "edited after it was written"
    )
    edit_json(forged, lambda s: None, field="digest")  # a forger re-seals it
    line = one_line_error(
        promote_cli(forged, tmp_path / "l.json", tmp_path / "m.json", world["strict"]), "flip_rate_upper95"
    )
    assert "disagrees with itself" in line
    assert not (tmp_path / "l.json").exists() and not (tmp_path / "m.json").exists()

    def loosen(s: dict) -> None:  # raise the limit in the check itself: its judge's limit says otherwise
        lie(s)
        for c in s["shapes"]["2"]["ops"]["0"]["checks"]:
            if c["metric"] == "flip_rate_upper95":
                c["allowed"] = 1.0
        return seal({k: v for k, v in s.items() if k != "digest"}, "digest")

    loose = tmp_path / "loose.json"
    loose.write_text(failing.read_text())
    edit_json(loose, loosen)
    one_line_error(
        promote_cli(loose, tmp_path / "l.json", tmp_path / "m.json", world["strict"]), "its limit max_flip_rate is"
    )


def test_a_score_judged_with_other_tolerances_than_the_release_is_refused(world, tmp_path):
    strict = world["scored"]((2,), STRICT)
    one_line_error(
        promote_cli(strict, tmp_path / "l.json", tmp_path / "m.json", world["default"]),
        "judged with other tolerances than this release's configuration",
    )


def test_a_run_scored_against_another_golden_is_refused(world, tmp_path):
    other_backend, _, other = record(
        "small", tmp_path, blocks=6, numerics=CONFIG.numerics, config=CONFIG, release="other"
    )
    score = json.loads(world["scored"]((2,)).read_text())
    proc = harness(
        "score", "--golden", str(other.path), "--run", score["run"]["path"], "--out", str(tmp_path / "s.json")
    )
    one_line_error(proc, f"was made against golden {score['golden']['id']}, not {other.golden_id}")
    assert not (tmp_path / "s.json").exists()


def test_ledger_and_manifest_given_as_one_file_are_refused(world, tmp_path):
    score = world["scored"]((2,))
    same = tmp_path / "same.json"
    one_line_error(promote_cli(score, same, same, world["default"]), "are the same file")
    assert not same.exists()


def test_report_with_a_mistyped_ledger_is_refused(world, tmp_path):
    score = world["scored"]((2,))
    proc = harness(
        "report", "--score", str(score), "--ledger", str(tmp_path / "ledgr.json"), "--out", str(tmp_path / "report")
    )
    one_line_error(proc, "no such ledger")


def test_a_score_may_not_overwrite_a_golden_manifest(world, tmp_path):
    score = json.loads(world["scored"]((2,)).read_text())
    target = Path(score["golden"]["path"]) / "manifest.json"
    before = target.read_bytes()
    proc = harness("score", "--golden", score["golden"]["path"], "--run", score["run"]["path"], "--out", str(target))
    one_line_error(proc, "sealed by its manifest")
    assert target.read_bytes() == before


# ---------------------------------------------------------------------------------------------- concurrency


def _year_of_history(score: dict, shapes: list[int], events: int) -> dict:
    """A ledger holding ``events`` old events for each shape (an old run every few hours), as the JSON written
    (``score``: the score file's JSON). Its events predate ``judged_under``: they have no such key."""
    book = {"kind": "harness.ledger", "format": 3, "seq": 0, "updated": None, "entries": {}}
    packer = score["packer"]["identity"]
    seq = 0
    for k in shapes:
        history = []
        for i in range(events):
            seq += 1
            history.append(
                {
                    "seq": seq,
                    "at": f"2025-01-01T00:00:{i % 60:02d}+00:00",
                    "run_id": f"old-{k}-{i}",
                    "run_created": "2025-01-01T00:00:00+00:00",
                    "score_digest": "0" * 64,
                    "golden_id": score["golden"]["id"],
                    "release": score["release"],
                    "verdict": "fail",
                    "state": "candidate",
                    "reasons": ["an old failure"],
                    "evidence": {},
                }
            )
        book["entries"][f"{score['fingerprint']}|{score['device_kind']}|{score['numerics_profile']}|{packer}|{k}"] = {
            "fingerprint": score["fingerprint"],
            "device_kind": score["device_kind"],
            "numerics_profile": score["numerics_profile"],
            "packer_identity": packer,
            "release": score["release"],
            "release_ops": RELEASE,
            "numerics": {},
            "shape": k,
            "state": "candidate",
            "revoked_by": None,
            "history": history,
        }
    book["seq"] = seq
    return seal(book, "ledger_sha256")


def test_parallel_writers_lose_no_event(world, tmp_path):
    """Four `harness promote` processes at once on one ledger holding a year of history (3000 events per
    shape): every one of their events must be in the final ledger, and the manifest must be its own.
    (Four on two cores: each waits for the lock while another holds it, as eight did, in half the CI time.)"""
    writers = list(range(2, 6))
    scores = [world["scored"]((k,), where=tmp_path) for k in writers]
    first = json.loads(scores[0].read_text())
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    ledger.write_text(json.dumps(_year_of_history(first, writers, 3000)))
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harness.cli",
                "promote",
                "--score",
                str(s),
                "--ledger",
                str(ledger),
                "--manifest",
                str(manifest),
                "--config",
                str(world["default"]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in scores
    ]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in results), results
    book, m = read_consistent(ledger, manifest)
    assert m is not None
    found = {e.shape: [h.run_id for h in e.history if not h.run_id.startswith("old-")] for e in book.entries.values()}
    wanted = {k: [json.loads(s.read_text())["run"]["id"]] for k, s in zip(writers, scores, strict=True)}
    assert found == wanted  # 4 writers, 4 events written, 4 found
    assert all(len(e.history) == 3001 for e in book.entries.values())
    assert m.ledger_sha256 == book.ledger_sha256 and book.seq == 4 * 3000 + 4


def test_a_revocation_racing_a_promotion_is_never_lost(world, tmp_path):
    """A passing score and a later failing one for the same shape, promoted at the same moment, five times:
    the shape is never allowed at the end: revoked, or never promoted (the older score refused as a replay)."""
    for i in range(5):
        passing, failing = world["scored"]((2,), where=tmp_path), world["scored"]((2,), STRICT, where=tmp_path)
        ledger, manifest = tmp_path / f"l{i}.json", tmp_path / f"m{i}.json"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "harness.cli",
                    "promote",
                    "--score",
                    str(s),
                    "--ledger",
                    str(ledger),
                    "--manifest",
                    str(manifest),
                    "--config",
                    str(c),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for s, c in ((passing, world["default"]), (failing, world["strict"]))
        ]
        codes = [p.wait(timeout=600) for p in procs]
        assert codes[1] == 1 and codes[0] in (0, 2)  # the failing score's commit: the ledger refused its shape
        if codes[0] == 2:  # the failing run committed first: the older passing score is a replay
            assert "older than the shape's last event" in procs[0].stderr.read()
            assert state(ledger, 2) == "candidate"
        else:  # the passing run committed first: the failing run revoked it
            assert state(ledger, 2) == "revoked"
        assert not allowed(manifest, 2)


# ---------------------------------------------------------------------------------------------- interruption


@pytest.mark.parametrize(
    "point", ["promote:before-journal", "promote:journal-written", "promote:first-written", "promote:both-written"]
)
def test_a_kill_at_each_step_never_leaves_a_revoked_shape_allowed(world, tmp_path, point):
    passing, failing = world["scored"]((2,), where=tmp_path), world["scored"]((2,), STRICT, where=tmp_path)
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote_cli(passing, ledger, manifest, world["default"]).returncode == 0
    assert state(ledger, 2) == "promoted" and allowed(manifest, 2)
    killed = promote_cli(failing, ledger, manifest, world["strict"], env={"HARNESS_FAULT": f"kill:{point}"})
    assert killed.returncode == -9, killed.stderr
    # whatever the step: the manifest never allows a shape the ledger has revoked
    assert not (state(ledger, 2) == "revoked" and allowed(manifest, 2))
    committed = point != "promote:before-journal"
    assert journal_path(ledger).exists() == (committed and point != "promote:before-journal")
    # the next command that reads them finishes the commit (or finds nothing to finish)
    shapes = harness("shapes", "--ledger", str(ledger), "--manifest", str(manifest))
    assert shapes.returncode == 0, shapes.stderr
    book, m = read_consistent(ledger, manifest)
    assert m is not None and not journal_path(ledger).exists() and m.ledger_sha256 == book.ledger_sha256
    assert (state(ledger, 2), allowed(manifest, 2)) == (("revoked", False) if committed else ("promoted", True))


def test_a_full_disk_while_committing_is_finished_by_the_next_command(world, tmp_path):
    passing, failing = world["scored"]((2,), where=tmp_path), world["scored"]((2,), STRICT, where=tmp_path)
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote_cli(passing, ledger, manifest, world["default"]).returncode == 0
    full = promote_cli(failing, ledger, manifest, world["strict"], env={"HARNESS_FAULT": "enospc:write:ledger.json"})
    one_line_error(full, "ledger.json: cannot write (No space left on device)")
    assert not allowed(manifest, 2)  # the revocation reached the manifest first
    assert list(tmp_path.glob(".*.tmp-*")) == []  # no temporary file left behind
    assert promote_cli(failing, ledger, manifest, world["strict"]).returncode == 2  # replay: it did commit
    book, _ = read_consistent(ledger, manifest)
    assert state(ledger, 2) == "revoked" and book.seq == 2


def test_an_edited_ledger_is_never_used_or_overwritten(world, tmp_path):
    passing = world["scored"]((2,), where=tmp_path)
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote_cli(passing, ledger, manifest, world["default"]).returncode == 0
    edit_json(ledger, lambda b: next(iter(b["entries"].values()))["history"][0].update(golden_id="x@000000000000"))
    before = ledger.read_bytes()
    one_line_error(
        promote_cli(world["scored"]((2,), STRICT, where=tmp_path), ledger, manifest, world["strict"]),
        "edited after it was written",
    )
    assert ledger.read_bytes() == before
    with pytest.raises(LedgerError, match="edited after it was written"):
        load_ledger(ledger)


@pytest.mark.parametrize(
    "content,message",
    [
        ("[]", "not a harness ledger"),
        ('{"kind": "harness.ledger", "format": 99}', "format: unknown format version"),
        ("{oops", "ledger is not valid JSON"),
    ],
)
def test_a_ledger_that_is_not_one_is_refused(tmp_path, content, message):
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(Exception, match=message):
        load_ledger(path)


def test_commit_and_manifest_api(tmp_path):
    """Committing nothing new still writes a manifest bound to the ledger's commit."""
    ledger, manifest = tmp_path / "l.json", tmp_path / "m.json"
    commit(ledger, manifest, RELEASE, lambda book: (book, None))
    assert load_manifest(manifest).ledger_sha256 == load_ledger(ledger).ledger_sha256


def test_promote_file_api_matches_the_cli(world, tmp_path):
    score = world["scored"]((2,), where=tmp_path)
    config = CONFIG.with_overrides(tolerances=LOOSE)
    result, transitions = promote_file(score, config, tmp_path / "l.json", tmp_path / "m.json")
    assert result.run.id in transitions[0].run_id and transitions[0].after == "promoted"
