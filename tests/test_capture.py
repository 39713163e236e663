"""The capture file and the laws on captured requests: round trips, what the laws catch, bad files (exit 2).

No model runs here (except where a geometry mismatch must be found against one): captures are packed
law-geometry blocks with random "served" outputs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.capture_simulated_engine import one_short_packer
from harness import cli
from harness.capture import CapturedRequest, CaptureError, CaptureReader, CaptureWriter
from harness.capture.capture_laws import Survey, check_captured
from harness.capture.schema import META_KEY
from harness.corpus.synth import synth_corpus
from harness.data.corpus_schema import write_corpus
from harness.laws.law_controls import PaddingFirstPacker, off_by_one_packer
from harness.laws.strategies import LAW_GEOMETRY, block_lists
from harness.packers.packing import PackedRequest, pack

G = LAW_GEOMETRY
NOW = "2026-01-02T03:04:05.678901+00:00"


def served(packed: PackedRequest, seed: int = 0) -> np.ndarray:
    """A random output of the request's shape (what a server would have answered)."""
    shape = (packed.windows, G.frames_per_window, G.classes) if packed.op == 0 else (packed.rows, G.embedding_dim)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def captured(packed: PackedRequest, request_id: str = "r0", seed: int = 0) -> CapturedRequest:
    return CapturedRequest(request_id, packed, served(packed, seed), "fp-engine", "NVIDIA H100", "1.2.3", NOW)


def write(path: Path, requests: list[CapturedRequest]) -> Path:
    with CaptureWriter(path, G, "engine-test") as writer:
        for r in requests:
            writer.add(r)
        writer.close()
    return path


# ------------------------------------------------------------------------------------------ round trip


@settings(max_examples=30, deadline=None)
@given(block_lists(max_k=12), st.one_of(st.none(), st.integers(0, 3)), st.booleans(), st.integers(0, 2**31))
def test_what_is_written_is_read_back_exactly(blocks, extra, labelled, seed):
    packed = pack(blocks, pad_to=None if extra is None else len(blocks) + extra)
    if not labelled:
        packed = dataclasses.replace(packed, speakers=None)
    request = captured(packed, "req-1", seed)
    request = dataclasses.replace(
        request,
        output=np.where(
            np.arange(request.output.size).reshape(request.output.shape) == 0, np.float32(np.nan), request.output
        ),
    )  # a NaN output is recorded, not refused
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp) / "c.parquet", [request, captured(pack(blocks), "req-2")])
        back = list(CaptureReader(Path(tmp) / "c.parquet").requests())
    assert [b.request_id for b in back] == ["req-1", "req-2"] and [b.row for b in back] == [0, 1]
    got = back[0]
    for name in ("span", "offsets", "valid", "weights", "idx", "speakers"):
        want, have = getattr(packed, name), getattr(got.packed, name)
        assert (want is None) == (have is None), name
        if want is not None:
            assert have.dtype == want.dtype and np.array_equal(have, want), name
    assert got.packed.segments == packed.segments and got.op == packed.op
    assert np.array_equal(got.output, request.output, equal_nan=True) and got.output.dtype == np.float32
    assert (got.model_fingerprint, got.device_kind, got.engine_version, got.captured_at) == (
        "fp-engine",
        "NVIDIA H100",
        "1.2.3",
        NOW,
    )


