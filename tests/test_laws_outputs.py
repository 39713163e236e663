"""`harness laws` for the engine's CI: the packer's identity printed, one line per law with a count and its
minimal counterexample, each finding shown once, and `--json` / `--junit` files that say the same, checked
before the packer starts and read back for the last line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from junitparser import Failure, JUnitXml

from harness.data.blocks import Block
from harness.data.ops import Op
from harness.data.schemas import validate
from harness.data.schemas.laws_file import LawsReportFile
from harness.laws.boundary import edge_block
from harness.laws.law_tools import answer_error
from harness.laws.laws_report import BROKEN, HELD, Counterexample, LawOutcome, findings
from harness.laws.strategies import LAW_GEOMETRY
from harness.packers.inputs import describe_items
from tests.cli_run import laws_cli

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
WRONG_DTYPE = f"{PY} {ROOT / 'tests' / 'misbehaving_packer.py'} --mode wrong-dtype"  # every answer: OFFSETS int32
DEFECTIVE = f"{PY} {ROOT / 'examples' / 'packer_engine_defective.py'}"
jsonschema = pytest.importorskip("jsonschema", reason="the test extra's jsonschema is not installed")


def _one_line_exit_2(code: int, out: str, err: str, words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and words in lines[0], err


def test_one_malformed_answer_is_one_finding_shown_once_under_every_law_it_broke(capsys, monkeypatch):
    """The misbehaving packer answers every pack with int32 OFFSETS: 8 laws broken by one finding. The text is one
    line per law (on how many of how many examples, its counterexample in one line) and one section, not eight."""
    code, out, err = laws_cli(capsys, monkeypatch, "--packer-cmd", WRONG_DTYPE)
    assert code == 1, out + err
    lines = out.rstrip().splitlines()
    assert lines[1].startswith("packer identity: external:misbehaving/0.1@sha256:"), lines[1]
    laws = lines[2:10]
    for line in laws:
        assert " BROKEN     on " in line and " examples; minimal counterexample of " in line, line
        assert line.endswith("malformed answer: column 'OFFSETS' has type list<int32>, expected list<int64>") or (
            "[concatenation form only" in line
        ), line
    sections = out.split("\n\n")[1:-1]
    assert len(sections) == 1 and out.count("what differed:") == 1, out
    assert sections[0].startswith("laws well-formed, round-trip, own-samples, rebased-inside, per-window-function,")
    assert len(lines) <= 20, f"{len(lines)} lines for one finding"


def test_laws_broken_their_own_way_keep_their_own_sections(capsys, monkeypatch):
    """The defective example (a rebase bug): the malformed answers are one finding, each law broken in its own way
    (round-trip's OFFSETS, own-samples' window) its own section; no section twice."""
    code, out, err = laws_cli(capsys, monkeypatch, "--packer-cmd", DEFECTIVE)
    assert code == 1, out + err
    heads = [s.splitlines()[0] for s in out.split("\n\n")[1:-1]]
    assert heads[0].startswith("laws well-formed, rebased-inside, padding-dropped, ragged-index BROKEN by one finding")
    assert [h.split()[1] for h in heads[1:]] == ["round-trip", "own-samples", "per-window-function", "associative"]
    assert out.count("what differed:") == len(heads) == 5


def test_json_and_junit_say_what_the_text_says_and_validate(tmp_path, capsys, monkeypatch):
    json_out, junit = tmp_path / "ci" / "laws.json", tmp_path / "ci" / "junit.xml"
    code, out, err = laws_cli(
        capsys, monkeypatch, "--packer-cmd", DEFECTIVE, "--json", str(json_out), "--junit", str(junit)
    )
    assert code == 1, out + err
    data = json.loads(json_out.read_text())
    doc = validate(LawsReportFile, data, str(json_out))
    schema = json.loads((ROOT / "docs" / "schemas" / "laws-report.schema.json").read_text())
    problems = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    assert not problems, problems[:5]
    text = out.rstrip().splitlines()
    assert text[-1] == f"wrote {json_out} and {junit}: verdict broken, {doc.summary}"  # read back from the file
    assert text[-2] == doc.summary and doc.verdict == "broken"
    assert text[1].startswith(f"packer identity: {doc.packer.identity} ") and doc.packer.identity.startswith(
        "external:example-engine-packer/1.0.0@sha256:"
    )
    for law, line in zip(doc.laws, text[2:10], strict=True):  # the text's law lines, without the table's padding
        assert law.line == f"{law.law} BROKEN {line.split(' BROKEN     ', 1)[1]}", (law.line, line)
    assert [f.laws for f in doc.findings][0] == ["well-formed", "rebased-inside", "padding-dropped", "ragged-index"]
    assert all(law.broken_on >= 1 and law.counterexample is not None for law in doc.laws)
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert suite.name == "harness.laws" and suite.tests == 8 and suite.failures == 8
    props = {p.name: p.value for p in suite.properties()}
    assert props["packer_identity"] == doc.packer.identity and props["verdict"] == "broken"
    for case, law in zip(suite, doc.laws, strict=True):
        (failure,) = [r for r in case.result if isinstance(r, Failure)]
        assert case.name == law.law and failure.message == law.line and failure.type == "broken"
        assert failure.text.splitlines() == doc.findings[law.finding].text  # the finding's section, as printed


def test_a_packer_that_holds_every_law_writes_hold_and_exit_0(tmp_path, capsys, monkeypatch):
    json_out, junit = tmp_path / "laws.json", tmp_path / "junit.xml"
    code, out, err = laws_cli(capsys, monkeypatch, "--examples", "3", "--json", str(json_out), "--junit", str(junit))
    assert code == 0, out + err
    doc = validate(LawsReportFile, json.loads(json_out.read_text()), "laws.json")
    assert doc.verdict == "hold" and doc.findings == [] and doc.packer.identity.startswith("harness/")
    assert out.rstrip().splitlines()[-1].startswith(f"wrote {json_out} and {junit}: verdict hold, all 8 laws hold")
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert suite.tests == 8 and suite.failures == 0 and all(not case.result for case in suite)


@pytest.mark.parametrize(
    "where,words",
    [
        ("folder", "cannot write the --json file: it is a directory"),
        ("script", "cannot write the --json file over --packer-cmd"),
        ("same", "--json and --junit name the same file"),
        ("golden", "inside"),
        ("under-a-file", "is a file, not a folder"),
    ],
)
def test_outputs_are_refused_before_the_packer_starts(tmp_path, capsys, monkeypatch, where, words):
    """Before any work: the packer (which writes a file when it starts) never runs, and nothing is written."""
    started = tmp_path / "started"
    script = tmp_path / "packer.py"
    script.write_text(f"open({str(started)!r}, 'w').close()\n")
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "manifest.json").write_text('{"kind": "harness.golden"}')
    (tmp_path / "a-file").write_text("")
    json_out = {
        "folder": tmp_path,
        "script": script,
        "same": tmp_path / "x.xml",
        "golden": golden / "laws.json",
        "under-a-file": tmp_path / "a-file" / "laws.json",
    }[where]
    before = sorted(p.name for p in tmp_path.iterdir())
    args = ["--packer-cmd", f"{PY} {script}", "--json", str(json_out), "--junit", str(tmp_path / "x.xml")]
    _one_line_exit_2(*laws_cli(capsys, monkeypatch, *args), words)
    assert not started.exists() and sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_packer_that_cannot_run_writes_neither_file(tmp_path, capsys, monkeypatch):
    json_out = tmp_path / "laws.json"
    args = ["--packer-cmd", "/nonexistent/engine-packer", "--json", str(json_out), "--junit", str(tmp_path / "j.xml")]
    _one_line_exit_2(*laws_cli(capsys, monkeypatch, *args), "cannot start")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the laws of the grouping

DIFFERENCES = [
    "OFFSETS[{0}]={1}: offset is past the end of SPAN (length {2})",
    "block 'b{0}' split back from the request by its layout: OFFSETS {1} of {2} values differ",
    "layout has {0} segments, expected {1} ({2} blocks)",
]
LAW_NAMES = ["well-formed", "round-trip", "own-samples", "rebased-inside", "per-window-function", "associative"]


@st.composite
def outcomes(draw: st.DrawFn) -> list[LawOutcome]:
    out = []
    for name in LAW_NAMES:
        if not draw(st.booleans()):
            out.append(LawOutcome(name, "", HELD, 3, 0, tried=3))
            continue
        template = draw(st.sampled_from(DIFFERENCES))
        numbers = draw(st.lists(st.integers(0, 999), min_size=3, max_size=3))
        malformed = draw(st.booleans())
        blocks = tuple(edge_block(Op(0), i) for i in range(draw(st.integers(1, 3))))
        what = template.format(*numbers)
        example = Counterexample(blocks, {}, what, None, 1, answer_error=what if malformed else None)
        out.append(LawOutcome(name, "", BROKEN, 0, 0, counterexample=example, broken_on=1, tried=2))
    return out


@given(outcomes())
def test_findings_partition_the_broken_laws_by_their_difference_numbers_aside(laws):
    found = findings(laws)
    broken = [o for o in laws if o.status == BROKEN]
    grouped = [law for f in found for law in f.laws]
    assert sorted(grouped) == sorted(o.law for o in broken) and len(set(grouped)) == len(grouped)
    by_name = {o.law: o for o in laws}
    keys = [{by_name[law].counterexample.finding for law in f.laws} for f in found]
    assert all(len(k) == 1 for k in keys) and len({next(iter(k)) for k in keys}) == len(found)  # one key each
    for f in found:
        assert f.shown.law in f.laws
        assert len(f.counterexample.blocks) == min(len(by_name[law].counterexample.blocks) for law in f.laws)
        assert list(f.laws) == [o.law for o in laws if o.law in f.laws]  # the laws' order


def test_findings_keep_apart_what_differs_in_words():
    """Negative control: the same numbers in two differences of other words are two findings."""
    block = edge_block(Op(0), 0)
    a = Counterexample((block,), {}, DIFFERENCES[0].format(1, 2, 3), None, 1)
    b = Counterexample((block,), {}, DIFFERENCES[2].format(1, 2, 3), None, 1)
    laws = [LawOutcome(n, "", BROKEN, 0, 0, counterexample=c, broken_on=1, tried=1) for n, c in (("x", a), ("y", b))]
    assert [f.laws for f in findings(laws)] == [("x",), ("y",)]


@given(
    st.lists(st.sampled_from(["a", "b7", "blk-2", "x y", "it's"]), min_size=1, max_size=6, unique=True),
    st.text(min_size=1),
)
def test_an_answers_error_is_what_follows_the_request_it_names(ids, reason):
    """Whatever the ids and the reason (colons, quotes, the request's own words in it): the reason, whole."""
    template = edge_block(Op(0), 0)
    blocks = [Block.create(i, 0, template.span, template.offsets, template.valid, LAW_GEOMETRY) for i in ids]
    for prefix in ("a pack request of ", "packing "):
        for pad in ("", " padded to k=9"):
            message = f"packer 'p: q': answer to {prefix}{describe_items(blocks)}{pad}: {reason}"
            assert answer_error(message, blocks) == reason
    assert answer_error(f"packer 'p' refused: {reason}", blocks) == f"packer 'p' refused: {reason}"  # names none
