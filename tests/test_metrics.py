"""Laws of the difference metrics, ULP distance and the binomial bound (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.compute import metrics
from harness.compute.metrics import cosine_and_rel_l2, ulp_distance
from harness.judging.binomial import upper_bound

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
any32 = st.floats(width=32)


@given(finite32)
def test_adjacent_floats_are_one_ulp_apart(x):
    x = np.float32(x)
    with np.errstate(over="ignore"):  # the largest float's next is inf
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


# --- row_diff against a straightforward reference --------------------------------------------

BACKENDS = {"compiled": metrics.row_diff, "numpy": metrics.row_diff_numpy}

SPECIAL = np.array(
    [
        0.0,
        -0.0,
        1e-45,
        -1e-45,
        1.1754942e-38,
        -1.1754942e-38,
        1.0,
        -1.0,
        3.4028235e38,
        -3.4028235e38,
        np.inf,
        -np.inf,
        np.nan,
    ],
    dtype=np.float32,
)


def reference_row_diff(a: np.ndarray, b: np.ndarray) -> dict:
    """The definition, one row at a time: float64 |a - b| and int64 ULP on the ordered bit line."""
    rows = a.shape[0]
    x, y = a.reshape(rows, -1), b.reshape(rows, -1)
    ref = {"max_abs": [], "sum_abs": [], "max_ulp": [], "differs": [], "non_finite": [], "differing": 0}
    for r in range(rows):
        finite = np.isfinite(x[r]) & np.isfinite(y[r])
        with np.errstate(over="ignore"):  # |a - b| of two finite float32 may exceed float32: inf
            d = np.abs(x[r][finite].astype(np.float64) - y[r][finite]).astype(np.float32).astype(np.float64)
        bits_x, bits_y = x[r].view(np.int32).astype(np.int64), y[r].view(np.int32).astype(np.int64)
        ox = np.where(bits_x < 0, -(bits_x & 0x7FFFFFFF), bits_x)
        oy = np.where(bits_y < 0, -(bits_y & 0x7FFFFFFF), bits_y)
        ulp = np.abs(ox - oy)[finite]
        ref["max_abs"].append(np.nan if not finite.all() else (d.max() if d.size else 0.0))
        ref["sum_abs"].append(d.sum())
        ref["max_ulp"].append(int(ulp.max()) if ulp.size else 0)
        ref["differs"].append(bool((bits_x != bits_y).any()))
        ref["non_finite"].append(int((~finite).sum()))
        ref["differing"] += int((bits_x != bits_y).sum())
    return ref


def assert_matches_reference(d, a: np.ndarray, b: np.ndarray, sum_rel: float) -> None:
    ref = reference_row_diff(a, b)
    np.testing.assert_array_equal(d.max_abs, ref["max_abs"])  # NaN exactly where the reference has NaN
    np.testing.assert_array_equal(d.max_ulp, ref["max_ulp"])
    np.testing.assert_array_equal(d.differs, ref["differs"])
    np.testing.assert_array_equal(d.non_finite, ref["non_finite"])
    assert d.differing == ref["differing"]
    np.testing.assert_allclose(d.sum_abs, ref["sum_abs"], rtol=sum_rel, atol=0)
    assert d.max_abs.dtype == np.float64 and d.max_ulp.dtype == np.int64 and d.differs.dtype == bool
    assert d.elements_per_row == (int(np.prod(a.shape[1:])) if a.ndim > 1 else 1)


# Both sum the float32 differences in float64 (in different orders).
SUM_REL = {"compiled": 1e-12, "numpy": 1e-12}


@st.composite
def float_pairs(draw, max_rows: int = 6, max_cols: int = 40):
    """(a, b) float32 [rows, cols] where b is a copy of a, a few ULP away, sign-flipped, special
    valued or unrelated, element by element: equal rows, few-ULP rows and slow rows all occur."""
    shape = (draw(st.integers(1, max_rows)), draw(st.integers(1, max_cols)))
    a = draw(hnp.arrays(np.float32, shape, elements=any32 | st.sampled_from(SPECIAL.tolist())))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 6, size=shape)
    kind[rng.random(shape[0]) < 0.4] = 0  # whole rows bitwise equal
    b = a.copy()
    bits = b.view(np.int32)
    with np.errstate(over="ignore"):
        bits[kind == 1] += rng.integers(-3, 4, size=int((kind == 1).sum()), dtype=np.int32)  # a few ULP
    b[kind == 2] = -a[kind == 2]  # sign changes (and -0 against +0)
    b[kind == 3] = rng.choice(SPECIAL, size=int((kind == 3).sum()))
    b[kind == 4] = rng.standard_normal(int((kind == 4).sum())).astype(np.float32)
    if draw(st.booleans()):
        a, b = b, a
    return a, b


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@given(pair=float_pairs())
def test_row_diff_matches_the_reference_on_arbitrary_floats(backend, pair):
    a, b = pair
    assert_matches_reference(BACKENDS[backend](a, b), a, b, SUM_REL[backend])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@given(hnp.arrays(np.float32, (6, 7), elements=any32), hnp.arrays(np.float32, (6, 7), elements=any32))
def test_row_diff_matches_the_reference_on_unrelated_arrays(backend, a, b):
    assert_matches_reference(BACKENDS[backend](a, b), a, b, SUM_REL[backend])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("case", ["equal", "few-ulp", "sign-changes", "nan", "binades-apart", "overflow"])
def test_row_diff_on_op0_sized_rows(backend, case):
    """Full-geometry rows (589 x 7), one case per path the fast loop must take or divert from."""
    rng = np.random.default_rng(7)
    a = -np.abs(rng.standard_normal((5, 589 * 7))).astype(np.float32)
    b = a.copy()
    if case == "few-ulp":
        b.view(np.int32)[...] += rng.integers(-3, 4, size=b.shape, dtype=np.int32)
    elif case == "sign-changes":
        b[1, 100] = -b[1, 100]
        a[3, 5], b[3, 5] = 0.0, -0.0  # different bits, zero ULP apart
    elif case == "nan":
        b[2, 7] = np.nan
        a[4, 0] = b[4, 0] = np.inf  # equal bits, still non-finite
    elif case == "binades-apart":
        b[0] *= np.float32(4.0)  # 2**24 ULP: past the int32 shortcut's limit
    elif case == "overflow":
        a[0, 0], b[0, 0] = np.float32(3e38), np.float32(-3e38)  # finite inputs, |a - b| = inf
    d = BACKENDS[backend](a, b)
    assert_matches_reference(d, a, b, SUM_REL[backend])
    if case == "equal":
        assert d.differing == 0 and not d.differs.any() and (d.max_abs == 0).all()


def test_the_reference_catches_a_wrapped_int32_ulp():
    """Negative control: the naive int32 bit difference (no sign handling) is wrong across zero,
    and the reference comparison above notices it."""
    a = np.array([[1.0, 2.0]], np.float32)
    b = np.array([[-1.0, 2.0]], np.float32)
    naive = int(np.abs(a.view(np.int32) - b.view(np.int32)).max())
    ref = reference_row_diff(a, b)
    assert naive != ref["max_ulp"][0] == 2 * 0x3F800000
    wrong = metrics.row_diff(a, b)
    wrong.max_ulp[0] = naive
    with pytest.raises(AssertionError):
        assert_matches_reference(wrong, a, b, 1e-12)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_row_diff_edge_shapes(backend):
    fn = BACKENDS[backend]
    empty = fn(np.zeros((0, 5), np.float32), np.zeros((0, 5), np.float32))
    assert empty.max_abs.shape == (0,) and empty.differing == 0
    no_cols = fn(np.zeros((3, 0), np.float32), np.zeros((3, 0), np.float32))
    assert (no_cols.max_abs == 0).all() and no_cols.elements_per_row == 0
    one_d = fn(np.array([1.0, 2.0], np.float32), np.array([1.0, 3.0], np.float32))
    assert one_d.max_abs.tolist() == [0.0, 1.0] and one_d.elements_per_row == 1
    four_d = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    assert fn(four_d, four_d + 1).elements_per_row == 60
    with pytest.raises(ValueError, match="shapes differ"):
        fn(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))


def test_row_diff_chunks_agree_with_one_pass(monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 50)).astype(np.float32)
    b = a + rng.standard_normal((300, 50)).astype(np.float32) * 1e-6
    b[::7] = a[::7]  # some bitwise-equal chunks
    b[5, 3] = -a[5, 3]
    whole = metrics.row_diff_numpy(a, b)
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 123)
    chunked = metrics.row_diff_numpy(a, b)
    for field in ("max_abs", "sum_abs", "max_ulp", "differs", "non_finite", "differing"):
        np.testing.assert_array_equal(getattr(whole, field), getattr(chunked, field))


def test_row_diff_uses_the_compiled_loop_when_numba_is_there():
    """numba is a dependency: the fast path must not silently fall back to numpy."""
    assert metrics._kernels() is not None


# --- the golden's per-frame decisions ------------------------------------------------------


@given(
    hnp.arrays(
        np.float32,
        st.tuples(st.integers(0, 300), st.integers(1, 9)),
        elements=st.sampled_from(SPECIAL.tolist()) | st.floats(-5, 0, width=32),
    )
)
def test_top_two_compiled_equals_the_numpy_recurrence(frames):
    argmax, margin = metrics.top_two(frames)
    ref_argmax, ref_margin = metrics.top_two_numpy(frames)
    np.testing.assert_array_equal(argmax, ref_argmax)
    np.testing.assert_array_equal(margin, ref_margin)  # NaN where the reference has NaN
    assert argmax.dtype == np.int64 and margin.dtype == np.float32


@given(hnp.arrays(np.float32, st.tuples(st.integers(1, 50), st.integers(2, 8)), elements=finite32))
def test_top_two_laws_on_finite_frames(frames):
    argmax, margin = metrics.top_two(frames)
    rows = np.arange(frames.shape[0])
    np.testing.assert_array_equal(argmax, np.argmax(frames, axis=1))  # first maximum, like numpy
    with np.errstate(over="ignore"):
        second = np.sort(frames, axis=1)[:, -2]
        np.testing.assert_array_equal(margin, frames[rows, argmax] - second)
    assert (margin >= 0).all()


def test_top_two_is_reexported_where_outputs_used_to_define_it():
    from harness.data import outputs

    assert outputs.top_two is metrics.top_two


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
