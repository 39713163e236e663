"""`harness golden diff A B`: two goldens of one corpus, B's exact lane judged against A's.

The pair is real: the same model and corpus recorded with oneDNN on (A) and off (B, NNPACK and
the native kernels), which changes low bits on a CPU (tests/test_controls.py measures the same
effect on a packed shape). How many bits belongs to the CPU, so the tolerances that must hold it
are derived from the pair's own bitwise difference (the ``covering`` fixture), and a narrower one
must refuse it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from golden.store import Golden
from harness.base.errors import GoldenError
from harness.base.figures import fmt
from harness.corpus.synth import synth_corpus
from harness.data.numeric_settings import NumericSettings
from harness.data.schemas import FILE_KINDS
from harness.data.schemas.golden_diff import GoldenDiff
from harness.data.tolerances import Tolerances
from harness.pipeline.golden_diff import describe, diff
from tests.cli_run import harness_cli
from tests.pipeline import record

BITWISE = Tolerances().with_mode("bitwise")


@pytest.fixture(scope="module")
def pair(tmp_path_factory, small_model):
    """(A, B): one 16-block corpus recorded with oneDNN (A) and without it (B, `--no-mkldnn`)."""
    corpus = synth_corpus(small_model.geometry, 16, seed=0)
    root = tmp_path_factory.mktemp("golden-diff")
    _, _, a = record(small_model, root / "a", corpus=corpus)
    _, _, b = record(small_model, root / "b", corpus=corpus, numerics=NumericSettings(mkldnn=False))
    assert a.manifest.numerics.in_force["mkldnn"] is True
    assert b.manifest.numerics.in_force["mkldnn"] is False
    return a, b


def cli(capsys, monkeypatch, tmp_path, *args: str) -> tuple[int, str, str]:
    monkeypatch.chdir(tmp_path)  # no harness.toml of the checkout's: the defaults
    return harness_cli(capsys, monkeypatch, "golden", "diff", *args)


@pytest.fixture(scope="module")
def covering(pair) -> dict[str, float]:
    """Limits that cover this CPU's oneDNN-off difference, 4x each OP's observed figure, as ``--set`` values.

    How large the difference is belongs to the CPU (its kernels: on AVX-512 OP 0's max_abs was below the
    default 1e-4, on an AVX2 EPYC 2e-4); that there is one, and how it is judged and named, does not."""
    a, b = pair
    d = diff(a, b, BITWISE)
    sets = {"tolerances.op0.max_abs": 4 * float(d.ops["0"].verdict.metrics["max_abs"])}
    for op in ("1", "2"):
        m = d.ops[op].verdict.metrics
        sets[f"tolerances.op{op}.max_abs"] = max(4 * float(m["max_abs"]), 1e-4)
        sets[f"tolerances.op{op}.min_cosine"] = min(1 - 4 * (1 - float(m["min_cosine"])), 0.99999)
        sets[f"tolerances.op{op}.max_rel_l2"] = max(4 * float(m["max_rel_l2"]), 1e-3)
    assert sets["tolerances.op0.max_abs"] > 0  # NNPACK and oneDNN differ on every CPU this has run on
    return sets


def _tolerances(sets: dict[str, float]) -> Tolerances:
    tables: dict[str, dict[str, float]] = {}
    for key, value in sets.items():
        _, op, limit = key.split(".")
        tables.setdefault(op, {})[limit] = value
    base = Tolerances()
    return base.model_copy(update={op: getattr(base, op).model_copy(update=t) for op, t in tables.items()})


def test_mkldnn_pair_names_the_setting_first_and_holds_a_tolerance_that_covers_it(pair, covering):
    a, b = pair
    d = diff(a, b, _tolerances(covering))
    assert d.environment_differences[0] == "numerics.mkldnn: True -> False", d.environment_differences
    assert d.a.numerics_profile != d.b.numerics_profile
    assert d.status == "within-tolerance" and d.differing_ops == 0, [o.verdict.reasons for o in d.ops.values()]
    op0 = d.ops["0"].verdict
    assert d.ops["0"].status == "within-tolerance" and op0.passed and not op0.metrics["bitwise"]
    assert 0 < op0.metrics["max_abs"] < covering["tolerances.op0.max_abs"] and op0.failing  # the worst blocks
    assert all(o.verdict.limits["bitwise"] is False for o in d.ops.values())


def test_a_tolerance_narrower_than_the_difference_differs_naming_the_limit(pair, covering):
    """The negative control of the test above at the same mode: OP 0's max_abs limit below what it observed."""
    a, b = pair
    narrow = {**covering, "tolerances.op0.max_abs": covering["tolerances.op0.max_abs"] / 8}
    d = diff(a, b, _tolerances(narrow))
    assert d.status == "differs" and d.ops["0"].status == "differs"
    assert d.ops["0"].verdict.reasons[0].startswith("OP 0 max_abs: ")


def test_mkldnn_pair_differs_bitwise_naming_op_metric_and_blocks(pair):
    """The negative control of the test above: the same pair under --tolerance bitwise."""
    a, b = pair
    d = diff(a, b, BITWISE)
    assert d.status == "differs" and d.differing_ops >= 1
    assert d.ops["0"].status == "differs"
    assert d.ops["0"].verdict.reasons[0].startswith("OP 0 differing_elements:")
    lines = describe(d)
    env_at = next(i for i, line in enumerate(lines) if "numerics.mkldnn: True -> False" in line)
    op_at = next(i for i, line in enumerate(lines) if line.startswith("OP 0: DIFFERS"))
    worst_at = next(i for i, line in enumerate(lines) if line.startswith("worst blocks"))
    assert env_at < op_at < worst_at  # environment first, then the OPs, then the worst blocks
    assert lines[worst_at + 1].startswith("  OP 0 block 'synth-")
    assert lines[-1].startswith("B DIFFERS from A beyond the tolerances")


