"""The command line: --help answers whole, and every expected failure is one line with exit status 2."""

from __future__ import annotations

import pytest

from tests.cli_run import harness_cli

run = harness_cli


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["corpus"],
        ["golden"],
        ["golden", "record"],
        ["run"],
        ["score"],
        ["promote"],
        ["report"],
        ["nightly"],
        ["merge"],
        ["serve"],
        ["demo"],
        ["shapes"],
        ["ledger"],
        ["golden", "show"],
        ["corpus", "synth"],
        ["init"],
    ],
)
def test_every_command_has_help(capsys, monkeypatch, command):
    code, out, _ = run(capsys, monkeypatch, *command, "--help")
    assert code == 0 and "Usage" in out


def test_help_explains_the_options(capsys, monkeypatch):
    _, out, _ = run(capsys, monkeypatch, "nightly", "--help")
    for words in ("[nightly] shard", "1-based", "--backend", "Triton", "--device", "Exit 0 only"):
        assert words in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["golden", "show", "/nonexistent/golden"], "no such golden directory"),
        (["golden", "record", "--model", "small", "--corpus", "/nonexistent.parquet"], "corpus file not found"),
        (["run", "--golden", "/nonexistent", "--model", "small"], "no such golden directory"),
        (["score", "--golden", "/nonexistent", "--run", "/nonexistent"], "no such golden directory"),
        (["promote", "--score", "/nonexistent.json"], "score file not found"),
        (["corpus", "synth", "x.parquet", "--model", "nonsense"], "model spec 'nonsense'"),
        (["golden", "record", "--config", "/nonexistent.toml"], "configuration file not found"),
        (["nightly", "--golden", "/x", "--set", "nightly.shard=5/4", "--model", "small"], "shard '5/4'"),
        (["run", "--golden", "/x", "--shapes", "2,x", "--model", "small"], "--shapes '2,x'"),
        (["run", "--golden", "/x", "--shapes", "2,,4", "--model", "small"], "an empty entry is not a shape"),
        (["corpus", "synth", "x.parquet", "--blocks", "abc"], "harness corpus synth: Invalid value for '--blocks'"),
        (["corpus", "synth", "x.parquet", "--blocks", "0"], "harness corpus synth: Invalid value for '--blocks'"),
        (["golden", "record", "--release", "../../x", "--model", "small"], "--release '../../x'"),
        (["golden", "record", "--release", "/abs", "--model", "small"], "--release '/abs'"),
        (["golden", "record", "--release", "", "--model", "small"], "--release ''"),
        (["score", "--golden", "/x", "--run", "/y", "--tolerance", "lenient"], "--tolerance 'lenient'"),
        (
            ["nightly", "--golden", "/x", "--set", "lanes.voiceprint_inputs=golden"],
            "--set 'lanes.voiceprint_inputs=golden': lanes.voiceprint_inputs: ",
        ),
        (["golden", "record", "--set", "model.seed=-1", "--model", "small"], "--set 'model.seed=-1': model.seed: "),
        (["nightly", "--golden", "/x", "--device", "gpu"], "--device 'gpu'"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, monkeypatch, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("harness: error: ") and message in lines[0], err


@pytest.mark.parametrize("spec", ["nonsense", "ftp:nope"])
def test_a_bad_backend_is_named(capsys, monkeypatch, tmp_path, recorded_golden, spec):
    code, _, err = run(
        capsys, monkeypatch, "golden", "verify", str(recorded_golden.path), "--model", "small", "--backend", spec
    )
    assert code == 2 and f"--backend {spec!r}: expected 'in-process' or a Triton URL" in err


def test_an_internal_error_is_status_3_with_one_line_and_the_traceback_on_request(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_FAULT", "bug:parquet:c.parquet")
    code, _, err = run(capsys, monkeypatch, "corpus", "synth", "c.parquet", "--blocks", "1", "--model", "small")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 3 and len(lines) == 1, err
    assert lines[0].startswith("harness: internal error in 'corpus synth'") and "RuntimeError" in lines[0]
    assert "rerun with --debug" in lines[0] and not list(tmp_path.iterdir())
    code, _, err = run(
        capsys, monkeypatch, "--debug", "corpus", "synth", "c.parquet", "--blocks", "1", "--model", "small"
    )
    assert code == 3 and "Traceback (most recent call last)" in err


def test_help_texts_keep_the_config_keys(capsys, monkeypatch):
    """Help is plain text: '[section] key' survives (no markup eats it) and every command says what it does."""
    _, out, _ = run(capsys, monkeypatch, "nightly", "--help")
    out = " ".join(out.split())  # help is wrapped to the terminal
    for key in (
        "[shapes] candidates",
        "[lanes] voiceprint_inputs",
        "[numerics] mkldnn",
        "[model] spec",
        "[tolerances.op0]",
        "[release] device",
    ):
        assert key in out, key
    _, out, _ = run(capsys, monkeypatch, "--help")
    out = " ".join(out.split())
    assert "Exit status: 0 everything holds; 1 a verdict failed" in out and "3 an internal error" in out
    _, out, _ = run(capsys, monkeypatch, "golden", "record", "--help")
    out = " ".join(out.split())
    assert "[corpus] blocks" in out and "[release] name" in out


def test_corpus_commands(capsys, monkeypatch, tmp_path):
    from harness.corpus.wav import write_wav

    small = ["--model", "small"]
    code, out, _ = run(capsys, monkeypatch, "corpus", "synth", str(tmp_path / "c.parquet"), "--blocks", "3", *small)
    assert code == 0 and '"blocks": 3' in out
    code, out, _ = run(capsys, monkeypatch, "corpus", "show", str(tmp_path / "c.parquet"), *small)
    assert code == 0 and '"blocks": 3' in out
    code, _, err = run(capsys, monkeypatch, "corpus", "synth", str(tmp_path / "c.parquet"), "--blocks", "3", *small)
    assert code == 2 and "the file exists" in err  # nothing is overwritten without --force
    write_wav(tmp_path / "a.wav", [0.1] * 40_000, 16_000)
    code, out, _ = run(
        capsys, monkeypatch, "corpus", "wav", str(tmp_path / "w.parquet"), str(tmp_path / "a.wav"), *small
    )
    assert code == 0 and '"sources": ["wav"]' in out
    code, out, _ = run(
        capsys, monkeypatch, "corpus", "capture", str(tmp_path / "k.parquet"), str(tmp_path / "c.parquet"), *small
    )
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
    code, out, _ = run(capsys, monkeypatch, "score", "--golden", "goldens/r", "--run", str(run_dir))
    assert code == 0 and "shape k=2: PASS" in out and "shape k=4: PASS" in out
    code, out, _ = run(capsys, monkeypatch, "promote", "--score", "score.json")
    assert code == 0 and "shape k=2: candidate -> promoted" in out
    code, out, _ = run(capsys, monkeypatch, "shapes", "--ledger", "ledger.json")
    assert code == 0 and "OP 0: k = 1, 2, 4" in out and "promoted" in out
    code, out, _ = run(capsys, monkeypatch, "ledger", "--shape", "2")
    assert code == 0 and "shape k=2" in out and "pass -> promoted" in out
    code, out, _ = run(capsys, monkeypatch, "golden", "show", "goldens/r")
    assert code == 0 and "golden r@" in out and "reproduction when recorded: bitwise" in out
    code, out, _ = run(capsys, monkeypatch, "golden", "show", "goldens/r", "--json")
    assert code == 0 and '"kind": "harness.golden"' in out
    code, out, _ = run(
        capsys, monkeypatch, "report", "--score", "score.json", "--ledger", "ledger.json", "--junit", "junit.xml"
    )
    assert code == 0 and (tmp_path / "report" / "report.html").is_file() and (tmp_path / "junit.xml").is_file()
    code, out, err = run(capsys, monkeypatch, "golden", "record", "--corpus", "c.parquet", "--release", "r", *small)
    assert code == 2 and "record with --regen" in err


def _listed_options(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if line.startswith("  -")]


def test_nightly_help_lists_at_most_17_options_and_names_the_set_keys(capsys, monkeypatch):
    """Rarely used settings are configuration keys (--set TABLE.KEY=VALUE), not flags: --help stays short, at most
    17 options, --help included, the evidence's --arrangements and --repeats in plain sight."""
    _, out, _ = run(capsys, monkeypatch, "nightly", "--help")
    listed = _listed_options(out)
    assert len(listed) <= 17, listed
    assert "--arrangements" in listed and "--repeats" in listed
    for kept in ("--golden", "--config", "--shapes", "--backend", "--tolerance", "--ray", "--set", "--no-promote"):
        assert kept in listed or f"-c, {kept}" in out, kept
    for gone in ("--ray-workers", "--concurrency", "--packer-cmd", "--laws-examples", "--seed", "--ledger"):
        assert gone not in listed and gone not in out, gone
    flat = " ".join(out.split())
    for key in (
        "[backend] url, concurrency, shm, model_label",
        "[ray] address, workers, shards, retries, accelerator",
        "[packer] spec, cmd, digest, laws_examples",
        "[nightly] shard",
    ):
        assert key in flat, key


@pytest.mark.parametrize(
    "args,message",
    [
        # --set: any key, validated with the file, named as typed
        (
            ["nightly", "--golden", "/x", "--ray", "local", "--set", "ray.workers=0"],
            "--set 'ray.workers=0': ray.workers: ",
        ),
        (
            ["run", "--golden", "/x", "--set", "packer.laws_examples=-1"],
            "--set 'packer.laws_examples=-1': packer.laws_examples: ",
        ),
        (["golden", "record", "--set", "numerics.threads=-1"], "--set 'numerics.threads=-1': numerics.threads: "),
        (["nightly", "--golden", "/x", "--set", "ray.accelerator=H100"], "ray.accelerator: applies with --ray only"),
        (["nightly", "--golden", "/x", "--set", "ray.workers=0"], "--set 'ray.workers=0': ray.workers: "),
        (["audit", "c.parquet", "--set", "ray.retries=-1"], "--set 'ray.retries=-1': ray.retries: "),
        (
            ["score", "--golden", "/x", "--run", "/y", "--set", "tolerances.op1.mode=lenient"],
            "--set 'tolerances.op1.mode=lenient': tolerances.op1.mode: ",
        ),
        (["nightly", "--golden", "/x", "--set", "backend.concurency=4"], "did you mean 'concurrency'?"),
        (["nightly", "--golden", "/x", "--set", "concurrency"], "--set 'concurrency': expected TABLE.KEY=VALUE"),
    ],
)
def test_set_is_refused_by_the_one_validator(capsys, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, monkeypatch, *args)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("harness: error: ") and message in lines[0], err


def test_set_and_flags_reach_the_configuration_flags_winning():
    from harness.cli.app import backend_of, resolve_config

    cfg = resolve_config(
        None,
        sets=[
            "backend.concurrency=4",
            "ray.workers=2",
            "nightly.ledger='l.json'",
            "backend.shm=true",
            "backend.url='http://127.0.0.1:9'",
            "ray.address='auto'",
        ],
        backend="http://127.0.0.1:8000",
        ray="local",
    )
    assert cfg.backend.concurrency == 4 and cfg.ray.workers == 2 and cfg.nightly.ledger == "l.json"
    assert backend_of(cfg).url == "http://127.0.0.1:8000" and backend_of(cfg).shm and cfg.ray.address == "local"


# every removed alias of a configuration key, and a --set value that its key accepts
REMOVED = {
    "--seed": "model.seed=3",
    "--mkldnn": "numerics.mkldnn=true",
    "--no-mkldnn": "numerics.mkldnn=false",
    "--threads": "numerics.threads=1",
    "--voiceprint-inputs": "lanes.voiceprint_inputs=chained",
    "--concurrency": "backend.concurrency=2",
    "--shm": "backend.shm=true",
    "--no-shm": "backend.shm=false",
    "--model-label": "backend.model_label=mine",
    "--ray-workers": "ray.workers=2",
    "--ray-shards": "ray.shards=2",
    "--ray-retries": "ray.retries=1",
    "--ray-accelerator": "ray.accelerator=H100",
    "--packer": "packer.spec=harness",
    "--packer-cmd": "packer.cmd=cat",
    "--packer-digest": f"packer.digest={'ab' * 32}",
    "--laws-examples": "packer.laws_examples=0",
    "--shard": "nightly.shard=1/2",
    "--ledger": "nightly.ledger=l.json",
    "--manifest": "nightly.manifest=m.json",
    "--sweep-concurrency": "load.concurrency=[1,2]",
}
NEEDS_RAY = ("ray.",)


def test_the_removed_flags_are_the_table_of_the_command_line():
    from harness.cli.app import REMOVED_FLAGS

    assert set(REMOVED_FLAGS) == set(REMOVED)
    for flag, key in REMOVED_FLAGS.items():
        assert key.split("=")[0] == REMOVED[flag].split("=")[0], flag


@pytest.mark.parametrize("flag", sorted(REMOVED))
def test_a_removed_flag_is_one_line_naming_its_set_key_and_the_set_form_is_accepted(
    capsys, monkeypatch, tmp_path, flag
):
    from harness.cli.app import REMOVED_FLAGS

    monkeypatch.chdir(tmp_path)
    nightly = ["nightly", "--golden", str(tmp_path / "nowhere"), "--model", "small", "--no-progress"]
    value = [] if flag in ("--mkldnn", "--no-mkldnn", "--shm", "--no-shm") else ["1"]
    code, out, err = run(capsys, monkeypatch, *nightly, flag, *value)
    assert (code, out, err) == (
        2,
        "",
        f"harness: error: harness nightly: {flag} was removed: use --set {REMOVED_FLAGS[flag]}\n",
    )
    code, _, err = run(capsys, monkeypatch, *nightly, f"{flag}=1")  # --flag=value: the same line
    assert code == 2 and err.endswith(f"{flag} was removed: use --set {REMOVED_FLAGS[flag]}\n"), err
    # the --set form is accepted and validated: the command goes on to the golden, which is not there
    ray = ["--ray", "local"] if REMOVED[flag].startswith(NEEDS_RAY) else []
    code, _, err = run(capsys, monkeypatch, *nightly, *ray, "--set", REMOVED[flag])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "nowhere" in lines[0] and "was removed" not in lines[0], err
    assert not list(tmp_path.iterdir())  # refused before any work: nothing written


@pytest.mark.parametrize(
    "args,line",
    [
        (
            ["run", "--golden", "g", "--laws-examples", "0"],
            "harness run: --laws-examples was removed: use --set packer.laws_examples=N",
        ),
        (["golden", "record", "--seed", "1"], "harness golden record: --seed was removed: use --set model.seed=N"),
        (
            ["golden", "verify", "g", "--threads", "1"],
            "harness golden verify: --threads was removed: use --set numerics.threads=N",
        ),
        (
            ["merge", "n1", "--golden", "g", "--ledger", "l.json"],
            "harness merge: --ledger was removed: use --set nightly.ledger=PATH",
        ),
        (
            ["audit", "c.parquet", "--ray-workers", "2"],
            "harness audit: --ray-workers was removed: use --set ray.workers=N",
        ),
        (["serve", "--no-mkldnn"], "harness serve: --no-mkldnn was removed: use --set numerics.mkldnn=false"),
    ],
)
def test_every_command_that_had_an_alias_names_its_set_key(capsys, monkeypatch, tmp_path, args, line):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, monkeypatch, *args)
    assert (code, out, err) == (2, "", f"harness: error: {line}\n")


def test_a_commands_own_option_of_a_removed_name_stays_its_own(capsys, monkeypatch, tmp_path):
    """promote, report, shapes, ledger and history have their own --ledger/--manifest, laws its own --packer, --seed
    and --packer-digest: those are not the removed aliases. After `--` nothing is an option."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(
        capsys, monkeypatch, "promote", "--score", "s.json", "--ledger", "l.json", "--manifest", "m.json"
    )
    assert code == 2 and "score file not found" in err and "removed" not in err, err
    code, _, err = run(capsys, monkeypatch, "laws", "--packer-cmd", "cat", "--packer-digest", "xyz", "--seed", "1")
    assert code == 2 and "--packer-digest 'xyz': expected a sha256" in err and "removed" not in err, err
    code, _, err = run(capsys, monkeypatch, "laws", "--ledger", "l.json")  # laws takes no --set: click's own line
    assert code == 2 and "No such option: --ledger" in err, err
    code, _, err = run(capsys, monkeypatch, "nightly", "--golden", "g", "--", "--seed")
    assert code == 2 and "removed" not in err, err
