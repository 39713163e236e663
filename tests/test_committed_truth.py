"""A committing command's last line and exit status are what the ledger holds, read back after the commit.

The example: a packer that names itself per session (tests/protocol_packer.py ``version-by-window``: the fast
lane's session and the packing laws' session, at another geometry, are two packers). The ledger rightly
records a failed event (the laws were judged for another packer than the fast lane's) and ``shapes --may``
says no; the nightly printed ``PASS: 1 shape promoted (k=2)`` and exited 0. The class: for every command that
commits a score to the ledger (``nightly``, ``merge``, ``promote``), the last line says PASS exactly when every
ledger event this command wrote passed, lists exactly the shapes those events promoted, and the exit status
follows it. A property test holds :func:`harness.ledger.committed.held_to_ledger` to that law, with a negative
control (a summary that ignores the ledger breaks it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import EXIT_FAIL, EXIT_PASS
from harness.data.schemas.records import LedgerEvent
from harness.ledger.committed import Committed, CommittedShape, held_to_ledger
from tests.catalogue_setups import CFG, QUIET
from tests.workspace_cli import harness, make_workspace

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "protocol_packer.py"
PLAIN = f"{sys.executable} {SCRIPT} --mode plain"
TWO_NAMES = f"{sys.executable} {SCRIPT} --mode version-by-window"
FAST = ("--arrangements", "1", "--set", "packer.laws_examples=2")


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("committed"))


def events_of(ledger: Path, run_id: str) -> dict[int, dict]:
    """The events of run ``run_id`` in the ledger file, by shape (read as the file holds them)."""
    data = json.loads(ledger.read_text())
    return {
        int(entry["shape"]): event
        for entry in data["entries"].values()
        for event in entry["history"]
        if event["run_id"] == run_id
    }


def agrees(stdout: str, code: int, events: dict[int, dict]) -> None:
    """The law: PASS (exit 0) exactly when every event of this command passed, naming exactly the promoted shapes."""
    last = stdout.splitlines()[-1]
    assert events, "the command wrote no ledger event"
    promoted = sorted(k for k, e in events.items() if e["verdict"] == "pass")
    if len(promoted) == len(events):
        assert code == 0 and last.startswith("PASS"), (code, last)
        listed = re.search(r"\(k=([0-9,]+)\)", last)
        assert listed is not None and [int(k) for k in listed.group(1).split(",")] == promoted, last
    else:
        assert code == 1 and last.startswith("FAIL"), (code, last)
        for e in events.values():
            if e["verdict"] == "fail" and e["reasons"] and "not promoted by the ledger" in last:
                assert e["reasons"][0][:60] in last, (e["reasons"][0], last)


def nightly(root: Path, out: Path, packer: str, *more: str):
    ledger, manifest = out.parent / f"{out.name}-ledger.json", out.parent / f"{out.name}-manifest.json"
    done = harness(root, "nightly", "--golden", "goldens/r", "--out", str(out), *CFG, *QUIET, *FAST,
                   "--set", f"packer.cmd={packer}", "--set", f"nightly.ledger={ledger}",
                   "--set", f"nightly.manifest={manifest}", *more)  # fmt: skip
    return done, ledger, manifest


def run_id_of(out: Path) -> str:
    return json.loads((out / "score.json").read_text())["run"]["id"]


def test_a_nightly_whose_ledger_refused_what_its_score_passed_fails_with_the_ledgers_reason(ws, tmp_path):
    done, ledger, manifest = nightly(ws, tmp_path / "n", TWO_NAMES)
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith("FAIL: shape k=2 not promoted by the ledger") and "the packing laws were judged" in last
    assert "the score passed them" in last, last
    events = events_of(ledger, run_id_of(tmp_path / "n"))
    assert {k: e["verdict"] for k, e in events.items()} == {2: "fail"}
    agrees(done.stdout, done.returncode, events)
    identity = json.loads(ledger.read_text())["entries"].popitem()[1]["packer_identity"]
    may = harness(ws, "shapes", "--may", "--packer", identity, "--k", "2", "--op", "0", "--device", "cpu",
                  "--ledger", str(ledger), "--manifest", str(manifest))  # fmt: skip
    assert may.returncode == 1, may.stdout + may.stderr  # the engine is told no, as the last line says


def test_negative_control_a_packer_with_one_name_passes_as_the_ledger_promoted_it(ws, tmp_path):
    done, ledger, _ = nightly(ws, tmp_path / "n", PLAIN)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("PASS: 1 shape promoted (k=2)")
    agrees(done.stdout, done.returncode, events_of(ledger, run_id_of(tmp_path / "n")))


@pytest.mark.parametrize("packer", [PLAIN, TWO_NAMES], ids=["one-name", "two-names"])
def test_merge_says_what_its_commit_wrote(ws, tmp_path, packer):
    shard, _, _ = nightly(ws, tmp_path / "shard", packer, "--set", "nightly.shard=1/1")
    assert shard.returncode == 0, shard.stderr
    ledger, manifest = tmp_path / "m-ledger.json", tmp_path / "m-manifest.json"
    done = harness(ws, "merge", "--golden", "goldens/r", str(tmp_path / "shard"), "--out", str(tmp_path / "m"),
                   *CFG, "--set", f"nightly.ledger={ledger}", "--set", f"nightly.manifest={manifest}")  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    agrees(done.stdout, done.returncode, events_of(ledger, run_id_of(tmp_path / "m")))
    assert done.returncode == (0 if packer == PLAIN else 1)


@pytest.mark.parametrize("packer", [PLAIN, TWO_NAMES], ids=["one-name", "two-names"])
def test_promote_says_what_its_commit_wrote(ws, tmp_path, packer):
    runs = tmp_path / "runs"
    done = harness(ws, "run", "--golden", "goldens/r", "--runs", str(runs), *CFG, *QUIET, *FAST,
                   "--set", f"packer.cmd={packer}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = runs.iterdir()
    score = tmp_path / "score.json"
    done = harness(ws, "score", "--golden", "goldens/r", "--run", str(run), "--out", str(score), *CFG)
    assert done.returncode == 0, done.stdout + done.stderr  # the score alone passes the shape in both cases
    ledger, manifest = tmp_path / "ledger.json", tmp_path / "manifest.json"
    done = harness(ws, "promote", "--score", str(score), "--ledger", str(ledger), "--manifest", str(manifest), *CFG)
    agrees(done.stdout, done.returncode, events_of(ledger, run.name))
    assert done.returncode == (0 if packer == PLAIN else 1), done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith(f"wrote {ledger} and {manifest}")


# ------------------------------------------------------------------ the law, as a property


def _event(verdict: str, reason: str) -> LedgerEvent:
    return LedgerEvent.model_construct(seq=3, verdict=verdict, state="promoted", reasons=[reason], run_id="r")


@st.composite
def nights(draw):
    """A score's shapes (k -> passed by the score) and what the ledger holds of them (pass, fail or nothing)."""
    ks = draw(st.lists(st.integers(2, 64), min_size=1, max_size=6, unique=True))
    scored = {k: draw(st.booleans()) for k in ks}
    held = {k: draw(st.sampled_from(["pass", "fail", "missing"]) if scored[k] else st.just("fail")) for k in ks}
    return scored, held


