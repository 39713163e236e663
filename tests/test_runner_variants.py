"""The runner's variants hook (lanes.running.variants): more packed lanes at a plain shape,
the same blocks in another arrangement or twice, run after the plain shapes and checked for the
exactly-once law before any call. The null model is batch-invariant, so every variant lane must give
the plain lane's outputs bitwise."""

from __future__ import annotations

import dataclasses
import random

import pytest

from harness.base.errors import LaneError
from lanes.running.run_plan import RunPlan
from lanes.running.runner import FastVariant
from lanes.running.variants import consecutive
from tests.runner_digest import calls_digest, null_setup, outputs_digest, plans, run_collect

# computed by tests/runner_digest.py over the runner before variants (PYTHONPATH=/tmp/base, this session)
BEFORE = {
    "isolated-2-4": (
        54,
        "b8ccc73746f4be349a40ce06ff4d0ce0210955b6010dc512460059fbc3a31b7c",
        "eceb500aed34623c5b955ea80153e1ef7b2344e23c5201740fc27bc5a1137292",
    ),
    "chained-3-pad-repeats": (
        72,
        "92135c4a286bd2880a30001ad9c82fffe32f5900f63a9a84cc33fa063cc31d46",
        "35d2f14e2baa89735287a0527a02bdfbc33dfbc04f5629ebca0719d6911aa190",
    ),
}


@pytest.fixture(scope="module")
def null():
    return null_setup(10)


def shuffled(seed):
    def arrange(members, k):
        order = list(members)
        random.Random(seed).shuffle(order)
        return [[(b, 0) for b in order[i : i + k]] for i in range(0, len(order), k)]

    return arrange


def paired(members, k):
    """Every block twice in one request: copy 0 beside copy 1."""
    entries = [(b, c) for b in members for c in (0, 1)]
    return [entries[i : i + k] for i in range(0, len(entries), k)]


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_without_variants_outputs_and_call_log_are_the_runners_before(null, name):
    backend, blocks = null
    outputs, calls = run_collect(blocks, backend, plans()[name])
    assert (len(calls), outputs_digest(outputs), calls_digest(calls)) == BEFORE[name]
    assert all(c.variant == "" for c in calls)


@pytest.mark.parametrize("mode", ["isolated", "chained"])
def test_a_shuffled_and_a_duplicated_arrangement_give_the_plain_lanes_outputs(null, mode):
    backend, blocks = null
    variants = (
        FastVariant(4, ("k4.a1",), shuffled(1)),
        FastVariant(4, ("k4.d", "k4.d2"), paired),
        FastVariant(2, ("k2.r2",), consecutive),
    )
    plan = RunPlan(shapes=(2, 4), voiceprint_inputs=mode, variants=variants)
    assert plan.lanes() == ["exact", "k2", "k4", "k4.a1", "k4.d", "k4.d2", "k2.r2"]
    outputs, calls = run_collect(blocks, backend, plan)
    assert sorted(outputs) == sorted(plan.lanes())
    for lane in ("k4.a1", "k4.d", "k4.d2"):
        assert outputs_digest({"k": outputs[lane]}) == outputs_digest({"k": outputs["k4"]}), lane
    assert outputs_digest({"k": outputs["k2.r2"]}) == outputs_digest({"k": outputs["k2"]})
    # the duplicates' calls: both copies in one request, copy 1 renamed, logged under the variant's lane
    dup = [c for c in calls if c.variant == "k4.d"]
    assert dup and all(c.lane == "fast" and c.shape == 4 for c in dup)
    first = [c for c in dup if c.op == 0][0]
    assert first.block_ids == (blocks[0].id, f"{blocks[0].id}~1", blocks[1].id, f"{blocks[1].id}~1")
    # every lane of a variant received every block once, per OP 0: ids in the log, copies counted apart
    sent = [b for c in dup if c.op == 0 for b in c.block_ids]
    assert sorted(sent) == sorted([b.id for b in blocks] + [f"{b.id}~1" for b in blocks])
    # the plain lanes' calls are exactly those of a plan without variants, and come first in each group
    _, plain = run_collect(blocks, backend, RunPlan(shapes=(2, 4), voiceprint_inputs=mode))
    assert calls_digest([c for c in calls if not c.variant]) == calls_digest(plain)
    kinds = [(c.op, c.variant != "") for c in calls]
    group_of_op0 = kinds[: kinds.index((1, False))]  # the first group's OP 0: plain calls, then variants
    assert group_of_op0 == sorted(group_of_op0, key=lambda x: x[1])
    assert len(calls) <= plan.calls(len(blocks)) + 2 * 3  # the count is an estimate for partial groups


