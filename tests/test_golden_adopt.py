"""Adopting a regenerated golden, ``--golden`` of the folder of goldens, a TorchScript golden's name.

- ``golden record --regen`` writes ``goldens/NAME.regen-<time>``, which no nightly reads until adopted:
  ``harness golden adopt`` makes it ``goldens/NAME`` and keeps the old one as ``NAME.history-<time>``, kill-safe
  (a SIGKILL at every step leaves the old golden or the new one at NAME, never none, never a half), refusing a
  regen that is not whole, of another model or geometry, or a NAME another adopter holds.
- ``--golden goldens`` (the parent) lists the goldens inside at once, for every command taking a golden.
- a TorchScript model ``tiny.pt`` gets the golden ``goldens/tiny``.

A "regen" here is a copy of a recorded golden with another ``created`` time, resealed (so another golden id):
adopting moves folders and never reads outputs, so no model needs to run twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from golden.store import load_golden
from harness.base.errors import GoldenError
from tests.cli_run import harness_cli
from tests.tamper import edit_manifest

NAME = "small-rel"
REGEN = f"{NAME}.regen-20270101T000000000000Z"
OLD_HISTORY = "small-rel.history-"  # + the old golden's created time


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), err
    return lines[0]


def regen_of(src: Path, dest: Path, change=None, created: str = "2027-01-01T00:00:00+00:00") -> str:
    """A regeneration of the golden at ``src`` at ``dest`` (another created time; ``change`` edits more)."""
    shutil.copytree(src, dest)

    def edit(d: dict) -> None:
        d["created"] = created
        if change is not None:
            change(d)

    return edit_manifest(dest, edit, reseal=True)["golden_id"]


@pytest.fixture
def store(recorded_golden, tmp_path):
    """goldens/small-rel (the recorded golden) and goldens/small-rel.regen-<time> beside it."""
    goldens = tmp_path / "goldens"
    shutil.copytree(recorded_golden.path, goldens / NAME)
    new_id = regen_of(goldens / NAME, goldens / REGEN)
    return goldens, recorded_golden.golden_id, new_id


def harness(*args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_FAULT", "HARNESS_DEBUG")}
    if fault:
        env["HARNESS_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def state(goldens: Path) -> dict[str, str]:
    """Every entry of the golden folder: a golden's id (read without the adoption check), or what it is."""
    out = {}
    for p in sorted(goldens.iterdir()):
        if p.is_dir():
            m = p / "manifest.json"
            out[p.name] = json.loads(m.read_text())["golden_id"] if m.is_file() else "no manifest"
        elif not p.name.endswith(".lock"):
            out[p.name] = "file"
    return out


def history_of(goldens: Path) -> list[Path]:
    return sorted(goldens.glob(f"{OLD_HISTORY}*"))


# ---------------------------------------------------------------------------- adopting


def test_adopt_makes_the_regen_the_golden_and_keeps_the_old_one_as_history(capsys, monkeypatch, store):
    goldens, old_id, new_id = store
    (goldens / "ledger.json").write_text("{}")  # the ledger beside: named, untouched
    code, out, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))
    assert code == 0, err
    assert load_golden(goldens / NAME).golden_id == new_id
    [history] = history_of(goldens)
    assert load_golden(history).golden_id == old_id
    created = load_golden(history).manifest.created
    assert history.name == f"{NAME}.history-" + re.sub(r"[-:]", "", created)[:15] + "Z"
    assert not (goldens / REGEN).exists() and not (goldens / f".{NAME}.adopt.json").exists()
    assert (goldens / "ledger.json").read_text() == "{}"
    assert f"adopted {goldens / REGEN} as {goldens / NAME}: golden {new_id}" in out
    assert f"kept the golden it replaces, {old_id}, as {history}" in out
    assert f"{goldens / 'ledger.json'}: unchanged" in out and f"--golden {history}" in out


def test_adopting_the_history_back_rolls_back(capsys, monkeypatch, store):
    goldens, old_id, new_id = store
    assert harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))[0] == 0
    [history] = history_of(goldens)
    code, _, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(history))
    assert code == 0, err
    assert load_golden(goldens / NAME).golden_id == old_id
    kept = sorted(p for p in goldens.glob(f"{NAME}.history-*"))
    assert [load_golden(p).golden_id for p in kept] == [new_id]


