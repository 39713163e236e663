"""A team's kind of evidence, named in the configuration, end to end; and promotion that checks every result.

The kind is ``examples/evidence_kind_example.py`` (the share of OP 0 windows answered bit for bit), copied into
a working directory as ``team_exact.py`` and named by ``[evidence] kinds``, as a team would: a nightly scores,
stores, reports and promotes it and records its spec; a process that cannot import it refuses to promote the
score (nothing written), one that can promotes it. A result no loaded kind re-derives is refused; a spec that
names no kind is one line, exit 2; a default nightly records no trace of the seam; and the registry is the
same after a command (or a failed load) as before.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import HarnessError, LedgerError
from harness.evidence import kind_registry as registry
from tests.cli_run import harness_cli
from tests.pipeline import config_for, record
from tests.tamper import edit_json

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "evidence_kind_example.py"
SPEC = "team_exact:ExactWindows"
NAME = "exact_windows"
NIGHT = ("--model", "small", "--shapes", "4", "--set", "packer.laws_examples=3", "--no-progress", "--no-localise")
FAST = ("--set", "evidence.arrangements=1", "--set", "evidence.canaries=false")


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> Path:
    return record("small", tmp_path_factory.mktemp("golden"), 8, config=config_for("small"))[2].path


@pytest.fixture
def team(tmp_path, monkeypatch) -> Path:
    """A working directory holding the team's module and a configuration naming it; the process in it."""
    shutil.copy(EXAMPLE, tmp_path / "team_exact.py")
    (tmp_path / "harness.toml").write_text(f'[evidence]\nkinds = ["{SPEC}"]\n')
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("team_exact", None)  # the next test imports its own copy
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


def _nightly(capsys, monkeypatch, golden: Path, out: Path, *extra: str) -> tuple[int, list[str], str]:
    code, stdout, err = harness_cli(
        capsys, monkeypatch, "nightly", "--golden", str(golden), "--out", str(out), *NIGHT, *FAST, *extra
    )
    return code, stdout.strip().splitlines(), err


def _properties(junit: Path, case: str) -> dict[str, str]:
    found = next(c for c in ET.parse(junit).getroot().iter("testcase") if c.get("name") == case)
    props = found.find("properties")
    assert props is not None
    return {p.get("name", ""): p.get("value", "") for p in props}


def _promote(cwd: Path, score: Path) -> subprocess.CompletedProcess:
    """``harness promote`` in its own process, run from ``cwd`` (where the team's module is, or is not)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_DEBUG", "HARNESS_FAULT")}
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", HARNESS_LAWS_CACHE="off")
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "promote", "--score", str(score)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_team_kind_named_in_the_configuration_is_scored_reported_recorded_and_promoted(
    golden, team, tmp_path_factory, capsys, monkeypatch
):
    out = team / "night"
    code, lines, err = _nightly(capsys, monkeypatch, golden, out, "--config", "harness.toml")
    assert code == 0 and lines[-1].startswith("PASS: 1 shape"), (lines, err)
    assert registry.kinds() == registry.BUILT_IN  # the command's kinds left with it
    score = json.loads((out / "score.json").read_text())
    stored = score["shapes"]["4"]["more_evidence"][NAME]
    assert score["evidence_kinds"] == [SPEC] and stored["windows"] > 0 and stored["verdict"]["passed"]
    run = json.loads(next((out / "runs").glob("*/manifest.json")).read_text())
    assert run["evidence_kinds"] == [SPEC]
    report = (out / "report" / "report.md").read_text()
    assert "## Exact windows: OP 0 answered bit for bit as the golden" in report
    share = f"{stored['exact'] / stored['windows']:.1%}"
    assert f"| k=4 | {stored['exact']} of {stored['windows']} | {share} |" in report
    props = _properties(out / "junit.xml", "op0")
    assert props["exact_windows"] == str(stored["exact"]) and props["windows"] == str(stored["windows"])

    # promotion in a process that cannot import the kind: refused in one line, nothing written
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    done = _promote(elsewhere, out / "score.json")
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"evidence_kinds: {SPEC!r}: cannot import 'team_exact'" in lines[0]
    assert sorted(p.name for p in elsewhere.iterdir()) == []
    # negative control: where it can be imported, the same score promotes
    done = _promote(team, out / "score.json")
    assert done.returncode == 0 and "PASS: 1 shape promoted (k=4)" in done.stdout, done.stderr


def test_a_team_kind_that_refuses_gives_the_shape_its_cause(golden, team, capsys, monkeypatch):
    """Its check is a judged pair: a share it does not reach refuses the shape with a cause (numerics)."""
    (team / "team_exact.py").write_text(
        (team / "team_exact.py").read_text() + "\n\nclass Strict(ExactWindows):\n    min_share = 1.5\n"
    )
    (team / "harness.toml").write_text('[evidence]\nkinds = ["team_exact:Strict"]\n')
    code, lines, err = _nightly(capsys, monkeypatch, golden, team / "night", "--config", "harness.toml")
    score = json.loads((team / "night" / "score.json").read_text())
    cause = score["shapes"]["4"]["cause"]
    assert code == 1 and cause["evidence"].startswith("k=4 exact windows: OP 0 exact_share"), (lines, err)
    assert lines[-1].startswith("FAIL: shape k=4 refused (numerics at this batch shape"), lines


@pytest.fixture(scope="module")
def default_night(golden, tmp_path_factory) -> Path:
    """A nightly of the default configuration (no team kind), run once for the tests below."""
    out = tmp_path_factory.mktemp("default") / "night"
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(sys, "argv", ["harness", "nightly", "--golden", str(golden), "--out", str(out), *NIGHT, *FAST])
        from harness import cli

        with pytest.raises(SystemExit) as stopped:
            cli.main()
        assert stopped.value.code in (0, None)
    finally:
        mp.undo()
    return out


def test_a_default_nightly_records_no_trace_of_the_seam(default_night):
    score = json.loads((default_night / "score.json").read_text())
    run = json.loads(next((default_night / "runs").glob("*/manifest.json")).read_text())
    assert "evidence_kinds" not in score and "evidence_kinds" not in run
    assert all("more_evidence" not in s for s in score["shapes"].values())


def test_a_result_no_loaded_kind_re_derives_is_refused(default_night, tmp_path, capsys, monkeypatch):
    score = tmp_path / "score.json"
    shutil.copy(default_night / "score.json", score)
    monkeypatch.chdir(tmp_path)
    code, _, err = harness_cli(capsys, monkeypatch, "promote", "--score", str(score))
    assert code == 0, err  # negative control: the score as written promotes
    (tmp_path / "ledger.json").unlink()
    (tmp_path / "promoted-shapes.json").unlink()

    def forge(data: dict) -> None:
        data["shapes"]["4"]["more_evidence"] = {"unheard_of": {"passed": True}}

    edit_json(score, forge, field="digest")
    code, _, err = harness_cli(capsys, monkeypatch, "promote", "--score", str(score))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "shape k=4: more_evidence 'unheard_of' is re-derived by no evidence kind loaded here" in err
    assert not (tmp_path / "ledger.json").exists() and not (tmp_path / "promoted-shapes.json").exists()


BAD_KINDS = """\
from harness.evidence.kind import KindDefaults