def test_a_capture_written_by_another_program_from_the_documented_schema_is_read(tmp_path):
    """Plain pyarrow, as docs/audit.md describes it: list (not large_list), a millisecond timestamp with another
    zone spelling, its own child field names, an extra column, no page checksums."""
    blocks = [b for b in synth_corpus(G, 2).blocks]
    packed = pack(blocks)
    out = served(packed)
    seg = pa.struct(
        [
            ("block_id", pa.string()),
            ("padding", pa.bool_()),
            ("span_start", pa.int64()),
            ("span_length", pa.int64()),
            ("window_start", pa.int64()),
            ("windows", pa.int64()),
            ("row_start", pa.int64()),
            ("rows", pa.int64()),
        ]
    )
    table = pa.table(
        {
            "request_id": ["x1"],
            "captured_at": pa.array([dt.datetime(2026, 1, 2, tzinfo=dt.UTC)], pa.timestamp("ms", tz="+00:00")),
            "engine_version": ["9"],
            "model_fingerprint": ["fp"],
            "device_kind": ["gpu"],
            "OP": pa.array([0], pa.int32()),
            "SPAN": pa.array([packed.span], pa.list_(pa.float32())),
            "OFFSETS": pa.array([packed.offsets], pa.list_(pa.int64())),
            "VALID": pa.array([packed.valid], pa.list_(pa.int32())),
            "WEIGHTS": pa.array([None], pa.list_(pa.list_(pa.float32(), G.frames_per_window))),
            "IDX": pa.array([None], pa.list_(pa.int32())),
            "speakers": pa.array([None], pa.list_(pa.int32())),
            "segments": pa.array([[{f: getattr(s, f) for f in seg.names} for s in packed.segments]], pa.list_(seg)),
            "output": pa.array([out.reshape(-1)], pa.list_(pa.float32())),
            "output_shape": pa.array([list(out.shape)], pa.list_(pa.int64())),
            "trace_id": ["abc"],
        }
    ).replace_schema_metadata({META_KEY: json.dumps({"version": 1, "engine": "rust", "geometry": G.to_dict()})})
    pq.write_table(table, tmp_path / "rust.parquet")
    reader = CaptureReader(tmp_path / "rust.parquet")
    (got,) = list(reader.requests())
    assert got.captured_at == "2026-01-02T00:00:00.000000+00:00" and np.array_equal(got.output, out)
    survey = Survey(reader.geometry)
    survey.add(got)
    assert survey.passed and survey.blocks == 2


# ------------------------------------------------------------------------------------------ the laws


@settings(max_examples=150, deadline=None)
@given(block_lists(max_k=16), st.one_of(st.none(), st.integers(0, 3)))
def test_requests_of_the_harness_packer_obey_the_laws(blocks, extra):
    packed = pack(blocks, pad_to=None if extra is None else len(blocks) + extra)
    assert check_captured(captured(packed), G) == []


def _ends_at_span_end(block) -> bool:
    return bool(((block.offsets + block.valid) == block.span.shape[0]).any())


@settings(max_examples=150, deadline=None)
@given(block_lists(max_k=16))
def test_an_off_by_one_rebase_is_caught_exactly_when_a_request_can_show_it(blocks):
    """OFFSETS one sample too far: a request shows it iff a shifted block has a window ending on its span's end
    (it then reads the next block's first sample, or runs past SPAN); otherwise the shifted request is a valid
    packing of other blocks, which no check of the request alone can tell (docs/audit.md)."""
    found = check_captured(captured(off_by_one_packer(blocks), "r7"), G)
    visible = any(_ends_at_span_end(b) for b in blocks[1:])
    assert bool(found) == visible
    if found:
        (v,) = found
        assert v.law in ("well-formed", "rebased-inside") and v.request_id == "r7"
        assert v.block_id in [b.id for b in blocks[1:]], v


@settings(max_examples=150, deadline=None)
@given(block_lists(max_k=16))
def test_a_rebase_one_sample_short_is_caught_when_a_block_starts_a_window_on_its_first_sample(blocks):
    found = check_captured(captured(one_short_packer(blocks)), G)
    assert bool(found) == any((b.offsets == 0).any() for b in blocks[1:])
    assert all(v.block_id in [b.id for b in blocks[1:]] for v in found)


