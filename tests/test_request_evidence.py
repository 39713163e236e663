"""A shape is promoted only on evidence from requests of exactly k blocks, and every run carries the
packing-laws verdict of the packer it used.

The end-to-end cases go through the command line on the 12-block session golden: ``--shapes 32``
(no 32-block request at all) is refused with one line naming the full requests and the blocks
needed; ``--shapes 4`` (three full requests, the whole corpus) promotes; a packer that breaks the
packing laws, or laws not judged at all, passes no shape; a hand-edited score is refused by promotion.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.base.errors import LedgerError
from harness.base.jsonio import seal
from harness.data.schemas.results import RequestEvidence, Score
from harness.data.shape import Shape
from harness.evidence.request_evidence import (
    MIN_FULL_REQUESTS,
    RequestCounter,
    RequestCounts,
    enough,
    gate_blocks,
    needed_blocks,
    refusal,
)
from harness.evidence.shape_gates import laws_refusal, shape_gates
from harness.judging.judges.judge_base import Check, CheckDetails, OpVerdict
from harness.ledger.score_check import check_self_consistent
from harness.throughput.timing import summarize_calls
from tests.cli_run import harness_cli

FAST_LAWS = "3"  # examples per law in the end-to-end runs: the verdict is recorded, the laws' own tests judge them


def call(lane: str, k: int, op: int, ids: list[str], wall: float = 1.0) -> dict:
    return {
        "lane": lane,
        "shape": k,
        "op": op,
        "blocks": len(ids),
        "windows": 8 * len(ids),
        "rows": 0,
        "request_bytes": 1,
        "wall_s": wall,
        "peak_device_bytes": None,
        "replica": 0,
        "block_ids": ids,
    }


# ----------------------------------------------------------------------------- counting (unit)


def test_only_requests_of_exactly_k_real_blocks_count_and_the_minimum_over_ops_is_kept():
    counter = RequestCounter()
    calls = [
        call("exact", 1, 0, ["a"]),
        call("fast", 4, 0, list("abcd")),
        call("fast", 4, 0, list("ef")),
        # a padded last pack: shape 4, two real blocks (padding is never among the block ids)
        call("fast", 4, 1, list("abcd")),
        call("fast", 4, 1, list("ef")),
        call("fast", 4, 2, list("ef")),
    ]  # OP 2: the full pack had no voiceprint rows, so was not sent
    assert list(counter.observe(calls)) == calls  # a pass-through: the call log is read once
    assert counter.counts(4, [0]) == RequestCounts(full=1, full_blocks=4, partial=1, partial_blocks=2)
    assert counter.counts(4, [0, 1, 2]).full == 0  # OP 2 has no full request: the evidence is OP 2's
    assert counter.counts(4, [0, 1, 2]).partial == 1
    assert counter.counts(32, [0]).full == 0


def req(
    full: int, full_blocks: int, partial: int, needed_blocks: int | None, partial_blocks: int = 0
) -> RequestEvidence:
    return RequestEvidence(
        full=full, full_blocks=full_blocks, partial=partial, partial_blocks=partial_blocks, needed_blocks=needed_blocks
    )


def op0(*checks: Check) -> dict[str, OpVerdict]:
    return {"0": OpVerdict.of(0, 4, list(checks), {}, {})}


def test_blocks_the_gate_needs_follow_from_the_rate_checks_units_per_block():
    # 3/n <= 1e-3 needs 3000 audio frames; 12 blocks gave 4800 (400 per block): 8 blocks
    ops = op0(
        Check.gate(0, "flip_rate_upper95", 0.0, "<=", 1e-3, CheckDetails(total=4800)),
        Check.gate(0, "max_abs", 0.0, "<=", 1e-4, CheckDetails(total=96)),
    )
    assert gate_blocks(ops, 12) == 8
    assert needed_blocks(4, ops, 12) == 8 and needed_blocks(32, ops, 12) == 32 and needed_blocks(3, ops, 12) == 9
    assert needed_blocks(4, op0(), 12) == 4 * MIN_FULL_REQUESTS  # no gate: one full request
    assert enough(req(2, 8, 1, 8))
    assert not enough(req(1, 4, 1, 8))  # negative control
    # every request full: the corpus is the evidence, its rate checks say (once) whether it is enough
    assert enough(req(1, 4, 0, 8))
    assert not enough(req(0, 0, 0, 8))


def test_the_refusal_says_how_many_full_requests_the_corpus_gave_and_how_many_blocks_it_needs():
    line = refusal(32, req(0, 0, 1, 32, partial_blocks=16))
    assert line is not None
    assert "0 full 32-block request(s)" in line and "needs 32 blocks in full 32-block requests" in line
    assert "1 partial pack(s) of 16 block(s) that do not count" in line and "\n" not in line
    assert refusal(4, req(3, 12, 0, 8)) is None


def test_a_speedup_comes_only_from_full_requests():
    calls = [call("exact", 1, 0, [b], 1.0) for b in "abcdef"]
    calls += [call("fast", 4, 0, list("abcd"), 1.0), call("fast", 4, 0, list("ef"), 0.1)]
    lane = summarize_calls(calls)["4"]
    assert lane["speedup"] == pytest.approx(4.0)  # the partial pack's 20x is not a 4-block speedup
    assert lane["repetitions"] == 1 and "1 partial pack(s) excluded" in lane["speedup_basis"]
    only_partial = summarize_calls([*calls[:6], call("fast", 32, 0, list("abcdef"), 0.1)])["32"]
    assert only_partial["speedup"] is None and "no full 32-block request" in only_partial["speedup_basis"]


def test_a_packer_that_broke_the_laws_or_was_not_judged_fails_every_shape():
    held = {"packer_identity": "harness/x", "verdict": "hold", "broken": []}
    broken = {"packer_identity": "callable:m:f@sha256:00", "verdict": "broken", "broken": ["own-samples"]}
    unjudged = {"packer_identity": "harness/x", "verdict": "not-judged", "broken": []}
    requests = req(3, 12, 0, 4)
    assert shape_gates(Shape(4), True, requests, held) == (True, [])
    ok, reasons = shape_gates(Shape(4), True, requests, broken)
    assert not ok and reasons == [laws_refusal(broken)]
    assert "packer callable:m:f@sha256:00 broke the packing laws (own-samples): no shape may be promoted" in reasons[0]
    assert not shape_gates(Shape(4), True, requests, unjudged)[0] and "packer.laws_examples = 0" in laws_refusal(
        unjudged
    )


# ----------------------------------------------------------------------------- through the CLI


def harness(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    return harness_cli(capsys, monkeypatch, *args)


def nightly(monkeypatch, capsys, golden: Path, out: Path, *extra: str) -> tuple[int, list[str], dict]:
    code, stdout, err = harness(
        monkeypatch,
        capsys,
        "nightly",
        "--golden",
        str(golden),
        "--out",
        str(out),
        "--model",
        "small",
        "--no-progress",
        "--no-localise",
        *extra,
    )
    assert code in (0, 1), err
    return code, stdout.strip().splitlines(), json.loads((out / "score.json").read_text())


def promoted_ks(manifest: Path) -> set[int]:
    """Every k the engine's manifest allows, wherever its layout nests the per-OP lists."""
    found: set[int] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "ops" and isinstance(value, dict):
                    found.update(k for ks in value.values() if isinstance(ks, list) for k in ks)
                else:
                    walk(value)

    walk(json.loads(manifest.read_text()))
    return found