def test_a_regen_with_no_golden_to_replace_becomes_the_golden(capsys, monkeypatch, store):
    goldens, old_id, new_id = store
    shutil.rmtree(goldens / NAME)
    code, out, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))
    assert code == 0, err
    assert load_golden(goldens / NAME).golden_id == new_id and "no golden at" in out and not history_of(goldens)


# ---------------------------------------------------------------------------- refusals: one line, nothing moved


def _tamper_a_file(regen: Path) -> None:
    p = regen / "op0.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "name,setup,says",
    [
        ("no-manifest", lambda r: (r / "manifest.json").unlink(), "not a complete golden"),
        ("a-file-changed", _tamper_a_file, "does not match the manifest's"),
        (
            "another-geometry",
            lambda r: edit_manifest(r, lambda d: d["geometry"].update(embedding_dim=64), reseal=True),
            "its geometry differs (",
        ),
        (
            "another-release",
            lambda r: edit_manifest(r, lambda d: d.update(release="other"), reseal=True),
            "records release 'other', not 'small-rel'",
        ),
    ],
)
def test_adopt_refuses_in_one_line_and_moves_nothing(capsys, monkeypatch, store, name, setup, says):
    goldens, old_id, new_id = store
    setup(goldens / REGEN)
    before = state(goldens)
    code, _, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))
    assert code == 2, err
    line = one_error_line(err)
    assert says in line and str(goldens / REGEN) in line, line
    assert state(goldens) == before and load_golden(goldens / NAME).golden_id == old_id


def test_a_regen_of_a_changed_model_is_adopted_saying_what_follows_in_the_ledger(capsys, monkeypatch, store):
    """Before: `golden record --regen` of a changed model printed "adopt it with: harness golden adopt ...", and that
    command refused it as another model. The old model's promotions stay keyed by its fingerprint."""
    goldens, old_id, _ = store
    new_id = edit_manifest(goldens / REGEN, lambda d: d["model"].update(fingerprint="f" * 64), reseal=True)["golden_id"]
    (goldens / "ledger.json").write_text("{}")
    code, out, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))
    assert code == 0, err
    assert load_golden(goldens / NAME).golden_id == new_id and load_golden(history_of(goldens)[0]).golden_id == old_id
    assert "the model changed: fingerprint " in out and "-> ffffffffffffffff..." in out, out
    assert "the new model starts unpromoted" in out and "the old model's promotions stay with it in the ledger" in out
    assert (goldens / "ledger.json").read_text() == "{}"


def test_record_regen_of_another_geometry_is_refused_at_once_with_the_command_that_works(capsys, monkeypatch, store):
    """A regen `golden adopt` would refuse is not recorded at all: one line, nothing written, the advice accepted."""
    goldens, old_id, _ = store
    shutil.rmtree(goldens / REGEN)
    before = state(goldens)
    args = ("golden", "record", "--goldens", str(goldens), "--release", NAME, "--regen", "--no-progress")
    code, _, err = harness_cli(capsys, monkeypatch, *args, "--model", "lanes.models.null_model:full")
    line = one_error_line(err)
    assert code == 2 and "--regen records a golden that replaces this one, but this model's geometry differs" in line
    assert "record it as another release (harness golden record --release NAME" in line, line
    assert state(goldens) == before
    code, out, err = harness_cli(capsys, monkeypatch, "golden", "record", "--help")
    assert code == 0 and "--release" in out  # the advice names an option the command takes


def test_adopt_refuses_a_name_that_is_not_a_regen(capsys, monkeypatch, store):
    goldens, old_id, _ = store
    code, _, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / NAME))
    assert code == 2 and "not a regenerated golden" in one_error_line(err)


def test_adopt_refuses_a_golden_another_writer_holds(capsys, monkeypatch, store):
    goldens, old_id, _ = store
    before = state(goldens)
    fd = os.open(goldens / f".{NAME}.lock", os.O_CREAT | os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another adopter at work (flock is per open file: this process is "another")
        code, _, err = harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))
    finally:
        os.close(fd)
    assert code == 2 and "held by another writer" in one_error_line(err), err
    assert state(goldens) == before
    assert harness_cli(capsys, monkeypatch, "golden", "adopt", str(goldens / REGEN))[0] == 0  # control: released


# ---------------------------------------------------------------------------- kill-safe


