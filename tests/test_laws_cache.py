"""The harness packer's laws verdict is judged once per code and settings, then reused across processes;
a cache file that was edited, or is of other code, is never trusted."""

from __future__ import annotations

import json

import pytest

import harness.laws
from harness.packers.packing import HarnessPacker
from harness.pipeline import laws_gate


@pytest.fixture
def counted(monkeypatch, tmp_path):
    """judge_laws with an empty in-process cache, a cache folder of its own, and a count of real judgings."""
    calls = []
    real = harness.laws.check_packer

    def check_packer(packer, **kwargs):
        calls.append(kwargs)
        return real(packer, **kwargs)

    monkeypatch.setattr(harness.laws, "check_packer", check_packer)
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    monkeypatch.setenv("HARNESS_LAWS_CACHE", str(tmp_path / "cache"))
    return calls, tmp_path / "cache"


def test_the_verdict_is_reused_by_a_later_process_and_equal(counted, monkeypatch):
    calls, cache = counted
    first = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert first.verdict == "hold" and len(calls) == 1 and len(list(cache.iterdir())) == 1
    monkeypatch.setattr(laws_gate, "_CACHE", {})  # as a new process would start
    again = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert again == first and len(calls) == 1
    laws_gate.judge_laws(HarnessPacker(), examples=3, max_blocks=4)  # other settings: judged
    assert len(calls) == 2


def test_an_edited_cache_file_is_ignored_and_judged_again(counted, monkeypatch):
    calls, cache = counted
    laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    (path,) = cache.iterdir()
    data = json.loads(path.read_text())
    data["verdict"]["examples"] = 100  # a forged figure, seal left as it was
    path.write_text(json.dumps(data))
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    verdict = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2 and verdict.examples == 2


def test_other_code_is_another_key(counted, monkeypatch):
    calls, _ = counted
    laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    monkeypatch.setattr(laws_gate, "_source_digest", lambda: "0" * 64)  # the harness's code changed
    laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2


def test_off_judges_every_time(counted, monkeypatch):
    calls, cache = counted
    monkeypatch.setenv("HARNESS_LAWS_CACHE", "off")
    for _ in range(2):
        monkeypatch.setattr(laws_gate, "_CACHE", {})
        laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2 and not cache.exists()


# ---------------------------------------------------------------------------- entries trusted beyond their key
# A sealed entry can still be wrong: re-sealed by hand, or written by a harness with a bug. Its verdict goes into
# the run manifest, the score and the ledger's evidence, so an entry is used only when it validates as a verdict
# and agrees with every field of its key; anything else is judged afresh (and rewritten).


def forge(path, change) -> None:
    """Edit the cache entry at ``path`` and re-seal it, as a careful forger (or a buggy writer) would."""
    from harness.base.jsonio import seal

    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(seal({k: v for k, v in data.items() if k != "sha256"}, "sha256")))


def _first_law(d: dict) -> str:
    return next(iter(d["verdict"]["laws"]))


BAD_ENTRIES = {
    "more-examples-than-asked": lambda d: d["verdict"].update(examples=100),
    "another-seed": lambda d: d["verdict"].update(seed=7),
    "another-packer": lambda d: d["verdict"].update(packer_identity="external:other/1.0@sha256:" + "0" * 16),
    "another-harness-version": lambda d: d["verdict"].update(harness_version="0.0.1"),
    "verdict-maybe": lambda d: d["verdict"].update(verdict="maybe"),
    "verdict-empty": lambda d: d.update(verdict={}),
    "verdict-a-list": lambda d: d.update(verdict=["hold"]),
    "hold-with-a-broken-law": lambda d: d["verdict"]["laws"].update({_first_law(d): "broken"}),
    "broken-naming-no-law": lambda d: d["verdict"].update(verdict="broken", broken=[]),
    "not-judged-with-examples": lambda d: d["verdict"].update(verdict="not-judged"),
    "an-unknown-key": lambda d: d["verdict"].update(confidence=1.0),
    "no-examples": lambda d: d["verdict"].pop("examples"),
}


@pytest.mark.parametrize("name", list(BAD_ENTRIES))
def test_an_entry_that_disagrees_with_its_key_or_its_schema_is_judged_afresh(counted, monkeypatch, capsys, name):
    from harness.base.errors import debugging

    calls, cache = counted
    first = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    (path,) = cache.iterdir()
    forge(path, BAD_ENTRIES[name])
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    capsys.readouterr()
    with debugging(True):
        again = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    assert len(calls) == 2 and again == first, name  # judged again: the verdict of what was asked
    (note,) = capsys.readouterr().err.splitlines()  # one line, under --debug
    assert note.startswith(f"harness: note: {path}: laws verdict cache entry ignored (") and note.endswith(
        "); judging the packing laws afresh"
    ), note
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    with debugging(False):
        assert laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4) == first
    assert len(calls) == 2 and capsys.readouterr().err == ""  # the fresh verdict was written over it: reused


def test_the_forger_of_the_bad_entries_makes_a_genuine_entry_when_it_changes_nothing(counted, monkeypatch, capsys):
    """Negative control of the cases above: an entry re-sealed unchanged is used (no judging, no note), so each
    refusal there is its change's, not the re-sealing's."""
    from harness.base.errors import debugging

    calls, cache = counted
    first = laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4)
    (path,) = cache.iterdir()
    forge(path, lambda d: None)
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    capsys.readouterr()
    with debugging(True):
        assert laws_gate.judge_laws(HarnessPacker(), examples=2, max_blocks=4) == first
    assert len(calls) == 1 and capsys.readouterr().err == ""


def test_through_the_command_line_a_run_records_the_examples_it_asked_for(golden_copy, tmp_path, monkeypatch, capsys):
    """``harness run --laws-examples 2`` over a cache entry of its key re-sealed to say 100 examples (and then
    over one whose verdict is ``maybe``): the run records 2 examples, exit 0, the --debug note on stderr. Before,
    the run manifest recorded ``laws.examples = 100`` (which the ledger carries as evidence), and ``maybe``
    ended the command with exit 2 after the whole run."""
    from tests.cli_run import harness_cli

    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_LAWS_CACHE", str(cache))
    monkeypatch.setattr(laws_gate, "_CACHE", {})
    args = (
        "run",
        "--golden",
        str(golden_copy),
        "--model",
        "small",
        "--shapes",
        "2",
        "--arrangements",
        "1",
        "--set",
        "packer.laws_examples=2",
        "--no-progress",
    )

    def run(where: str) -> tuple[dict, str]:
        monkeypatch.setattr(laws_gate, "_CACHE", {})
        code, out, err = harness_cli(capsys, monkeypatch, *args, "--runs", str(tmp_path / where), "--debug")
        assert code == 0, err
        (made,) = (tmp_path / where).iterdir()
        return json.loads((made / "manifest.json").read_text())["laws"], err

    genuine, err = run("runs0")
    assert genuine["examples"] == 2 and genuine["verdict"] == "hold" and "note" not in err  # control: as asked
    (path,) = cache.iterdir()
    for change in (BAD_ENTRIES["more-examples-than-asked"], BAD_ENTRIES["verdict-maybe"]):
        forge(path, change)
        laws, err = run(f"runs-{len(list(tmp_path.iterdir()))}")
        assert laws == genuine, laws
        assert f"harness: note: {path}: laws verdict cache entry ignored (" in err, err
