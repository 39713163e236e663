"""Through the CLI: a shape whose lane answers NaN is never shown with perfect-looking figures.

The ``nan_window`` control answers NaN for the first window of a packed call's second block. Before:
OP 1/2 reported max_abs 0, min_cosine 1.0, max_rel_l2 0 (over the finite rows only) in the score,
the report's tables and its summary (OP 0 showed its finite-only max_abs, 0), and the OP 0 max_abs
check passed. Now every such figure is null in the score (valid JSON, no bare NaN), renders as
'non-finite (N of M rows)' on the command line, in the report and in the JUnit file, and promotion's
re-derivation of the verdicts still agrees with the score.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from tests.test_cli import run

MODEL = ("--model", "lanes.controls:nan_window")


def test_a_nan_lane_reads_non_finite_everywhere(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert run(capsys, monkeypatch, "corpus", "synth", "c.parquet", "--blocks", "4", *MODEL)[0] == 0
    code, _, err = run(
        capsys, monkeypatch, "golden", "record", "--corpus", "c.parquet", "--release", "r", *MODEL, "--no-progress"
    )
    assert code == 0, err
    code, _, err = run(capsys, monkeypatch, "run", "--golden", "goldens/r", "--shapes", "2", *MODEL, "--no-progress")
    assert code == 0, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    code, out, err = run(capsys, monkeypatch, "score", "--golden", "goldens/r", "--run", str(run_dir))
    assert code == 1, err

    text = (tmp_path / "score.json").read_text()
    assert not re.search(r"\bNaN\b|Infinity", text.replace("NaN/Inf appeared", ""))  # strict JSON
    shape = json.loads(text)["shapes"]["2"]
    for op in ("1", "2"):
        m = shape["ops"][op]["metrics"]
        assert m["max_abs"] is None and m["min_cosine"] is None and m["max_rel_l2"] is None, m
        assert m["figures_non_finite"]["count"] > 0 and m["figures_non_finite"]["unit"] == "rows"
    op0 = shape["ops"]["0"]
    assert op0["metrics"]["max_abs"] is None
    assert next(c for c in op0["checks"] if c["metric"] == "max_abs")["ok"] is False
    nf = shape["ops"]["1"]["metrics"]["figures_non_finite"]
    expected = f"OP 1 min_cosine: non-finite ({nf['count']} of {nf['of']} rows), >= 0.99999 allowed"
    assert any(r.startswith(expected) for r in shape["reasons"]), shape["reasons"]
    assert any(r.startswith("OP 0 max_abs: non-finite (") for r in shape["reasons"])

    code, out, err = run(capsys, monkeypatch, "report", "--score", "score.json", "--junit", "junit.xml", "--out", "rep")
    assert code == 0, err
    md = (tmp_path / "rep" / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| 2 | FAIL"))
    assert row.count("non-finite (") >= 3 and "| 0 |" not in row and "| 1 |" not in row, row  # the shape summary
    assert f"| 1 | min_cosine | non-finite ({nf['count']} of {nf['of']} rows) |" in md
    assert "non-finite (" in (tmp_path / "rep" / "report.html").read_text()
    junit = ET.parse(tmp_path / "junit.xml").getroot()
    assert any(expected in (f.get("message", "") + (f.text or "")) for f in junit.iter("failure"))

    code, out, err = run(capsys, monkeypatch, "promote", "--score", "score.json")
    # the re-derivation agrees: the shape just stays out, and the last line (exit 1) says the ledger refused it
    assert code == 1 and "disagrees" not in err, err
    assert out.splitlines()[-1].startswith("FAIL: 1 of 1 shapes not promoted by the ledger"), out