class Plain:
    name = "plain"


class Nameless(KindDefaults):
    pass


class Repeats(KindDefaults):
    name = "repeats"
"""


@pytest.mark.parametrize(
    ("specs", "says"),
    [
        (["no_such_module:Kind"], "'no_such_module:Kind': cannot import 'no_such_module'"),
        (["team_exact:Nope"], "'team_exact:Nope': module 'team_exact' has no attribute 'Nope'"),
        (["bad_kinds:Plain"], "'bad_kinds:Plain': a Plain is not an evidence kind (lacks lanes"),
        (["bad_kinds:Nameless"], "'bad_kinds:Nameless': a Nameless is not an evidence kind (has no non-empty"),
        (["bad_kinds:Repeats"], "'bad_kinds:Repeats': its name 'repeats' is taken by a built-in kind"),
        ([SPEC, "team_copy:ExactWindows"], "'team_copy:ExactWindows': its name 'exact_windows' is taken by "),
        ([SPEC, SPEC], "evidence.kinds: 'team_exact:ExactWindows' is listed twice"),
        (["team_exact"], "evidence.kinds.0: "),
    ],
)
def test_a_spec_that_names_no_usable_kind_is_one_line_exit_2(golden, team, capsys, monkeypatch, specs, says):
    (team / "bad_kinds.py").write_text(BAD_KINDS)
    shutil.copy(team / "team_exact.py", team / "team_copy.py")
    (team / "harness.toml").write_text(f"[evidence]\nkinds = {json.dumps(specs)}\n")
    code, _, err = harness_cli(
        capsys, monkeypatch, "nightly", "--golden", str(golden), "--out", "n", "--config", "harness.toml", *NIGHT
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("harness: error: "), err
    assert says in lines[0] and not (team / "n").exists(), lines
    assert registry.kinds() == registry.BUILT_IN
    sys.modules.pop("team_copy", None)
    sys.modules.pop("bad_kinds", None)


EXAMPLE_SPEC = "examples.evidence_kind_example:ExactWindows"
# what a command may be given: a kind, the same again, another with its name, a built-in's name, nothing
SPECS = st.lists(
    st.sampled_from([EXAMPLE_SPEC, "harness.evidence.kind:KindDefaults", "no_such_module:K", "tests:nothing"]),
    max_size=4,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=SPECS, error=st.sampled_from([HarnessError, LedgerError]))
def test_the_registry_after_a_load_is_the_registry_before_it(specs, error):
    """Law: whatever is loaded, and whether the load fails or the block raises, the registry is restored; a
    load that succeeds holds each spec's kind once, after the built-in ones."""
    before = registry.kinds()
    try:
        with registry.loaded(specs, error=error) as found:
            assert registry.kinds() == (*registry.BUILT_IN, *dict.fromkeys(found))
            assert registry.loaded_specs() == tuple(dict.fromkeys(specs))
            raise KeyError("the block fails")
    except KeyError:
        assert set(specs) <= {EXAMPLE_SPEC}  # only a loadable kind gets as far as the block
    except error as exc:
        assert set(specs) - {EXAMPLE_SPEC} and str(exc).startswith("[evidence] kinds: ")
    assert registry.kinds() == before == registry.BUILT_IN and registry.loaded_specs() == ()


def test_the_check_of_the_law_sees_a_registry_left_dirty():
    """Negative control: a kind registered without the context manager stays, and the law's check says so."""
    registry.register(registry.load_kind(EXAMPLE_SPEC))
    try:
        assert registry.kinds() != registry.BUILT_IN
    finally:
        registry.unregister(NAME)
    assert registry.kinds() == registry.BUILT_IN