KILLS = {  # point: what a reader finds at goldens/NAME after the kill
    f"write:.{NAME}.adopt.json": "old",
    f"rename:.{NAME}.adopt.json": "old",
    "adopt:journal": "old",
    "adopt:swapped": "new",
    "adopt:kept": "new",
}


@pytest.mark.parametrize("point", list(KILLS))
def test_a_kill_at_every_step_leaves_the_old_golden_or_the_new_one_and_the_same_command_finishes(store, point):
    goldens, old_id, new_id = store
    killed = harness("golden", "adopt", str(goldens / REGEN), fault=f"kill:{point}")
    assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
    at_name = load_golden(goldens / NAME).golden_id  # whole: it loads, seal and sizes checked
    assert at_name == (old_id if KILLS[point] == "old" else new_id), point
    if (goldens / REGEN).exists():  # the regen's name holds the new golden, or the old one, refused while unfinished
        try:
            assert load_golden(goldens / REGEN).golden_id == new_id and KILLS[point] == "old"
        except GoldenError as exc:
            assert "unfinished adoption" in str(exc) and f"harness golden adopt {goldens / REGEN}" in str(exc)
            assert point == "adopt:swapped"
    done = harness("golden", "adopt", str(goldens / REGEN))
    assert done.returncode == 0, (point, done.stderr)
    assert load_golden(goldens / NAME).golden_id == new_id
    assert [load_golden(p).golden_id for p in history_of(goldens)] == [old_id]
    assert not (goldens / REGEN).exists() and not (goldens / f".{NAME}.adopt.json").exists()
    assert not [p.name for p in goldens.iterdir() if ".tmp-" in p.name]


def test_without_the_journal_a_kill_after_the_swap_would_leave_the_old_golden_adoptable(store):
    """Negative control of the journal: the state a kill after the swap leaves is only told apart by it."""
    goldens, old_id, new_id = store
    assert harness("golden", "adopt", str(goldens / REGEN), fault="kill:adopt:swapped").returncode == -9
    with pytest.raises(GoldenError, match="unfinished adoption"):
        load_golden(goldens / REGEN)
    (goldens / f".{NAME}.adopt.json").unlink()
    assert load_golden(goldens / REGEN).golden_id == old_id  # the old golden, under the regen's name


@pytest.mark.parametrize("history", ["../escaped", "..", "a/b", ""])
def test_a_hand_edited_journal_naming_a_path_is_refused_and_nothing_moves(store, history):
    """The journal names folders beside NAME; one that names a path (out of the goldens folder) is refused by
    its schema, in one line, before anything is renamed (the journal the adopter writes itself is accepted:
    test_a_kill_at_every_step_..., point adopt:swapped)."""
    goldens, old_id, new_id = store
    assert harness("golden", "adopt", str(goldens / REGEN), fault="kill:adopt:swapped").returncode == -9
    journal = goldens / f".{NAME}.adopt.json"
    data = json.loads(journal.read_text())
    data["history"] = history
    journal.write_text(json.dumps(data))
    before = sorted(p.name for p in goldens.parent.rglob("*"))
    done = harness("golden", "adopt", str(goldens / REGEN))
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stderr)
    assert f"{journal}: not a golden adoption journal: history" in line, line
    assert sorted(p.name for p in goldens.parent.rglob("*")) == before
    assert load_golden(goldens / NAME).golden_id == new_id


# ---------------------------------------------------------------------------- record --regen says how


def test_record_regen_prints_how_to_adopt_it_and_that_command_works(capsys, monkeypatch, store, backend, small_config):
    from harness.pipeline.commands import golden as golden_commands
    from harness.pipeline.record import GoldenChanges

    goldens, old_id, new_id = store
    changes = GoldenChanges(old_id, new_id, fingerprint_changed=False, environment=[])
    monkeypatch.setattr(golden_commands, "make_backend", lambda cfg, choice=None: backend)
    monkeypatch.setattr(golden_commands, "record_golden", lambda *a, **k: (load_golden(goldens / REGEN), changes))
    lines = golden_commands.record(small_config, None, goldens, NAME, True, "in-process", False).lines
    [hint] = [ln for ln in lines if ln.startswith("adopt it with: ")]
    assert f"harness golden adopt {goldens / REGEN} (it becomes {goldens / NAME};" in hint
    argv = hint.removeprefix("adopt it with: harness ").split(" (")[0].split()
    code, _, err = harness_cli(capsys, monkeypatch, *argv)
    assert code == 0 and load_golden(goldens / NAME).golden_id == new_id, err