def _apply(held_to, scored, held):
    score_ok = all(scored.values())
    summary = "PASS: shapes promoted (k=...), golden reproduced bitwise" if score_ok else "FAIL: the score's reason"
    shapes = tuple(
        CommittedShape(k, "p", "candidate", _event(v, f"reason of k={k}")) for k, v in sorted(held.items())
        if v != "missing"
    )  # fmt: skip
    verification = SimpleNamespace(status="bitwise", summary="golden reproduced bitwise")
    line, code = held_to(
        summary, EXIT_PASS if score_ok else EXIT_FAIL, Committed("l.json", 3, shapes), scored, verification
    )
    return score_ok, line, code


def _law(held_to, scored, held) -> None:
    score_ok, line, code = _apply(held_to, scored, held)
    ledger_ok = all(v == "pass" for v in held.values())
    assert code == (EXIT_PASS if score_ok and ledger_ok else EXIT_FAIL)
    assert line.startswith("PASS") == (code == EXIT_PASS)
    if score_ok and not ledger_ok:
        not_promoted = {k for k, v in held.items() if v != "pass"}
        named = {int(k) for k in re.findall(r"shape k=(\d+)", line)}
        assert named <= not_promoted and len(named) == min(3, len(not_promoted)), line  # three named, the rest counted
        if len(not_promoted) > 3:
            assert f"{len(not_promoted) - 3} more shape(s) not promoted" in line, line


@given(nights())
def test_the_last_line_and_status_follow_the_ledger_never_better_than_the_score(night):
    _law(held_to_ledger, *night)


def test_negative_control_a_summary_that_ignores_the_ledger_breaks_the_law():
    def ignores(summary, code, *_):
        return summary, code

    with pytest.raises(AssertionError):
        _law(ignores, {2: True}, {2: "fail"})
    _law(held_to_ledger, {2: True}, {2: "fail"})
