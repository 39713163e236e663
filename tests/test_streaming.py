"""The I/O paths made for speed and flat memory: zero-copy packing, Parquet layouts old and new, the
call log written and summarised as a stream, the corpus hashed while a run reads it."""

from __future__ import annotations

import math
import shutil
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from golden.calls import CallLog, iter_calls, read_calls
from golden.lane_reader import LaneReader
from golden.store import load_golden
from golden.tables import LaneWriter, _schema
from harness.base.errors import GoldenError, Interrupted, clear_interrupt, request_interrupt
from harness.data.blocks import concat_spans
from harness.data.ops import ALL_OPS, Op
from harness.data.parquet import check_schema
from harness.data.tolerances import Tolerances
from harness.judging.binomial import half_binomial_cdf
from harness.packers.packing import pack
from harness.pipeline import score
from harness.pipeline.score import score_run
from harness.throughput.timing import summarize_calls
from tests.pipeline import run_shapes
from tests.tamper import edit_manifest


@given(st.lists(st.integers(0, 50), min_size=1, max_size=8), st.booleans())
def test_spans_end_to_end_in_one_buffer_pack_without_a_copy(lengths, gap):
    buffer = np.arange(sum(lengths) + len(lengths), dtype=np.float32)
    spans, at = [], 0
    for n in lengths:
        spans.append(buffer[at : at + n])
        at += n + (1 if gap else 0)
    got = concat_spans(spans)
    np.testing.assert_array_equal(got, np.concatenate(spans))
    real = [s for s in spans if s.size]
    if len(real) == 1 or (real and not gap):
        assert np.shares_memory(got, buffer), "adjacent spans were copied"
    elif len(real) > 1:
        assert not np.shares_memory(got, buffer)


def test_packing_consecutive_corpus_blocks_shares_their_buffer(recorded_golden):
    blocks = list(recorded_golden.corpus())[:4]
    packed = pack(blocks)
    np.testing.assert_array_equal(packed.span, np.concatenate([b.span for b in blocks]))
    assert all(np.shares_memory(packed.span, b.span) for b in blocks)


def test_check_schema_accepts_either_nullability_of_list_items_and_nothing_else(tmp_path, geometry):
    new = _schema(Op.SEGMENTATION, geometry, decisions=True)
    old = pa.schema(
        [
            f.with_type(pa.list_(pa.field("item", f.type.value_type), f.type.list_size))
            if pa.types.is_fixed_size_list(f.type)
            else f
            for f in new
        ]
    )
    assert not old.equals(new)
    pq.write_table(old.empty_table(), tmp_path / "old.parquet")
    check_schema(pq.ParquetFile(tmp_path / "old.parquet"), new, tmp_path / "old.parquet", "file")
    other = pa.schema([f if f.name != "valid" else f.with_type(pa.int64()) for f in new])
    pq.write_table(other.empty_table(), tmp_path / "other.parquet")
    with pytest.raises(Exception, match="has schema"):
        check_schema(pq.ParquetFile(tmp_path / "other.parquet"), new, tmp_path / "other.parquet", "file")


def test_lane_files_written_with_nullable_items_read_the_same(recorded_golden, tmp_path, geometry):
    """Files of the first format-2 writers (nullable list items, a validity bitmap) still read, equal."""
    for op in ALL_OPS:
        source = pq.ParquetFile(recorded_golden.path / f"op{op}.parquet")
        schema = source.schema_arrow
        loose = pa.schema(
            [
                f.with_type(pa.list_(pa.field("item", f.type.value_type), f.type.list_size))
                if pa.types.is_fixed_size_list(f.type)
                else f
                for f in schema
            ],
            metadata=schema.metadata,
        )
        with pq.ParquetWriter(tmp_path / f"op{op}.parquet", loose) as out:
            for i in range(source.metadata.num_row_groups):  # row group by row group, as written
                table = source.read_row_group(i)
                out.write_table(table.cast(loose), row_group_size=max(1, table.num_rows))
    old = LaneReader(tmp_path, geometry, ALL_OPS, decisions=True, where="old")
    new = recorded_golden.outputs()
    ids = new.block_ids()
    assert old.block_ids() == ids
    a, b = old.select(ids[:5]), new.select(ids[:5])
    np.testing.assert_array_equal(a.segmentation.logprobs, b.segmentation.logprobs)
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        np.testing.assert_array_equal(a.voiceprint[op].embedding, b.voiceprint[op].embedding)
        assert a.voiceprint[op].block_ids.tolist() == b.voiceprint[op].block_ids.tolist()