def test_record_regen_help_names_adopt(capsys, monkeypatch):
    code, out, _ = harness_cli(capsys, monkeypatch, "golden", "record", "--help")
    assert code == 0 and "golden adopt" in " ".join(out.split())


def test_adopt_help_answers_where_the_old_one_goes_and_the_ledger(capsys, monkeypatch):
    code, out, _ = harness_cli(capsys, monkeypatch, "golden", "adopt", "--help")
    text = " ".join(out.split())
    assert code == 0 and "NAME.history-" in text and "ledger" in text and "kill" in text


# ---------------------------------------------------------------------------- --golden goldens (the parent)


@pytest.mark.parametrize(
    "command",
    [
        ("score", "--golden", "{goldens}", "--run", "{goldens}/nope", "--out", "{tmp}/s.json"),
        ("merge", "{goldens}/nope", "--golden", "{goldens}", "--out", "{tmp}/m"),
        ("golden", "show", "{goldens}"),
        ("run", "--golden", "{goldens}", "--model", "small", "--no-progress"),
    ],
)
def test_every_command_taking_a_golden_lists_the_goldens_of_the_folder_it_was_given(
    capsys, monkeypatch, store, tmp_path, no_model_building, command
):
    goldens, _, _ = store
    args = [a.format(goldens=goldens, tmp=tmp_path) for a in command]
    code, _, err = harness_cli(capsys, monkeypatch, *args)
    line = one_error_line(err)
    as_what = "GOLDEN" if command[0] == "golden" else "--golden"
    assert (
        code == 2
        and (
            f"{goldens}: not a golden; it holds 2: {goldens / NAME}, {goldens / REGEN} (pass one of them as {as_what})"
        )
        in line
    ), line


# ---------------------------------------------------------------------------- a TorchScript golden's name


def test_a_torchscript_golden_is_named_after_the_files_stem():
    """Before: goldens/tiny.pt (the release name was the model's name, the file's name)."""
    from harness.data.schemas.config_file import ModelSection, ReleaseSection
    from harness.pipeline.commands.golden import release_name
    from harness.release_config import release_config

    cfg = release_config(model=ModelSection(spec="models/tiny.pt"))
    assert cfg.release.name == ReleaseSection().name
    described = {"name": "tiny.pt", "kind": "torchscript", "path": "models/tiny.pt"}
    assert release_name(cfg, lambda: described) == "tiny"


def test_a_factory_models_dotted_name_is_kept():
    """Negative control: only a file's suffix is dropped (a factory's 'v1.2' is its name)."""

    from harness.data.schemas.config_file import ModelSection, ReleaseSection
    from harness.pipeline.commands.golden import release_name
    from harness.release_config import release_config

    cfg = release_config(model=ModelSection(spec="my_pkg.diar:make"))
    assert cfg.release.name == ReleaseSection().name
    assert release_name(cfg, lambda: {"name": "my-diar.v1.2", "kind": "factory"}) == "my-diar.v1.2"


def test_a_sealed_journal_whose_ids_were_swapped_by_hand_is_refused_and_nothing_moves(store):
    """A kill after the journal, before the swap; then the journal's two golden ids swapped by hand. Finishing it
    as written would take goldens/NAME for the new golden and move the regen (the new golden!) to the history
    name. The journal is sealed: it is refused, nothing moves; the untouched journal of the same kill is
    finished by the same command (negative control: test_a_kill_at_every_step_..., point adopt:journal)."""
    goldens, old_id, new_id = store
    assert harness("golden", "adopt", str(goldens / REGEN), fault="kill:adopt:journal").returncode == -9
    journal = goldens / f".{NAME}.adopt.json"
    data = json.loads(journal.read_text())
    assert data["journal_sha256"] and (data["old_golden_id"], data["new_golden_id"]) == (old_id, new_id)
    data["old_golden_id"], data["new_golden_id"] = new_id, old_id
    journal.write_text(json.dumps(data))
    before = state(goldens)
    done = harness("golden", "adopt", str(goldens / REGEN))
    line = one_error_line(done.stderr)
    assert done.returncode == 2 and f"{journal}: edited after it was written (journal_sha256" in line, line
    assert state(goldens) == before and load_golden(goldens / NAME).golden_id == old_id
