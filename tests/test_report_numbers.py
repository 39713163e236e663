"""How the sign-off pages and the judges' notes print numbers, without the pipeline.

- a cosine over rows that differ never reads "1" (the judges' note and the report's cells share
  ``harness.judging.judges.judge_base.cosine_text``), a cosine over identical rows reads exactly "1";
- latencies read in ms / s, never in scientific notation; fractions read as percentages, never
  rounded to 0 % or 100 % when they are not;
- the next step of a failing OP is JUnit's wording, and a localised OP's next step is the finding.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from harness.data.schemas.results import CheckModel
from harness.data.tolerances import VoiceprintTolerance
from harness.judging.judges.judge_base import cosine_text
from reports.advice import localisation_finding, op_next, slow_note
from reports.junit import next_steps
from reports.numbers import cosine, duration_text, fmt, fmt_check, percent_text
from tests.test_scoring import judge_vp, vp, vp_rows

SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")
HINT = (
    "localise the first diverging layer (score/nightly --localise); if the change is intended, record a "
    "new golden (golden record --regen)"
)


def test_a_bitwise_failure_one_ulp_off_never_says_min_cosine_1():
    """Before: the bitwise check's note said 'min cosine 1' for rows 1 ULP apart (float64 cosine 1.0)."""
    ids, w, s, emb = rows = vp_rows()
    emb = np.asarray(emb, np.float32)
    moved = emb.copy()
    moved[:, 1] = np.nextafter(moved[:, 1], np.float32(np.inf))  # every row 1 ULP off in one element
    v = judge_vp(vp((ids, w, s, emb)), vp((ids, w, s, moved)), VoiceprintTolerance(mode="bitwise"))
    (check,) = [c for c in v.checks if c.metric == "differing_rows"]
    assert check.failed and check.offending == len(ids)
    assert not re.search(r"min cosine 1(?! −)", check.note), check.note
    assert re.search(r"min cosine 1 − (<1e-16 \(not bit-identical\)|\d(\.\d)?e-1\d)", check.note), check.note
    same = judge_vp(vp(rows), vp(rows), VoiceprintTolerance(mode="bitwise"))
    assert same.passed and same.metrics["min_cosine"] == 1.0


@pytest.mark.parametrize(
    ("value", "identical", "text"),
    [
        (1.0, True, "1"),
        (1.0, False, "1 − <1e-16 (not bit-identical)"),
        (0.99999994, False, "1 − 6e-8"),
        (1.0 - 2.9e-8, False, "1 − 2.9e-8"),
        (0.99999, True, "0.99999"),
        (0.7551, False, "0.7551"),
        (None, False, "non-finite"),
    ],
)
def test_cosine_text(value, identical, text):
    assert cosine_text(value, identical) == text


def test_report_cosine_cells_follow_the_rows_not_the_rounding():
    differing = {"differing_rows": 3, "non_finite": 0, "bitwise": False}
    assert cosine(1.0, differing) == "1 − <1e-16 (not bit-identical)"
    assert cosine(1.0, {"differing_rows": 0, "non_finite": 0, "bitwise": False}) == "1"  # missing rows: still exact
    assert cosine(1.0, {"bitwise": True}) == "1" and cosine(1.0, {"bitwise": False}) != "1"
    assert cosine("non-finite (2 of 9 rows)", differing) == "non-finite (2 of 9 rows)"
    check = {"metric": "min_cosine", "observed": 1.0, "allowed": 0.99999, "offending": None, "total": 9, "unit": "rows"}
    assert fmt_check(check, "value", differing) == "1 − <1e-16 (not bit-identical)"
    assert fmt_check(check, "limit") == "0.99999"


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (10170.0, "10.2 s"),
        (1494.2, "1.49 s"),
        (37.79, "37.8 ms"),
        (160.4, "160 ms"),
        (0.42, "0.42 ms"),
        (0.0031, "0.0031 ms"),
        (0.0, "0 ms"),
        (1_234_567.0, "1235 s"),
    ],
)
def test_latencies_read_in_ms_or_s(ms, text):
    assert duration_text(ms) == text == fmt(ms, "ms")


@pytest.mark.parametrize(
    ("fraction", "text"),
    [
        (0.01278, "1.3 %"),
        (0.000183, "0.018 %"),
        (1e-6, "0.0001 %"),
        (1e-9, "0.0000001 %"),
        (0.05, "5 %"),
        (0.0357, "3.6 %"),
        (0.123, "12 %"),
        (0.9996, "99.96 %"),
        (0.99999, "99.999 %"),
        (0.996, "99.6 %"),
        (1.0, "100 %"),
        (0.0, "0 %"),
    ],
)
def test_fractions_read_as_percentages(fraction, text):
    assert percent_text(fraction) == text == fmt(fraction, "rate")


def test_rate_checks_read_as_percentages():
    check = {
        "metric": "flip_rate_upper95",
        "observed": 0.000634,
        "allowed": 0.001,
        "offending": 0,
        "total": 4734,
        "unit": "audio frames",
    }
    assert (fmt_check(check, "value"), fmt_check(check, "limit")) == ("0.063 %", "0.1 %")
    assert fmt_check({**check, "observed": 1.0}, "value") == "100 %"


@pytest.mark.parametrize("value", [10170.0, 12345.6, 81920.5, 0.05179, 23.95, 99999.0, 150000.0, 3.0])
def test_plain_figures_have_no_scientific_notation_above_1e_3(value):
    assert not SCIENTIFIC.search(fmt(value)), fmt(value)
    assert fmt(3.58e-06) == "3.58e-06" and fmt(1e30) == "1e+30"  # error magnitudes keep their exponent
    assert (fmt(150000.0), fmt(12345.6), fmt(0.05179)) == ("150 000", "12346", "0.05179")