def drop_one(members, k):
    return consecutive(members[1:], k)


def twice(members, k):
    return consecutive(list(members) + [members[0]], k)


def too_many(members, k):
    return [[(b, 0) for b in members]]


def stranger(members, k):
    other = dataclasses.replace(members[0], id="stranger")
    return consecutive(list(members[:-1]), k) + [[(other, 0)]]


@pytest.mark.parametrize(
    "arrange, message",
    [
        (
            drop_one,
            r"lane 'k2.x' receives block 'synth-s0-r000-b000' 0 times, expected exactly once \(1 of 4 "
            r"members wrong\)",
        ),
        (
            twice,
            r"lane 'k2.x' receives block 'synth-s0-r000-b000' 2 times, expected exactly once \(1 of 4 members wrong\)",
        ),
        (too_many, r"chunk 0 holds 4 entries, allowed 1..2"),
        (lambda m, k: [[(b, 1)] for b in m], r"copy index 1, allowed 0..0"),
    ],
)
def test_a_broken_arranger_is_refused_before_any_call_of_the_group(null, arrange, message):
    backend, blocks = null
    log = []
    with pytest.raises(LaneError, match=message):
        run_collect(
            blocks[:4], backend, RunPlan(shapes=(2, 4), variants=(FastVariant(2, ("k2.x",), arrange),)), log=log
        )
    assert log == []  # the law is checked before the group's first call


def test_a_block_from_outside_the_group_is_refused(null):
    backend, blocks = null
    with pytest.raises(LaneError, match=r"not a member of this group"):
        run_collect(blocks[:4], backend, RunPlan(shapes=(4,), variants=(FastVariant(4, ("k4.x",), stranger),)))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: FastVariant(4, ("k2.a1",), consecutive), r"variant lane 'k2.a1': expected 'k4.<tag>'"),
        (lambda: FastVariant(4, ("k4.A",), consecutive), r"variant lane 'k4.A'"),
        (lambda: FastVariant(4, ("k4",), consecutive), r"variant lane 'k4'"),
        (lambda: FastVariant(4, (), consecutive), r"names no lane"),
        (lambda: RunPlan(shapes=(2,), variants=(FastVariant(4, ("k4.a1",), consecutive),)), r"k=4 is not a shape"),
        (lambda: RunPlan(shapes=(4,), variants=(FastVariant(4, ("k4.a1",), consecutive),) * 2), r"named by two"),
    ],
)
def test_variant_names_and_shapes_are_checked(make, message):
    with pytest.raises(LaneError, match=message):
        make()


def test_a_shapes_throughput_and_request_counts_are_its_plain_lanes_alone(null):
    from harness.evidence.request_evidence import RequestCounter
    from harness.throughput.timing import summarize_calls

    backend, blocks = null
    plan = RunPlan(shapes=(4,), variants=(FastVariant(4, ("k4.a1",), shuffled(2)),))
    _, calls = run_collect(blocks, backend, plan)
    _, plain = run_collect(blocks, backend, RunPlan(shapes=(4,)))
    rows, plain_rows = [c.to_dict() for c in calls], [c.to_dict() for c in plain]

    def figures(rows):
        counter = RequestCounter()
        summary = summarize_calls(counter.observe(rows))
        return {op: v["calls"] for op, v in summary["4"]["ops"].items()}, counter.counts(4, [0, 1, 2])

    assert figures(rows) == figures(plain_rows)
    # the negative control: the same calls, unmarked, would count the variant's calls as the shape's
    assert figures([{**r, "variant": ""} for r in rows]) != figures(plain_rows)


def test_the_call_log_file_keeps_the_variant_and_reads_an_older_log_as_plain(null, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from golden.calls import CALL_SCHEMA, iter_calls, write_calls

    backend, blocks = null
    plan = RunPlan(shapes=(4,), variants=(FastVariant(4, ("k4.d", "k4.d2"), paired),))
    _, calls = run_collect(blocks[:4], backend, plan)
    write_calls(tmp_path / "calls.parquet", calls)
    back = list(iter_calls(tmp_path / "calls.parquet", "t"))
    assert back == [c.to_dict() for c in calls] and {c["variant"] for c in back} == {"", "k4.d"}
    before = pa.schema([f for f in CALL_SCHEMA if f.name != "variant"])
    rows = [{k: v for k, v in c.to_dict().items() if k != "variant"} for c in calls if not c.variant]
    pq.write_table(pa.Table.from_pylist(rows, schema=before), tmp_path / "old.parquet")
    assert list(iter_calls(tmp_path / "old.parquet", "t")) == [c.to_dict() for c in calls if not c.variant]
