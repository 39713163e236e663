"""Lines that say the right thing, in words a user can use as they are.

- A figure or limit a check prints is what the configuration takes back: ``would pass at 3222``, never
  ``3,222`` (which ``--set tolerances.op0.max_confident_flips=3,222`` refuses).
- A shape the corpus never sent at its size (``--shapes 8`` on a 4-block corpus) is refused as *not judged at
  its size*, with the full-request counts, even where its partial packs differ (a model whose answer depends
  on the call's size): no 8-block request was sent, so nothing was judged at this batch shape.
- A run id never limits the shape list: 30 shapes run (their run id lists the first and counts the rest).
- A ``HARNESS_PROCESS_SET`` inherited from a parent harness does not make a golden record the user's
  ``OMP_WAIT_POLICY=ACTIVE`` as set by the harness.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from golden.runs import new_run_id
from harness.base import process_settings
from harness.base.figures import fmt, passing_limit
from harness.base.fsio import safe_name
from harness.release_config import load_config, parse_set
from tests.catalogue_setups import CFG, QUIET
from tests.workspace_cli import harness, make_workspace


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("lines"))


# ------------------------------------------------------------------ a number given back as printed


@given(st.integers(0, 10**12))
def test_a_printed_count_limit_is_taken_back_by_the_configuration_as_printed(n):
    printed = passing_limit(n, "<=")
    assert printed == fmt(n) == str(n) and "," not in printed
    assert tomllib.loads(f"v = {printed}")["v"] == n
    cfg = load_config(None, [parse_set(f"tolerances.op0.max_confident_flips={printed}")])
    assert cfg.tolerances.op0.max_confident_flips == n


def test_negative_control_a_thousands_separator_is_what_the_configuration_refuses():
    with pytest.raises(Exception, match="max_confident_flips"):
        load_config(None, [parse_set("tolerances.op0.max_confident_flips=3,222")])


# ------------------------------------------------------------------ a shape never sent at its size


def test_a_shape_never_sent_at_its_size_is_refused_as_such_even_where_its_partial_packs_differ(ws, tmp_path):
    """``lanes.controls:count_dependent`` adds 1e-6 x the call's windows: judged bitwise, a 4-block pack at k = 8
    differs from the golden by numerics, and before the fix was refused for them."""
    model = ("--model", "lanes.controls:count_dependent")
    done = harness(ws, "golden", "record", "--corpus", "c.parquet", "--release", "cd", *CFG, *QUIET, *model)
    assert done.returncode == 0, done.stderr
    done = harness(ws, "nightly", "--golden", "goldens/cd", "--out", str(tmp_path / "n"), *CFG, *QUIET, *model,
                   "--shapes", "8", "--arrangements", "1", "--no-promote", "--tolerance", "bitwise")  # fmt: skip
    assert done.returncode == 1, done.stderr
    score = json.loads((tmp_path / "n" / "score.json").read_text())
    shape = score["shapes"]["8"]
    assert shape["requests"]["full"] == 0 and shape["requests"]["partial"] == 1
    assert any(not v["passed"] for v in shape["ops"].values())  # the partial pack's numerics did differ
    assert shape["cause"]["kind"] == "not judged at its size", shape["cause"]
    last = done.stdout.splitlines()[-1]
    assert "refused (not judged at its size): the corpus gave 0 full 8-block request(s)" in last, last
    # negative control: at k = 2 the corpus sends full requests, and the same numerics are the cause
    done = harness(ws, "nightly", "--golden", "goldens/cd", "--out", str(tmp_path / "n2"), *CFG, *QUIET, *model,
                   "--shapes", "2", "--arrangements", "1", "--no-promote", "--tolerance", "bitwise")  # fmt: skip
    cause = json.loads((tmp_path / "n2" / "score.json").read_text())["shapes"]["2"]["cause"]
    assert done.returncode == 1 and cause["kind"] == "numerics at this batch shape beyond the tolerances", cause


# ------------------------------------------------------------------ a run id of many shapes


@given(st.lists(st.integers(1, 100_000), min_size=0, max_size=300, unique=True))
def test_a_run_id_is_a_folder_name_for_any_list_of_shapes(shapes):
    run_id = new_run_id(shapes)
    assert len(run_id) <= 100 and safe_name(run_id, "run id") == run_id
    assert new_run_id(shapes) != run_id  # unique


def test_thirty_shapes_run_and_their_run_id_names_the_first_and_counts_the_rest(ws, tmp_path):
    shapes = ",".join(str(k) for k in range(2, 32))
    done = harness(ws, "run", "--golden", "goldens/r", "--runs", str(tmp_path / "runs"), *CFG, *QUIET,
                   "--shapes", shapes, "--arrangements", "1", "--set", "packer.laws_examples=0")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = (tmp_path / "runs").iterdir()
    assert "-k2-3-4-" in run.name and "-more-" in run.name
    assert json.loads((run / "manifest.json").read_text())["shapes"] == list(range(2, 32))  # all of them


# ------------------------------------------------------------------ what the harness set, by value


def _clean_env() -> dict[str, str]:
    ours = ("OMP_WAIT_POLICY", "GLIBC_TUNABLES", "HARNESS_PROCESS_SET")
    return {k: v for k, v in os.environ.items() if k not in ours and not k.startswith("MALLOC_")}


def test_in_force_names_a_value_the_harness_set_only_while_it_is_still_that_value(monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.setenv(process_settings.MARK, process_settings._mark(["OMP_WAIT_POLICY"]))
    assert process_settings.in_force()["omp_wait_policy"] == "PASSIVE (set by the harness)"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's, under a mark inherited from a parent harness
    assert process_settings.in_force()["omp_wait_policy"] == "ACTIVE (the environment)"
    monkeypatch.setenv(process_settings.MARK, "OMP_WAIT_POLICY")  # a mark naming it without its value
    assert process_settings.in_force()["omp_wait_policy"] == "ACTIVE (the environment)"


def test_a_golden_recorded_under_a_parent_harness_mark_records_the_users_setting_as_theirs(ws, monkeypatch):
    parent = process_settings._value_digest("PASSIVE")
    inherited = os.environ.get("OMP_WAIT_POLICY")  # the workspace's golden was recorded under it (tox gives one)
    for key in list(os.environ):
        if key not in _clean_env():
            monkeypatch.delenv(key)
    done = harness(ws, "golden", "record", "--corpus", "c.parquet", "--release", "nested", *CFG, *QUIET,
                   OMP_WAIT_POLICY="ACTIVE", HARNESS_PROCESS_SET=f"OMP_WAIT_POLICY={parent}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    process = json.loads((ws / "goldens" / "nested" / "manifest.json").read_text())["environment"]["process"]
    assert process["omp_wait_policy"] == "ACTIVE (the environment)", process
    # negative control: the workspace's own golden, recorded with nothing set, says the harness set it
    own = json.loads((ws / "goldens" / "r" / "manifest.json").read_text())["environment"]["process"]
    assert own["omp_wait_policy"] in (
        "PASSIVE (set by the harness)",
        f"{inherited} (the environment)",
    )