def test_each_law_names_the_request_the_block_and_what_is_wrong():
    blocks = synth_corpus(G, 3).blocks
    good = pack(blocks)
    offsets = good.offsets.copy()
    offsets[9] = -5  # the contract: window 1 of the second block
    (v,) = check_captured(captured(dataclasses.replace(good, offsets=offsets), "q"), G)
    assert (v.law, v.block_id) == ("well-formed", blocks[1].id) and v.what == "OFFSETS[9]=-5: offset is negative"
    segs = list(good.segments)
    segs[2] = dataclasses.replace(segs[2], span_start=segs[2].span_start + 1)  # the layout
    (v,) = check_captured(captured(dataclasses.replace(good, segments=tuple(segs))), G)
    assert v.law == "well-formed" and v.block_id == blocks[2].id and "contiguous packing puts it at span" in v.what
    segs = [dataclasses.replace(s, block_id="same") for s in good.segments[:2]] + list(good.segments[2:])
    (v,) = check_captured(captured(dataclasses.replace(good, segments=tuple(segs))), G)
    assert (v.law, v.block_id, v.what) == ("well-formed", "same", "the block id appears twice in the layout")
    padded = PaddingFirstPacker().pack(blocks, pad_to=4)  # padding first: its windows start on block 0's audio
    valid = padded.valid.copy()
    valid[2] = 3  # a padding block holding audio
    (v,) = check_captured(captured(dataclasses.replace(padded, valid=valid)), G)
    assert v.law == "well-formed" and v.block_id == "<pad>3" and "padding segment '<pad>3' must have" in v.what
    wrong = pack(blocks)
    seven = [
        dataclasses.replace(s, windows=7 if i == 0 else s.windows, window_start=s.window_start - (i > 0))
        for i, s in enumerate(wrong.segments)
    ]
    keep = np.r_[0:7, 8 : wrong.windows]
    (v,) = check_captured(
        captured(
            dataclasses.replace(wrong, segments=tuple(seven), offsets=wrong.offsets[keep], valid=wrong.valid[keep])
        ),
        G,
    )
    assert v.law == "well-formed" and v.block_id == blocks[0].id and "exactly 8 windows" in v.what


# ------------------------------------------------------------------------------------------ bad files: exit 2


@pytest.fixture
def good_capture(tmp_path) -> Path:
    blocks = synth_corpus(G, 4).blocks
    return write(tmp_path / "good.parquet", [captured(pack(blocks[:2]), "a"), captured(pack(blocks[2:]), "b")])


def rewritten(src: Path, dst: Path, change=lambda t: t, meta: bytes | None = None) -> Path:
    table = change(pq.read_table(src))
    if meta is not None:
        table = table.replace_schema_metadata({META_KEY: meta})
    pq.write_table(table, dst)
    return dst


def audit_cli(capsys, monkeypatch, path: Path, *more: str) -> tuple[int, str, str]:
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "harness",
            "audit",
            str(path),
            "--golden-model",
            "small",
            "--set",
            "numerics.threads=1",
            "--no-progress",
            "--out",
            str(path.parent / "audit"),
            *more,
        ],
    )
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _set(table: pa.Table, name: str, array: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, array)