def _check(metric: str, ok: bool, hint: str) -> CheckModel:
    """A gated check as a score holds it (the next steps read a score's checks, not the report's facts)."""
    return CheckModel(
        op=0,
        metric=metric,
        observed=1.0 if not ok else 0.0,
        relation="<=",
        allowed=1e-4,
        ok=ok,
        unit="values",
        offending=int(not ok),
        total=1,
        where=None,
        note="",
        hint=hint,
        limit=metric,
    )


def _failing(hint: str) -> list[CheckModel]:
    return [_check("max_abs", False, hint), _check("non_finite", True, "x")]


def test_next_steps_are_junits_lines_and_drop_localise_once_it_ran():
    checks = _failing(HINT) + _failing("use a larger corpus (corpus synth --blocks N, or more audio)")
    assert next_steps(checks) == [f"next: {HINT}", "next: use a larger corpus (corpus synth --blocks N, or more audio)"]
    assert next_steps(checks, localised=True) == [
        "next: if the change is intended, record a new golden (golden record --regen)",
        "next: use a larger corpus (corpus synth --blocks N, or more audio)",
    ]
    bits = _failing(
        "the shape changes output bits: judge it with --tolerance tolerance, or localise the first diverging layer"
    )
    assert next_steps(bits, localised=True) == [
        "next: the shape changes output bits: judge it with --tolerance tolerance"
    ]


def test_op_next_says_what_localisation_found():
    checks = _failing(HINT)
    layer = {
        "available": True,
        "first_diverging_layer": "segmentation.sincnet.conv.1",
        "per_block": [{"block": "b7", "max_abs": 0.0035, "fraction_differing": 0.01278}],
    }
    steps = op_next(checks, layer)
    assert steps[0] == (
        "next: localisation found the first diverging layer 'segmentation.sincnet.conv.1' for "
        "block 'b7' (max_abs 0.0035, 1.3 % of values differ): look at that layer's kernels at this "
        "batch shape"
    )
    assert not any("localise the first" in s for s in steps)
    leak = {**layer, "first_diverging_layer": "segmentation <input: windows as the network receives them>"}
    (only,) = op_next(checks, leak)  # a packing bug: re-recording the golden is no remedy
    assert "packing or window-cutting bug, not numerics" in only
    answer = localisation_finding({**layer, "first_diverging_layer": "<output: the model's answer>"})
    assert "the model's answer differs" in answer
    assert "no difference" in localisation_finding({**layer, "first_diverging_layer": None})
    tried = op_next(checks, {"available": False, "reason": "a TorchScript module refuses forward hooks"})
    assert tried == [
        f"next: {HINT}",
        "(localisation was tried and could not run: a TorchScript module refuses forward hooks)",
    ]
    assert op_next(checks, None) == next_steps(checks)


def test_slow_note_only_for_a_usable_shape_slower_than_k1():
    slow = {
        "usable": True,
        "speedup": 0.8,
        "ledger_state": "promoted",
        "within_noise": False,
        "shape": 4,
        "speedup_interval": [0.75, 0.85],
        "repetitions": 12,
    }
    assert slow_note(slow) == (
        "promoted: matches the golden, but 0.80× the speed of k=1 on this device (95 % "
        "interval 0.75×–0.85×, 12 full 4-block requests): the engine gains nothing from it here"
    )
    assert slow_note({**slow, "ledger_state": None}).startswith("passed: matches the golden, but 0.80×")
    assert slow_note({**slow, "speedup": 1.3}) is None
    assert slow_note({**slow, "usable": False}) is None
    assert slow_note({**slow, "speedup": None}) is None


def test_a_speed_statement_carries_its_sample_and_claims_nothing_it_cannot_bound():
    """Before: 'the engine gains nothing' in bold from 2 and 1 packed requests on a loaded machine. Now the note
    names the figure's sample and interval, and says 'not measured precisely' where there is no interval, where it
    includes 1, or where its ends are more than PRECISE_RATIO apart."""
    from reports.advice import PRECISE_RATIO, speed_measured

    base = {"usable": True, "speedup": 0.57, "ledger_state": "promoted", "shape": 2}
    few = slow_note({**base, "speedup_interval": None, "repetitions": 2, "within_noise": None})
    assert few == (
        "promoted: matches the golden; measured at 0.57× the speed of k=1 on this device over 2 full "
        "2-block requests, too few for an interval: not measured precisely, so it says nothing yet of "
        "what the engine gains"
    )
    one = slow_note({**base, "speedup": 0.74, "speedup_interval": None, "repetitions": 1, "within_noise": None})
    assert "over 1 full 2-block request, too few" in one and "gains nothing" not in one
    noisy = {**base, "speedup_interval": [0.5, 1.1], "repetitions": 9, "within_noise": True}
    assert "not measured precisely (the interval includes 1)" in slow_note(noisy)
    wide = {**base, "speedup_interval": [0.3, 0.3 * PRECISE_RATIO * 1.01], "repetitions": 9, "within_noise": False}
    assert "not measured precisely (the interval is that wide)" in slow_note(wide) and not speed_measured(wide)
    tight = {**base, "speedup_interval": [0.5, 0.5 * PRECISE_RATIO], "repetitions": 40, "within_noise": False}
    assert speed_measured(tight) and slow_note(tight).endswith(
        "40 full 2-block requests): the engine gains nothing from it here"
    )
