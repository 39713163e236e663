"""The command line: --help answers, and every expected failure is one line with exit status 2."""

from __future__ import annotations

import sys

import pytest

from harness import cli


def run(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    code = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("command", [[], ["corpus"], ["golden"], ["golden", "record"], ["run"], ["score"],
                                     ["promote"], ["report"], ["nightly"], ["merge"], ["serve"], ["demo"]])
def test_every_command_has_help(capsys, monkeypatch, command):
    code, out, _ = run(capsys, monkeypatch, *command, "--help")
    assert code == 0 and "Usage" in out


def test_help_explains_the_options(capsys, monkeypatch):
    _, out, _ = run(capsys, monkeypatch, "nightly", "--help")
    for words in ("--shard", "1-based", "--backend", "Triton", "--device", "Exit 0 only"):
        assert words in out


@pytest.mark.parametrize("args,message", [
    (["golden", "show", "/nonexistent/golden"], "no such golden directory"),
    (["golden", "record", "--model", "small", "--corpus", "/nonexistent.parquet"], "corpus file not found"),
    (["run", "--golden", "/nonexistent", "--model", "small"], "no such golden directory"),
    (["score", "--golden", "/nonexistent", "--run", "/nonexistent"], "no such golden directory"),
    (["promote", "--score", "/nonexistent.json"], "score file not found"),
    (["corpus", "synth", "x.parquet", "--model", "nonsense"], "model spec 'nonsense'"),
    (["golden", "record", "--config", "/nonexistent.toml"], "configuration file not found"),
    (["nightly", "--golden", "/x", "--shard", "5/4", "--model", "small"], "--shard '5/4'"),
    (["run", "--golden", "/x", "--shapes", "2,x", "--model", "small"], "--shapes '2,x'"),
    (["golden", "verify", "/x", "--backend", "ftp:nope", "--model", "small"], "no such golden directory"),
])
def test_errors_are_one_line_with_status_2(capsys, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, monkeypatch, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and message in lines[0], err


def test_a_bad_backend_is_named(capsys, monkeypatch, tmp_path, recorded_golden):
    code, _, err = run(capsys, monkeypatch, "golden", "verify", str(recorded_golden.path), "--model", "small",
                       "--backend", "nonsense")
    assert code == 2 and "--backend 'nonsense'" in err


def test_corpus_commands(capsys, monkeypatch, tmp_path):
    from harness.corpus.wav import write_wav

    code, out, _ = run(capsys, monkeypatch, "corpus", "synth", str(tmp_path / "c.parquet"), "--blocks", "3")
    assert code == 0 and '"blocks": 3' in out
    code, out, _ = run(capsys, monkeypatch, "corpus", "show", str(tmp_path / "c.parquet"))
    assert code == 0 and '"blocks": 3' in out
    write_wav(tmp_path / "a.wav", [0.1] * 40_000, 16_000)
    code, out, _ = run(capsys, monkeypatch, "corpus", "wav", str(tmp_path / "w.parquet"), str(tmp_path / "a.wav"))
    assert code == 0 and '"sources": ["wav"]' in out
    code, out, _ = run(capsys, monkeypatch, "corpus", "capture", str(tmp_path / "k.parquet"),
                       str(tmp_path / "c.parquet"))
    assert code == 0 and (tmp_path / "k.parquet").is_file()


def test_golden_record_verify_run_score_promote_report(capsys, monkeypatch, tmp_path, small_corpus, geometry):
    from harness.corpus import write_corpus

    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "c.parquet", small_corpus, geometry)
    small = ["--model", "small", "--no-progress"]
    code, out, _ = run(capsys, monkeypatch, "golden", "record", "--corpus", "c.parquet", "--release", "r", *small)
    assert code == 0 and "recorded golden r@" in out and "reproduced bitwise" in out
    code, out, _ = run(capsys, monkeypatch, "golden", "verify", "goldens/r", *small)
    assert code == 0 and "reproduced bitwise" in out
    code, out, _ = run(capsys, monkeypatch, "run", "--golden", "goldens/r", "--shapes", "2,4", *small)
    assert code == 0 and "wrote run" in out
    (run_dir,) = (tmp_path / "runs").iterdir()
    code, out, _ = run(capsys, monkeypatch, "score", "--golden", "goldens/r", "--run", str(run_dir), "--model", "small")
    assert code == 0 and "shape k=2: PASS" in out and "shape k=4: PASS" in out
    code, out, _ = run(capsys, monkeypatch, "promote", "--score", "score.json")
    assert code == 0 and "shape k=2: candidate -> promoted" in out
    code, out, _ = run(capsys, monkeypatch, "report", "--score", "score.json", "--ledger", "ledger.json", "--junit",
                       "junit.xml")
    assert code == 0 and (tmp_path / "report" / "report.html").is_file() and (tmp_path / "junit.xml").is_file()
    code, out, err = run(capsys, monkeypatch, "golden", "record", "--corpus", "c.parquet", "--release", "r", *small)
    assert code == 2 and "record with --regen" in err
