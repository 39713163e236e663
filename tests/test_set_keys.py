"""A ``--set`` key a command would not read is refused by name; every key is validated by one rule everywhere.

The example: ``harness run --set nightly.shard=1/10000001`` exited 0 and ran every block (``nightly`` refused the
same value; ``run`` ignored even a valid ``1/2``). Now the value is validated by the configuration's one
validator, wherever it is given, and a key the command does not read is refused in one line naming it, the
commands that read it, and the tables this one reads (:mod:`harness.cli.set_keys`). The class: every command
that takes ``--set``, every table it does not read. The controls: a key of a table it reads goes on (to the
next thing it checks), and the file may hold any key (it is shared by every command).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.base.errors import ConfigError, HarnessError
from harness.cli.set_keys import EVERY, RECORDED, REFUSED_KEYS, USES
from harness.corpus.shards import Shard
from harness.data.schemas import config_file
from harness.data.shard_text import shard_refusal
from harness.release_config import load_config, parse_set
from tests.cli_run import harness_cli

# a valid value for one key of every table (the refusal must be for the key, not the value)
VALUES = {
    "release": "release.name=x",
    "model": "model.seed=1",
    "shapes": "shapes.pad_to_fixed=true",
    "lanes": "lanes.warm_up='auto'",
    "masks": "masks.min_active_frames=1",
    "numerics": "numerics.threads=1",
    "tolerances": "tolerances.op0.mode='bitwise'",
    "corpus": "corpus.blocks=2",
    "backend": "backend.concurrency=2",
    "ray": "ray.retries=1",
    "packer": "packer.laws_examples=5",
    "nightly": "nightly.ledger='elsewhere.json'",
    "history": "history.nights=3",
    "evidence": "evidence.repeats=2",
    "localise": "localise.floor_multiple=5",
    "load": "load.blocks=2",
}
# each command with the least of its arguments that fail fast (nothing here builds a model or runs a lane)
ARGV = {
    "run": ("run", "--golden", "no-such-golden"),
    "merge": ("merge", "--golden", "no-such-golden", "no-such-shard"),
    "demo": ("demo", "--out", "/dev/null/demo"),
    "score": ("score", "--golden", "no-such-golden", "--run", "no-such-run"),
    "promote": ("promote", "--score", "no-such-score.json"),
    "golden record": ("golden", "record", "--corpus", "no-such.parquet", "--goldens", "/dev/null/g"),
    "golden verify": ("golden", "verify", "no-such-golden"),
    "golden diff": ("golden", "diff", "no-such-a", "no-such-b"),
    "serve": ("serve",),
    "audit": ("audit", "no-such-capture.parquet"),
}
REFUSALS = [(c, t) for c in ARGV for t in EVERY if t not in USES[c]] + [
    (c, key) for c, keys in REFUSED_KEYS.items() for key in keys
]


def test_the_tables_are_the_configurations_and_every_command_that_takes_set_is_listed():
    assert RECORDED == config_file.RECORDED
    assert set(EVERY) == set(config_file.ConfigFile.model_fields) == set(VALUES)
    assert set(ARGV) | {"nightly"} == set(USES)
    assert USES["nightly"] == EVERY  # the nightly reads every table


def test_the_issues_example_run_with_a_shard_is_refused_by_name(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, _, err = harness_cli(capsys, monkeypatch, "run", "--golden", "g", "--set", "nightly.shard=1/10000001")
    assert code == 2 and "nightly.shard" in err and "at most 10000000 shards" in err, err
    code, _, err = harness_cli(capsys, monkeypatch, "run", "--golden", "g", "--set", "nightly.shard=1/2")
    assert code == 2 and "harness run does not use nightly.shard; it is read by harness nightly" in err, err


@pytest.mark.parametrize(("command", "what"), REFUSALS, ids=[f"{c}-{t}" for c, t in REFUSALS])
def test_a_set_key_the_command_does_not_read_is_refused_by_name(capsys, monkeypatch, tmp_path, command, what):
    monkeypatch.chdir(tmp_path)
    given = VALUES[what] if what in VALUES else f"{what}=1/2"
    key = given.split("=", 1)[0]
    code, out, err = harness_cli(capsys, monkeypatch, *ARGV[command], "--set", given)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and f"harness {command} does not use {key}" in lines[0], err
    assert out == "" and list(tmp_path.iterdir()) == []  # before any work


@pytest.mark.parametrize("command", [c for c in ARGV if c not in ("serve", "demo")])
def test_negative_control_a_key_of_a_table_the_command_reads_goes_on(capsys, monkeypatch, tmp_path, command):
    monkeypatch.chdir(tmp_path)
    for table in USES[command]:
        code, _, err = harness_cli(capsys, monkeypatch, *ARGV[command], "--set", VALUES[table])
        assert code == 2 and "does not use" not in err, (table, err)  # refused for something else: a missing file


def test_negative_control_the_file_may_hold_any_key(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "harness.toml").write_text('[nightly]\nshard = "1/2"\n[ray]\nretries = 1\n')
    code, _, err = harness_cli(capsys, monkeypatch, "run", "--golden", "g", "--config", "harness.toml")
    assert code == 2 and "does not use" not in err and "g" in err, err


@given(
    st.one_of(st.text(max_size=30), st.builds(lambda i, n: f"{i}/{n}", st.integers(-3, 10**8), st.integers(-3, 10**8)))
)
def test_a_shard_is_one_rule_wherever_it_is_given(text):
    """The configuration's validator (every command), and the shard the nightly cuts, agree on every text."""
    why = shard_refusal(text)
    try:
        parsed = Shard.parse(text)
    except HarnessError as exc:
        assert why is not None and str(exc) == why
    else:
        assert why is None and str(parsed) == f"{parsed.index}/{parsed.count}"
    try:
        load_config(None, [parse_set(f"nightly.shard={text!r}".replace("\\", "\\\\"))])
    except ConfigError as exc:
        assert why is not None or "expected" in str(exc), exc
    else:
        assert why is None
