"""Laws of the difference metrics, ULP distance and the binomial bound (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.binomial import upper_bound
from harness.metrics import cosine_and_rel_l2, row_diff, ulp_distance

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
any32 = st.floats(width=32)


@given(finite32)
def test_adjacent_floats_are_one_ulp_apart(x):
    x = np.float32(x)
    up = np.nextafter(x, np.float32(np.inf), dtype=np.float32)
    if np.isfinite(up):
        assert ulp_distance(np.array([x]), np.array([up]))[0] == 1


@given(hnp.arrays(np.float32, 20, elements=finite32), hnp.arrays(np.float32, 20, elements=finite32))
def test_ulp_is_a_metric_on_finite_floats(a, b):
    d = ulp_distance(a, b)
    assert (d == ulp_distance(b, a)).all() and (d >= 0).all()
    assert ((d == 0) == (a == b)).all()  # zero exactly when equal (+0 and -0 count as equal)


def test_ulp_across_zero_and_signed_zero():
    tiny = np.float32(1e-45)
    assert ulp_distance(np.array([-tiny], np.float32), np.array([tiny], np.float32))[0] == 2
    assert ulp_distance(np.array([-0.0], np.float32), np.array([0.0], np.float32))[0] == 0


@given(hnp.arrays(np.float32, (6, 7), elements=any32), hnp.arrays(np.float32, (6, 7), elements=any32))
def test_row_diff_matches_a_naive_reference(a, b):
    d = row_diff(a, b)
    assert d.differing == (a.view(np.int32) != b.view(np.int32)).sum()
    for r in range(6):
        bad = ~(np.isfinite(a[r]) & np.isfinite(b[r]))
        assert d.non_finite[r] == bad.sum()
        assert d.differs[r] == (a[r].view(np.int32) != b[r].view(np.int32)).any()
        ok = ~bad
        if bad.any():
            assert math.isnan(d.max_abs[r])  # non-finite never passes as a small difference
        else:
            with np.errstate(over="ignore"):
                assert d.max_abs[r] == np.abs(a[r] - b[r]).max()
            ref = np.abs(a[r].astype(np.float64) - b[r]).sum()
            if np.isfinite(d.sum_abs[r]):  # summed in float32: may overflow where float64 does not
                assert d.sum_abs[r] == pytest.approx(ref, rel=1e-5)
            else:
                assert ref > np.finfo(np.float32).max / 2
        if ok.any():
            assert d.max_ulp[r] == ulp_distance(a[r][ok], b[r][ok]).max()


def test_row_diff_chunks_agree_with_one_pass(monkeypatch):
    import harness.metrics as metrics

    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 50)).astype(np.float32)
    b = a + rng.standard_normal((300, 50)).astype(np.float32) * 1e-6
    whole = row_diff(a, b)
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 123)
    chunked = row_diff(a, b)
    for field in ("max_abs", "sum_abs", "max_ulp", "differs", "non_finite", "differing"):
        np.testing.assert_array_equal(getattr(whole, field), getattr(chunked, field))


@given(hnp.arrays(np.float32, (5, 8), elements=st.floats(-100, 100, width=32)), st.floats(0.01, 100))
def test_cosine_laws(a, scale):
    cos, rel = cosine_and_rel_l2(a, a)
    norms = np.linalg.norm(a, axis=1)
    assert np.allclose(cos[norms > 0], 1.0, atol=1e-12) and (rel == 0).all()
    cos_neg, _ = cosine_and_rel_l2(-a, a)
    assert np.allclose(cos_neg[norms > 0], -1.0, atol=1e-12)
    cos_scaled, _ = cosine_and_rel_l2(a * np.float32(scale), a)
    assert np.allclose(cos_scaled[norms > 1e-3], 1.0, atol=1e-6)


def test_cosine_conventions_for_zero_and_nan_rows():
    z = np.zeros((1, 4), np.float32)
    x = np.ones((1, 4), np.float32)
    assert cosine_and_rel_l2(z, z)[0][0] == 1.0 and cosine_and_rel_l2(z, z)[1][0] == 0.0
    assert cosine_and_rel_l2(x, z)[0][0] == 0.0 and cosine_and_rel_l2(x, z)[1][0] == np.inf
    nan = np.array([[np.nan, 1, 1, 1]], np.float32)
    cos, rel = cosine_and_rel_l2(nan, x)
    assert np.isnan(cos[0]) and np.isnan(rel[0])


@given(st.integers(1, 10**6))
def test_rule_of_three_when_nothing_fails(n):
    assert upper_bound(0, n) == pytest.approx(min(1.0, 3.0 / n))


@given(st.integers(1, 5000), st.data())
def test_bound_is_above_the_observed_rate_and_monotone(n, data):
    x = data.draw(st.integers(1, n))
    u = upper_bound(x, n)
    assert x / n <= u <= 1.0
    if x < n:
        assert upper_bound(x + 1, n) >= u
    assert upper_bound(x, n + 1000) <= u


def test_bound_matches_clopper_pearson_values():
    # one-sided 95 % Clopper-Pearson upper limits (scipy.stats.beta.ppf(0.95, x + 1, n - x))
    assert upper_bound(1, 1000) == pytest.approx(0.0047350, rel=1e-4)
    assert upper_bound(5, 100) == pytest.approx(0.1022526, rel=1e-4)
    assert upper_bound(50, 100) == pytest.approx(0.5863783, rel=1e-4)
    assert upper_bound(1000, 100000) == pytest.approx(0.010532, rel=1e-3)