def run_manifest(out: Path) -> dict:
    (run,) = [p for p in (out / "runs").iterdir() if not p.name.startswith(".")]
    return json.loads((run / "manifest.json").read_text())


def test_a_shape_larger_than_the_corpus_is_refused_with_the_line(tmp_path, golden_copy, monkeypatch, capsys):
    """--shapes 32 on a 12-block corpus is no PASS: its one 12-block pack is no evidence for k = 32."""
    code, lines, score = nightly(
        monkeypatch, capsys, golden_copy, tmp_path / "o", "--shapes", "32", "--set", f"packer.laws_examples={FAST_LAWS}"
    )
    assert code == 1, lines
    shape = score["shapes"]["32"]
    assert shape["verdict"] == "fail" and all(op["passed"] for op in shape["ops"].values())  # only the gate refuses
    assert shape["requests"] == {"full": 0, "full_blocks": 0, "partial": 1, "partial_blocks": 12, "needed_blocks": 32}
    assert lines[-1].startswith(
        "FAIL: shape k=32 refused (not judged at its size): the corpus gave 0 full 32-block request(s)"
    )
    assert "needs 32 blocks in full 32-block requests" in lines[-1]
    assert score["throughput"]["32"]["speedup"] is None  # no speedup from a partial pack
    assert 32 not in promoted_ks(golden_copy.parent / "promoted-shapes.json")
    junit = (tmp_path / "o" / "junit.xml").read_text()
    assert 'name="evidence"' in junit and "0 full 32-block request(s)" in junit
    report = (tmp_path / "o" / "report" / "report.md").read_text()
    assert "requests of exactly k blocks" in report and "| 32 | 0 | 0 | 1 (12) | 32 | **no** |" in report


