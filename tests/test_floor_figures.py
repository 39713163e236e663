"""A noise floor's figures are each judge's own, declared once: taken, merged, compared and said through them.

Laws: every part of a merge lies within the merged floor; a floor lies within itself; one figure made worse
than the floor's leaves it (the negative control); the figures of each judge are exactly the keys the
golden's file holds for its OPs (a new figure is one entry in its judge and one key in the file's model).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.data.ops import ALL_OPS, Op
from harness.data.schemas.files import Floor
from harness.judging.judges import floor_figures, judge_for
from harness.judging.reproduction import noise_floor, worst_of_ops


def _floor(op: Op, draw_value) -> dict:
    out: dict = {"bitwise": False}
    for fig in judge_for(op).floor_figures:
        out[fig.key] = draw_value(fig)
    return out


def _values(fig: floor_figures.FloorFigure):
    if fig.worse == "smaller":
        return st.floats(min_value=0.5, max_value=1.0)
    if fig.worse == "count" or fig.key == "max_ulp":
        return st.integers(min_value=0, max_value=10_000)
    return st.floats(min_value=0.0, max_value=10.0)


@st.composite
def floors(draw, op: Op):
    return _floor(op, lambda fig: draw(_values(fig)))


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(ALL_OPS).flatmap(lambda op: st.tuples(st.just(op), st.lists(floors(op), min_size=1, max_size=4)))
)
def test_every_part_lies_within_the_merged_floor(op_parts):
    op, parts = op_parts
    figures = judge_for(op).floor_figures
    for counts in (sum, max):
        merged = floor_figures.merge(figures, parts, counts)
        assert all(floor_figures.within(figures, p, merged) for p in parts)
        assert floor_figures.within(figures, merged, merged)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ALL_OPS).flatmap(lambda op: st.tuples(st.just(op), floors(op))), st.data())
def test_one_figure_made_worse_leaves_the_floor(op_floor, data):
    """Negative control: any one figure beyond the floor's, and the noise is not within it."""
    op, floor = op_floor
    figures = judge_for(op).floor_figures
    fig = data.draw(st.sampled_from(figures))
    worse = dict(floor)
    if fig.worse == "smaller":
        worse[fig.key] = floor[fig.key] - 0.01
    else:
        worse[fig.key] = floor[fig.key] + 1
    assert not floor_figures.within(figures, worse, floor)
    assert floor_figures.within(figures, {**worse, "bitwise": True}, floor)  # bitwise noise is within any floor
    assert not floor_figures.within(figures, floor, {**floor, "bitwise": True})  # a bitwise release: only bitwise


def test_each_judges_figures_are_the_files_keys_of_its_ops():
    """The golden's file model holds exactly the figures the judges declare, for the OPs they judge."""
    for op in ALL_OPS:
        figures = judge_for(op).floor_figures
        floor = Floor.model_validate(_floor(op, lambda fig: 1 if fig.worse == "count" or fig.key == "max_ulp" else 0.5))
        assert set(floor.model_dump()) == {"bitwise", *(f.key for f in figures)}, op
        assert set(Floor.model_fields) >= {f.key for f in figures}


def test_taken_merged_and_said_as_the_files_and_lines_hold_them():
    """One pair's metrics taken as the manifest's floor, merged over shards (flips summed) and said in a line."""
    seg = {"bitwise": False, "max_abs_finite": 0.5, "max_ulp_finite": 3, "flips": 2}
    vp = {
        "bitwise": False,
        "max_abs_finite": 0.25,
        "max_ulp_finite": 7,
        "min_cosine_finite": 0.999,
        "max_rel_l2_finite": 0.01,
    }

    class V:
        def __init__(self, op, metrics):
            self.op, self.metrics = op, metrics

    taken = noise_floor([V(0, seg), V(1, vp)])  # type: ignore[list-item]
    assert taken["ops"]["0"] == {"bitwise": False, "max_abs": 0.5, "max_ulp": 3, "argmax_flips": 2}
    assert list(taken["ops"]["1"]) == ["bitwise", "max_abs", "max_ulp", "min_cosine", "max_rel_l2"]
    merged = worst_of_ops([taken, taken], flips=sum)
    assert merged["0"]["argmax_flips"] == 4 and merged["1"]["min_cosine"] == 0.999
    assert floor_figures.words(judge_for(Op(0)).floor_figures, taken["ops"]["0"]) == (
        "max_abs 0.5, max_ulp 3, 2 argmax flips"
    )
    assert floor_figures.words(judge_for(Op(1)).floor_figures, taken["ops"]["1"], report=True) == (
        "max_abs 0.25, max_ulp 7, min cosine 1 − 0.001"
    )