@pytest.mark.parametrize("limits", ["default", "covering"])
def test_the_worst_blocks_lead_with_the_row_each_voiceprint_verdict_names(pair, covering, limits):
    """The OP's max_abs check names its worst row; the "worst blocks" list under it starts with that row, at that
    value (it once topped out below the figure the verdict named, without its row)."""
    a, b = pair
    d = diff(a, b, Tolerances() if limits == "default" else _tolerances(covering))
    lines = describe(d)
    judged = [key for key in ("1", "2") if d.ops[key].status != "bitwise"]
    assert judged, "the oneDNN pair differs in the voiceprints on every CPU it has run on"
    for key in judged:
        check = next(c for c in d.ops[key].verdict.checks if c.metric == "max_abs")
        assert check.where is not None and check.where.startswith("worst block ")
        first = next(line for line in lines if line.startswith(f"  OP {key} block "))
        assert first == f"  OP {key} {check.where.removeprefix('worst ')}: max_abs {fmt(check.observed)}", lines


def test_noise_floor_mode_reads_a_floor(pair):
    """A reproduced bitwise when recorded: its noise floor is 0, so noise-floor mode is bitwise here."""
    a, b = pair
    assert a.manifest.reproducibility.bitwise is True
    d = diff(a, b, Tolerances().with_mode("noise-floor"))
    assert d.ops["0"].status == "differs" and d.ops["0"].verdict.limits["max_abs"] == 0.0


def test_cli_exit_status_follows_the_tolerance(pair, covering, capsys, monkeypatch, tmp_path):
    a, b = pair
    sets = [arg for key, value in covering.items() for arg in ("--set", f"{key}={value!r}")]
    code, out, err = cli(capsys, monkeypatch, tmp_path, str(a.path), str(b.path), *sets)
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert lines[1].startswith("environment differences (A -> B") and lines[2] == "  numerics.mkldnn: True -> False"
    assert "OP 0: within tolerance, not bitwise (OP 0 max_abs: " in out
    assert lines[-1].startswith("B matches A within the tolerances in every OP, not bitwise")
    code, out, err = cli(capsys, monkeypatch, tmp_path, str(a.path), str(b.path), *sets, "--tolerance", "bitwise")
    assert (code, err) == (1, ""), err
    assert "OP 0: DIFFERS" in out and "  OP 0 differing_elements: " in out
    narrow = [*sets, "--set", f"tolerances.op0.max_abs={covering['tolerances.op0.max_abs'] / 8!r}"]
    code, out, err = cli(capsys, monkeypatch, tmp_path, str(a.path), str(b.path), *narrow)
    assert (code, err) == (1, ""), err  # the same mode, a limit below the difference
    assert "OP 0: DIFFERS" in out and "  OP 0 max_abs: " in out


def test_a_golden_against_itself_is_bitwise_with_no_difference(pair, capsys, monkeypatch, tmp_path):
    a, _ = pair
    d = diff(a, a, BITWISE)
    assert d.status == "bitwise" and d.environment_differences == [] and d.differing_ops == 0
    assert all(o.status == "bitwise" and o.verdict.failing == [] for o in d.ops.values())
    out_file = tmp_path / "diff.json"
    code, out, err = cli(capsys, monkeypatch, tmp_path, str(a.path), str(a.path), "--json", "--out", str(out_file))
    assert (code, err) == (0, ""), err
    printed = GoldenDiff.model_validate(json.loads(out))
    written = FILE_KINDS["`harness golden diff --json` (stdout, or --out FILE)"].model_validate(
        json.loads(out_file.read_text())
    )
    assert printed == written and printed.status == "bitwise" and printed.environment_differences == []
    assert "environment differences (A -> B): none recorded" in describe(printed)


def test_goldens_of_different_corpora_are_refused_in_one_line(pair, recorded_golden, capsys, monkeypatch, tmp_path):
    a, _ = pair  # 16 blocks of seed 0; recorded_golden: 12 blocks (conftest)
    with pytest.raises(GoldenError, match="recorded on another corpus than") as info:
        diff(a, recorded_golden, Tolerances())
    assert str(recorded_golden.path) in str(info.value) and str(a.path) in str(info.value)
    out_file = tmp_path / "diff.json"
    code, out, err = cli(capsys, monkeypatch, tmp_path, str(a.path), str(recorded_golden.path), "--out", str(out_file))
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"harness: error: {recorded_golden.path}: recorded on another corpus than {a.path}")
    assert not out_file.exists()  # nothing written


class _Blocks:
    """Stands in for a golden's output reader: only its block ids are asked before the refusal."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    def block_ids(self) -> list[str]:
        return self.ids


def test_the_same_corpus_file_with_other_blocks_is_refused(pair):
    """The block list is checked too (a golden recorded on a subset, or a merge of other shards)."""
    a, _ = pair
    ids = a.block_ids()
    other = replace(a, _outputs=_Blocks([*ids[:-1], "another-block"]))  # type: ignore[arg-type]
    assert isinstance(other, Golden)
    with pytest.raises(GoldenError, match=r"holds other blocks than .* \(first difference: 'another-block' vs "):
        diff(a, other, Tolerances())
