"""The engine's manifest tells the truth per packer, after a crash, a forgery or a second reader: a
promotion is bound to the packer it was proven with and to that packer's packing-laws verdict; a
journal rolls forward only into the files it names and only when it is what its ledger derives; every
reader re-derives the manifest and refuses a difference, naming the shape; a read-only ledger is readable,
and a pending journal there is reported."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base.errors import LedgerError, SchemaError
from harness.base.jsonio import seal
from harness.data.schemas import PromotedShapes, Score, validate
from harness.data.schemas.engine_manifest import PackerShapes
from harness.ledger.ledger_store import journal_path, load_ledger, read_consistent
from harness.ledger.promoted_manifest import derive_manifest, may_use
from harness.ledger.promotion import apply_score, empty_ledger
from tests.test_promotion import RELEASE, STRICT, allowed, one_line_error, state, world  # noqa: F401 (fixture)

OTHER = "external:engine-packer/1.0@sha256:0123456789abcdef"


def cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def promote(score: Path, ledger: Path, manifest: Path, config: Path, **env) -> subprocess.CompletedProcess:
    return cli(
        "promote",
        "--score",
        str(score),
        "--ledger",
        str(ledger),
        "--manifest",
        str(manifest),
        "--config",
        str(config),
        env=env or None,
    )


def changed(score: Score, edit) -> Score:
    """``score`` with ``edit`` applied to its JSON (a score that was never written: the model is frozen)."""
    data = score.model_dump(mode="json")
    edit(data)
    return Score.model_validate(data)


def as_packer(score: Score, identity: str, verdict: str = "hold", suffix: str = "") -> Score:
    """The same evidence, as if the fast lane had used packer ``identity`` with that laws verdict."""

    def edit(s: dict) -> None:
        s["packer"] = {**s["packer"], "identity": identity}
        s["laws"] = {
            **s["laws"],
            "packer_identity": identity,
            "verdict": verdict,
            "broken": ["rebased-inside"] if verdict == "broken" else [],
        }
        s["run"]["id"] += suffix

    return changed(score, edit)


def packers(manifest: PromotedShapes, score: Score) -> dict[str, PackerShapes]:
    return manifest.models[score.fingerprint].devices[score.device_kind].profiles[score.numerics_profile].packers


def ask(manifest: PromotedShapes, score: Score, packer: str, k: int) -> bool:
    return may_use(manifest, packer, k, "0", score.device_kind, score.fingerprint, score.numerics_profile)[0]


@pytest.fixture(scope="module")
def scores(world):  # noqa: F811
    """A passing and a failing score of k=2 (the harness's own packer), as files and as models."""
    passing, failing = world["scored"]((2,)), world["scored"]((2,), STRICT)
    return {
        "pass": passing,
        "fail": failing,
        "p": Score.model_validate(json.loads(passing.read_text())),
        "f": Score.model_validate(json.loads(failing.read_text())),
    }


# ------------------------------------------------------------------------------------ per packer


def test_a_ledger_shared_by_two_packers_keeps_their_evidence_apart(scores):
    good, bad = scores["p"], scores["f"]
    mine = good.packer["identity"]
    assert good.laws.verdict == "hold" and good.laws.packer_identity == mine
    # the engine's packer leaks: its nightly is refused; then the harness's own packer passes k=2
    book, (t,) = apply_score(empty_ledger(), as_packer(good, OTHER, "broken", "-q"), good.run.created, RELEASE)
    assert (t.packer, t.after, t.passed) == (OTHER, "candidate", False) and "breaks the packing laws" in t.reasons[0]
    book, (t,) = apply_score(book, good, good.run.created, RELEASE)
    assert (t.packer, t.after) == (mine, "promoted")
    manifest = derive_manifest(book, RELEASE)
    assert packers(manifest, good)[mine].ops["0"] == [1, 2] and packers(manifest, good)[OTHER].ops["0"] == [1]
    assert ask(manifest, good, mine, 2) and not ask(manifest, good, OTHER, 2)  # not with another packer's evidence
    assert ask(manifest, good, OTHER, 1) and ask(manifest, good, "callable:x:y@sha256:0000000000000000", 1)
    yes, why = may_use(manifest, OTHER, 2, "0", "cpu", good.fingerprint[:8])
    assert not yes and "promoted only for packer(s) " + mine in why
    # a revocation for one packer is never undone by evidence for another
    book, (t,) = apply_score(book, bad, bad.run.created, RELEASE)
    assert (t.packer, t.before, t.after) == (mine, "promoted", "revoked")
    book, (t,) = apply_score(book, as_packer(good, OTHER, "hold", "-q2"), bad.run.created, RELEASE)
    assert (t.packer, t.after) == (OTHER, "promoted")
    manifest = derive_manifest(book, RELEASE)
    assert not ask(manifest, good, mine, 2) and ask(manifest, good, OTHER, 2)
    assert {e.packer_identity for e in book.entries.values()} == {mine, OTHER} and len(book.entries) == 2


@pytest.mark.parametrize(
    "change,reason",
    [
        (lambda s: s["laws"].update(packer_identity=OTHER), "were judged for packer"),
        (
            lambda s: s["laws"].update(verdict="broken", broken=["rebased-inside"]),
            "breaks the packing laws (rebased-inside",
        ),
        (lambda s: s["laws"].update(verdict="not-judged", examples=0), "were not judged in this run"),
        (lambda s: None, None),  # the control: the laws held for this very packer
    ],
)
def test_a_packer_without_its_own_held_laws_gets_nothing_promoted(scores, change, reason):
    s = changed(scores["p"], change)
    book, (t,) = apply_score(empty_ledger(), s, s.run.created, RELEASE)
    if reason is None:
        assert t.after == "promoted" and t.passed
    else:
        assert t.after == "candidate" and not t.passed and reason in t.reasons[0], t.reasons
        assert not ask(derive_manifest(book), s, s.packer["identity"], 2)


def test_a_score_without_laws_or_packer_identity_is_refused(scores):
    """No packer identity: apply_score refuses it. No laws verdict: the score's own schema does (a Score
    without ``laws`` cannot be built, so promotion never sees one)."""
    with pytest.raises(LedgerError, match="no packer identity"):
        apply_score(
            empty_ledger(),
            changed(scores["p"], lambda s: s["packer"].pop("identity")),
            scores["p"].run.created,
            RELEASE,
        )
    data = scores["p"].model_dump(mode="json")
    del data["laws"]
    with pytest.raises(SchemaError, match="laws: missing"):
        validate(Score, data, "score")


def test_every_event_records_tolerances_requests_laws_and_its_release(scores):
    s = scores["p"]
    book, _ = apply_score(empty_ledger(), s, s.run.created, RELEASE)
    (entry,) = book.entries.values()
    ev = entry.history[-1]
    assert ev.release == entry.release == s.release and entry.packer_identity == s.packer["identity"]
    file = json.loads(scores["pass"].read_text())  # the evidence is the score file's own JSON
    written = ev.evidence.model_dump(mode="json")
    assert written["tolerances"] == file["tolerances"] and ev.evidence.tolerance_mode == "tolerance"
    assert written["requests"] == file["shapes"]["2"]["requests"] and written["laws"] == file["laws"]


def test_one_models_promotion_never_relabels_another_models_release(scores):
    """The release belongs to each entry, never to the ledger."""
    s = scores["p"]
    book, _ = apply_score(empty_ledger(), s, s.run.created, RELEASE)
    other = s.model_copy(update={"fingerprint": "f" * 64, "release": "another-model"})
    book, _ = apply_score(book, other, s.run.created, RELEASE)
    assert "release" not in type(book).model_fields
    releases = {e.fingerprint: e.release for e in book.entries.values()}
    assert releases == {s.fingerprint: s.release, "f" * 64: "another-model"}
    manifest = derive_manifest(book)
    assert packers(manifest, s)[s.packer["identity"]].evidence["2"].release == s.release


def test_shapes_shows_the_packer_and_answers_the_engines_question(world, scores, tmp_path):  # noqa: F811
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote(scores["pass"], ledger, manifest, world["default"]).returncode == 0
    mine, s = scores["p"].packer["identity"], scores["p"]
    listing = cli("shapes", "--ledger", str(ledger), "--manifest", str(manifest))
    assert listing.returncode == 0 and f"packer {mine}:" in listing.stdout, listing.stdout + listing.stderr
    assert "k=2: promoted" in listing.stdout and f"for packer {mine} by run {s.run.id}" in listing.stdout
    base = (
        "shapes",
        "--may",
        "--ledger",
        str(ledger),
        "--manifest",
        str(manifest),
        "--k",
        "2",
        "--op",
        "0",
        "--device",
        s.device_kind,
    )
    yes = cli(*base, "--packer", mine)
    assert (
        yes.returncode == 0
        and yes.stdout.startswith(f"yes: packer {mine} may use k=2")
        and len(yes.stdout.splitlines()) == 1
    )
    no = cli(*base, "--packer", OTHER, "--fingerprint", s.fingerprint[:12], "--profile", s.numerics_profile)
    assert no.returncode == 1 and no.stdout.startswith(f"no: packer {OTHER} has no evidence"), no.stdout + no.stderr
    one_line_error(cli(*base[:-6], "--op", "0", "--device", "cpu", "--packer", mine), "needs --k")
    release = cli(*base[:-5], "1", "--op", "0", "--device", s.device_kind, "--packer", OTHER)
    assert release.returncode == 0 and "release's own shapes" in release.stdout, release.stdout + release.stderr
    history = cli("ledger", "--ledger", str(ledger), "--packer", mine)
    assert history.returncode == 0 and f"packer {mine}: promoted" in history.stdout, history.stdout + history.stderr
    assert cli("ledger", "--ledger", str(ledger), "--packer", OTHER).stdout.strip() == "no ledger entry matches"


def test_a_format_2_ledger_or_manifest_is_refused_with_how_to_migrate(tmp_path):
    old = tmp_path / "ledger.json"
    old.write_text(
        json.dumps(
            seal(
                {"kind": "harness.ledger", "format": 2, "seq": 0, "updated": None, "release": None, "entries": {}},
                "ledger_sha256",
            )
        )
    )
    one_line_error(cli("ledger", "--ledger", str(old)), "format-2 ledger names no packer identity", "move it aside")
    m = tmp_path / "m.json"
    m.write_text(json.dumps({"kind": "harness.promoted-shapes", "format": 2}))
    one_line_error(cli("shapes", "--manifest", str(m)), "format-2 promoted-shapes manifest")


# ------------------------------------------------------------------------------------ recovery


def _killed_revocation(world, scores, folder: Path) -> tuple[Path, Path]:  # noqa: F811
    """k=2 promoted in ``folder``/L.json + M.json, then a revoking promote killed after its journal."""
    folder.mkdir()
    ledger, manifest = folder / "L.json", folder / "M.json"
    assert promote(scores["pass"], ledger, manifest, world["default"]).returncode == 0
    killed = promote(scores["fail"], ledger, manifest, world["strict"], HARNESS_FAULT="kill:promote:journal-written")
    assert killed.returncode == -9 and journal_path(ledger).exists() and allowed(manifest, 2)
    return ledger, manifest


def test_recovery_writes_the_files_the_journal_names_whatever_paths_the_reader_gave(world, scores, tmp_path):  # noqa: F811
    ledger, manifest = _killed_revocation(world, scores, tmp_path / "a")
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    shapes = cli("shapes", "--ledger", "../a/L.json", cwd=elsewhere)  # no --manifest
    assert shapes.returncode == 0, shapes.stderr
    assert list(elsewhere.iterdir()) == []  # nothing rolled forward into ./promoted-shapes.json
    assert not journal_path(ledger).exists() and state(ledger, 2) == "revoked" and not allowed(manifest, 2)
    book, m = read_consistent(ledger, manifest)
    assert m is not None and m.ledger_sha256 == book.ledger_sha256


def test_a_journal_copied_with_its_ledger_is_not_applied_to_the_copy(world, scores, tmp_path):  # noqa: F811
    ledger, manifest = _killed_revocation(world, scores, tmp_path / "a")
    (tmp_path / "b").mkdir()
    copy_ledger = tmp_path / "b" / "L.json"
    shutil.copy(ledger, copy_ledger)
    shutil.copy(journal_path(ledger), journal_path(copy_ledger))
    before = copy_ledger.read_bytes()
    line = one_line_error(
        cli("shapes", "--ledger", str(copy_ledger), "--manifest", str(tmp_path / "b" / "M.json")),
        f"interrupted commit of ledger {ledger.resolve()}",
        str(manifest.resolve()),
    )
    assert "refusing to apply it here" in line
    assert copy_ledger.read_bytes() == before and not (tmp_path / "b" / "M.json").exists()


def _add_k8(manifest: dict) -> dict:
    for model in manifest["models"].values():
        for dev in model["devices"].values():
            for prof in dev["profiles"].values():
                for pk in prof["packers"].values():
                    for op in pk["ops"]:
                        pk["ops"][op] = sorted(set(pk["ops"][op]) | {8})
    return seal({k: v for k, v in manifest.items() if k != "manifest_sha256"}, "manifest_sha256")


def test_a_resealed_journal_whose_manifest_adds_a_shape_is_not_applied(world, scores, tmp_path):  # noqa: F811
    ledger, manifest = _killed_revocation(world, scores, tmp_path / "a")
    journal = journal_path(ledger)
    data = json.loads(journal.read_text())
    data["manifest"] = _add_k8(data["manifest"])
    journal.write_text(json.dumps(seal({k: v for k, v in data.items() if k != "journal_sha256"}, "journal_sha256")))
    before = (ledger.read_bytes(), manifest.read_bytes())
    line = one_line_error(
        cli("shapes", "--ledger", str(ledger), "--manifest", str(manifest)),
        "k=8 for OP 0",
        "never promoted",
        "refusing to apply it",
    )
    assert str(journal) in line
    assert (ledger.read_bytes(), manifest.read_bytes()) == before and journal.exists()
    # a journal that is not one (its schema) is refused the same way, naming the key
    del data["manifest_first"]
    journal.write_text(json.dumps(seal({k: v for k, v in data.items() if k != "journal_sha256"}, "journal_sha256")))
    one_line_error(cli("shapes", "--ledger", str(ledger)), "manifest_first: missing")


def test_every_reader_refuses_a_resealed_manifest_naming_the_shape(world, scores, tmp_path):  # noqa: F811
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote(scores["pass"], ledger, manifest, world["default"]).returncode == 0
    manifest.write_text(json.dumps(_add_k8(json.loads(manifest.read_text()))))
    for args in (
        ("shapes", "--ledger", str(ledger), "--manifest", str(manifest)),
        (
            "shapes",
            "--may",
            "--ledger",
            str(ledger),
            "--manifest",
            str(manifest),
            "--packer",
            scores["p"].packer["identity"],
            "--k",
            "8",
            "--op",
            "0",
            "--device",
            "cpu",
        ),
        (
            "report",
            "--score",
            str(scores["pass"]),
            "--ledger",
            str(ledger),
            "--manifest",
            str(manifest),
            "--out",
            str(tmp_path / "report"),
        ),
    ):
        one_line_error(cli(*args), "is not the manifest derived from", "lists k=8 for OP 0", "never promoted")
    assert not (tmp_path / "report").exists()


def test_a_resealed_ledger_whose_promotion_lacks_its_evidence_is_refused_in_one_line(world, scores, tmp_path):  # noqa: F811
    """What the manifest is derived from is checked by the ledger's schema: never a KeyError (exit 3)."""
    from tests.tamper import edit_json

    ledger, manifest = tmp_path / "ledger.json", tmp_path / "promoted-shapes.json"
    assert promote(scores["pass"], ledger, manifest, world["default"]).returncode == 0

    def drop_laws(data: dict) -> None:
        for entry in data["entries"].values():
            entry["history"][-1]["evidence"].pop("laws")

    edit_json(ledger, drop_laws, field="ledger_sha256")
    one_line_error(cli("shapes", "--ledger", str(ledger), "--manifest", str(manifest)), "evidence lacks ['laws']")


# ------------------------------------------------------------------------------------ read-only


@contextlib.contextmanager
def read_only_folder(path: Path):
    """A tmpfs of our own at ``path``; the body gets a function that remounts it read-only."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(path)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield lambda: subprocess.run(["mount", "-o", "remount,ro", str(path)], check=True)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_queries_on_a_read_only_file_system_need_no_write_lock(world, scores, tmp_path):  # noqa: F811
    with read_only_folder(tmp_path / "ro") as remount_ro:
        ledger, manifest = tmp_path / "ro" / "L.json", tmp_path / "ro" / "M.json"
        assert promote(scores["pass"], ledger, manifest, world["default"]).returncode == 0
        remount_ro()
        shapes = cli("shapes", "--ledger", str(ledger), "--manifest", str(manifest))
        assert shapes.returncode == 0 and "k=2: promoted" in shapes.stdout, shapes.stderr
        report = cli(
            "report",
            "--score",
            str(scores["pass"]),
            "--ledger",
            str(ledger),
            "--manifest",
            str(manifest),
            "--out",
            str(tmp_path / "report"),
        )
        assert report.returncode == 0, report.stderr
        assert load_ledger(ledger).seq == 1


def test_a_pending_journal_on_a_read_only_file_system_is_reported(world, scores, tmp_path):  # noqa: F811
    with read_only_folder(tmp_path / "ro") as remount_ro:
        ledger, manifest = tmp_path / "ro" / "L.json", tmp_path / "ro" / "M.json"
        assert promote(scores["pass"], ledger, manifest, world["default"]).returncode == 0
        killed = promote(
            scores["fail"], ledger, manifest, world["strict"], HARNESS_FAULT="kill:promote:journal-written"
        )
        assert killed.returncode == -9
        remount_ro()
        one_line_error(
            cli("shapes", "--ledger", str(ledger), "--manifest", str(manifest)),
            "an interrupted promotion",
            "is pending and cannot be finished here",
            "Read-only file system",
        )
        assert journal_path(ledger).exists()