BAD = {
    "missing": (lambda p, d: d / "nope.parquet", "capture file not found"),
    "truncated": (
        lambda p, d: _bytes(d / "t.parquet", p.read_bytes()[: p.stat().st_size // 2]),
        "not a readable Parquet capture file",
    ),
    "flipped byte": (lambda p, d: _flip(p, d / "f.parquet"), "capture is corrupt in row group 0"),
    "a corpus": (
        lambda p, d: _corpus(d / "corpus.parquet"),
        "not a capture: no 'harness.capture' metadata (it is a corpus file) (see docs/audit.md)",
    ),
    "another version": (
        lambda p, d: rewritten(
            p, d / "v.parquet", meta=json.dumps({"version": 2, "engine": "e", "geometry": G.to_dict()}).encode()
        ),
        "metadata 'harness.capture': version: unknown format version",
    ),
    "metadata not JSON": (
        lambda p, d: rewritten(p, d / "j.parquet", meta=b"{oops"),
        "capture metadata 'harness.capture' is not JSON",
    ),
    "missing column": (
        lambda p, d: rewritten(p, d / "m.parquet", lambda t: t.drop_columns(["segments"])),
        "not a capture: missing column 'segments'",
    ),
    "wrong type": (
        lambda p, d: rewritten(
            p, d / "w.parquet", lambda t: _set(t, "OFFSETS", t.column("OFFSETS").cast(pa.list_(pa.int32())))
        ),
        "column 'OFFSETS' has type list<int32>, expected list<int64>",
    ),
    "naive time": (
        lambda p, d: rewritten(
            p, d / "n.parquet", lambda t: _set(t, "captured_at", t.column("captured_at").cast(pa.timestamp("us")))
        ),
        "column 'captured_at' has type timestamp[us], expected timestamp with a time zone (UTC)",
    ),
    "wrong output shape": (
        lambda p, d: rewritten(
            p, d / "o.parquet", lambda t: _set(t, "output_shape", pa.array([[16, 5, 7], [8, 70]], pa.list_(pa.int64())))
        ),
        "row 1 (request 'b'): the served output has shape [8, 70], but an OP 0 request of 16 windows is answered "
        "with [16, 5, 7]: it does not answer this request",
    ),
    "duplicate id": (
        lambda p, d: rewritten(p, d / "d.parquet", lambda t: _set(t, "request_id", pa.array(["a", "a"], pa.string()))),
        "row 1 (request 'a'): request id appears twice",
    ),
    "no rows": (lambda p, d: rewritten(p, d / "e.parquet", lambda t: t.slice(0, 0)), "capture holds no requests"),
}


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _flip(src: Path, dst: Path) -> Path:
    chunk = pq.ParquetFile(src).metadata.row_group(0).column(6)  # SPAN: its pages' bytes
    assert chunk.path_in_schema.startswith("SPAN")
    data = bytearray(src.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size // 2] ^= 0xFF
    return _bytes(dst, bytes(data))


def _corpus(path: Path) -> Path:
    write_corpus(path, synth_corpus(G, 2), G)
    return path


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_capture_that_cannot_be_read_is_one_line_and_exit_2(case, good_capture, tmp_path, capsys, monkeypatch):
    make, words = BAD[case]
    path = make(good_capture, tmp_path)
    code, out, err = audit_cli(capsys, monkeypatch, path)
    assert code == 2 and out == "", (out, err)
    assert err.startswith(f"harness: error: {path}: ") and words in err and err.count("\n") == 1, err
    assert not list((tmp_path / "audit").glob("*"))  # nothing written


def test_a_capture_cut_for_another_geometry_than_the_golden_model_is_refused(good_capture, capsys, monkeypatch):
    code, out, err = audit_cli(capsys, monkeypatch, good_capture)
    assert (
        code == 2
        and "the capture's requests were cut for another geometry than the golden model 'small' "
        "declares: window_samples 64 (capture) vs 16000 (golden model)"
        in err
        and err.count("\n") == 1
    )


def test_the_writer_refuses_what_could_not_be_read_back(tmp_path):
    packed = pack(synth_corpus(G, 1).blocks)
    with (
        pytest.raises(CaptureError, match="request 'a': request id appears twice"),
        CaptureWriter(tmp_path / "c.parquet", G, "e") as w,
    ):
        w.add(captured(packed, "a"))
        w.add(captured(packed, "a"))
    with (
        pytest.raises(CaptureError, match="output must be a float32 array"),
        CaptureWriter(tmp_path / "c.parquet", G, "e") as w,
    ):
        w.add(dataclasses.replace(captured(packed), output=served(packed).astype(np.float64)))
    with pytest.raises(CaptureError, match="a capture needs at least one request"):
        CaptureWriter(tmp_path / "c.parquet", G, "e").close()
    assert not (tmp_path / "c.parquet").exists()


def test_the_docs_tables_are_the_declared_schemas():
    from harness.capture.result import schema_markdown
    from harness.capture.schema import columns_markdown

    page = (Path(__file__).resolve().parent.parent / "docs" / "audit.md").read_text()
    assert columns_markdown() in page
    assert schema_markdown() in page