def test_a_lane_round_trips_through_its_files(recorded_golden, tmp_path, geometry):
    writer = LaneWriter(tmp_path, geometry, ALL_OPS, decisions=True, group_blocks=4)
    for block in recorded_golden.block_ids():
        writer.write(recorded_golden.outputs().select([block]))
    writer.close()
    reader = LaneReader(tmp_path, geometry, ALL_OPS, decisions=True, where="copy")
    assert reader.groups == math.ceil(recorded_golden.blocks / 4)
    ids = recorded_golden.block_ids()
    got, want = reader.select(ids), recorded_golden.outputs().select(ids)
    np.testing.assert_array_equal(got.segmentation.logprobs, want.segmentation.logprobs)
    np.testing.assert_array_equal(got.segmentation.decisions()[1], want.segmentation.decisions()[1])
    for op in (Op.VOICEPRINT, Op.VOICEPRINT_CLEAN):
        for name in ("row", "window", "speaker", "weights", "embedding"):
            np.testing.assert_array_equal(getattr(got.voiceprint[op], name), getattr(want.voiceprint[op], name))
    assert pq.ParquetFile(tmp_path / "op0.parquet").metadata.row_group(0).column(3).statistics is None


def calls_of(n: int) -> list[dict]:
    rng = np.random.RandomState(0)
    out = []
    for i in range(n):
        k = [1, 2, 4][i % 3]
        lane = "exact" if k == 1 else "fast"
        ids = [f"b{(i // 3 * 4 + j) % 40}" for j in range(k)]
        out.append(
            {
                "lane": lane,
                "shape": k,
                "op": i // 3 % 3,
                "blocks": k,
                "windows": 8 * k,
                "rows": 3 * k,
                "request_bytes": 1000 * k,
                "wall_s": float(rng.uniform(0.01, 0.02)) * k,
                "peak_device_bytes": None,
                "replica": 0,
                "block_ids": ids,
                "variant": "",
            }
        )
    return out


def test_the_call_log_is_written_in_row_groups_and_summarised_as_a_stream(tmp_path):
    calls = calls_of(100)
    log = CallLog(tmp_path / "calls.parquet", group=16)
    for c in calls:
        log.append(c)
    assert len(log) == 100
    entry = log.close()
    assert entry["rows"] == 100 and pq.ParquetFile(tmp_path / "calls.parquet").metadata.num_row_groups == 7
    assert read_calls(tmp_path / "calls.parquet", "t") == calls
    streamed = summarize_calls(iter_calls(tmp_path / "calls.parquet", "t"))
    assert streamed == summarize_calls(calls)
    assert set(streamed) == {"exact", "2", "4"} and sum(v["calls"] for v in streamed["2"]["ops"].values()) == 33


def test_an_empty_call_log_is_a_valid_file(tmp_path):
    CallLog(tmp_path / "calls.parquet").close()
    assert read_calls(tmp_path / "calls.parquet", "t") == []


@pytest.mark.parametrize("n", [0, 1, 5, 6, 17, 60, 301])
def test_the_binomial_cdf_is_exact(n):
    want, total = [], 0
    for k in range(n + 1):
        total += math.comb(n, k)
        want.append(float(Fraction(total, 2**n)))
    np.testing.assert_allclose(half_binomial_cdf(n), want, rtol=1e-12, atol=1e-300)


def test_a_run_of_a_corpus_that_is_not_the_golden_is_never_kept(recorded_golden, backend, tmp_path):
    """The corpus is hashed while the run reads it; a mismatch refuses the run before it is kept."""
    path = tmp_path / "goldens" / recorded_golden.path.name
    shutil.copytree(recorded_golden.path, path)
    edit_manifest(path, lambda m: m["files"]["corpus.parquet"].update(sha256="0" * 64), reseal=True)
    golden = load_golden(path)
    with pytest.raises(GoldenError, match=r"corpus.parquet: sha256 .* does not match the manifest's 000000000000"):
        run_shapes(backend, golden, tmp_path, (2,))
    runs = tmp_path / "runs"
    assert not runs.exists() or not [p for p in runs.iterdir() if not p.name.startswith(".")]


def test_a_signal_stops_scoring_at_the_next_batch(recorded_golden, backend, tmp_path, monkeypatch):
    """Batches are read in a thread, where a signal is not seen: the scoring loop itself (main thread)
    must stop at its next batch, not score the whole run and be refused only when the score is written."""
    run = run_shapes(backend, recorded_golden, tmp_path, (2,))
    monkeypatch.setattr(score, "BATCH_BLOCKS", 1)
    scored: list[int] = []  # one item per batch a scorer took
    add = score.LaneScorer.add

    def add_counted(self, *args):
        add(self, *args)
        scored.append(1)

    monkeypatch.setattr(score.LaneScorer, "add", add_counted)
    assert score_run(recorded_golden, run, Tolerances()).verdict in ("pass", "fail")  # control: no signal
    per_batch = len(scored) // recorded_golden.blocks
    assert recorded_golden.blocks > 1 and per_batch * recorded_golden.blocks == len(scored)
    scored.clear()
    monkeypatch.setattr(score.LaneScorer, "add", lambda self, *a: (add_counted(self, *a), request_interrupt("SIGTERM")))
    try:
        with pytest.raises(Interrupted, match=r"interrupted \(SIGTERM\); nothing partial was written as complete"):
            score_run(recorded_golden, run, Tolerances())
    finally:
        clear_interrupt()
    assert len(scored) == per_batch  # the first batch only: the signal arrived while it was scored