def test_enough_full_requests_promote_and_the_run_and_score_carry_the_laws(tmp_path, golden_copy, monkeypatch, capsys):
    code, lines, score = nightly(
        monkeypatch, capsys, golden_copy, tmp_path / "o", "--shapes", "4", "--set", f"packer.laws_examples={FAST_LAWS}"
    )
    assert code == 0 and lines[-1].startswith("PASS"), lines
    requests = score["shapes"]["4"]["requests"]
    assert requests["full"] == 3 and requests["full_blocks"] == 12 and requests["partial"] == 0
    assert requests["needed_blocks"] <= 12
    laws = run_manifest(tmp_path / "o")["laws"]
    assert laws == score["laws"] and laws["verdict"] == "hold" and laws["examples"] == int(FAST_LAWS)
    assert laws["packer_identity"] == score["packer"]["identity"] and laws["seed"] == 0
    assert "3 full 4-block request(s)" in score["throughput"]["4"]["speedup_basis"]
    report = (tmp_path / "o" / "report" / "report.md").read_text()
    assert "| 4 | 3 | 12 | 0 (0) |" in report and "**hold**" in report
    assert 4 in promoted_ks(golden_copy.parent / "promoted-shapes.json")

    # promotion re-derives the verdict: a score edited to claim too few... is refused (negative control)
    forged = json.loads(json.dumps(score))
    forged["shapes"]["4"]["requests"].update(full=0, full_blocks=0, partial=1, partial_blocks=12)
    with pytest.raises(LedgerError, match="disagrees with its OPs, its full k-block requests"):
        check_self_consistent(
            Score.model_validate(seal({k: v for k, v in forged.items() if k != "digest"}, "digest")), "forged"
        )
    forged = json.loads(json.dumps(score))
    forged["shapes"]["4"]["requests"]["needed_blocks"] = 4
    with pytest.raises(LedgerError, match="needed_blocks is 4"):
        check_self_consistent(Score.model_validate(forged), "forged")


def test_a_packer_that_breaks_the_laws_gets_no_shape_passed(tmp_path, golden_copy, monkeypatch, capsys):
    code, lines, score = nightly(
        monkeypatch,
        capsys,
        golden_copy,
        tmp_path / "o",
        "--shapes",
        "4",
        "--set",
        "packer.spec=harness.laws.law_controls:speaker_dropping_packer",
        "--set",
        "packer.laws_examples=10",
    )
    assert code == 1, lines
    laws = score["laws"]
    assert laws["verdict"] == "broken" and laws["broken"], laws
    assert all(s["verdict"] == "fail" for s in score["shapes"].values())
    assert "broke the packing laws" in lines[-1] and "no shape may be promoted with it" in lines[-1]


def test_laws_not_judged_promote_nothing_and_a_hand_edited_pass_is_refused(tmp_path, golden_copy, monkeypatch, capsys):
    code, lines, score = nightly(
        monkeypatch, capsys, golden_copy, tmp_path / "o", "--shapes", "4", "--set", "packer.laws_examples=0"
    )
    assert code == 1 and "packer.laws_examples = 0" in lines[-1], lines
    assert score["laws"]["verdict"] == "not-judged" and run_manifest(tmp_path / "o")["laws"]["examples"] == 0
    forged = {k: v for k, v in score.items() if k != "digest"}
    forged["shapes"]["4"]["verdict"], forged["verdict"] = "pass", "pass"
    forged["shapes"]["4"]["reasons"] = []
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(seal(forged, "digest")))
    code, _, err = harness(monkeypatch, capsys, "promote", "--score", str(path))
    assert code == 2 and "verdict 'pass' disagrees" in err and "packer.laws_examples = 0" in err, err


def test_a_negative_laws_examples_is_one_line(tmp_path, golden_copy, monkeypatch, capsys):
    code, _, err = harness(
        monkeypatch,
        capsys,
        "run",
        "--golden",
        str(golden_copy),
        "--runs",
        str(tmp_path / "r"),
        "--model",
        "small",
        "--set",
        "packer.laws_examples=-1",
        "--no-progress",
    )
    assert code == 2 and err.strip().startswith("harness: error:") and "packer.laws_examples" in err
    assert len(err.strip().splitlines()) == 1
