"""The corpus: one schema, three sources, refused whole on a bad block, never half-written."""

from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.base.errors import BlockError, CorpusError, HarnessError
from harness.corpus import read_corpus, write_corpus
from harness.corpus.cutting import cut_blocks, window_starts
from harness.corpus.synth import synth_corpus
from harness.corpus.wav import read_wav, wav_corpus, write_wav
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import SCHEMA, Corpus


def to_table(corpus, geometry, tmp=None):
    """The corpus as the Parquet table write_corpus writes (read back)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.parquet"
        write_corpus(path, corpus, geometry)
        return pq.read_table(path)


def test_synth_is_deterministic_and_realistic(geometry):
    a, b = synth_corpus(geometry, 9, seed=3), synth_corpus(geometry, 9, seed=3)
    assert a.ids == b.ids
    for x, y in zip(a.blocks, b.blocks, strict=True):
        np.testing.assert_array_equal(x.span, y.span)
    assert synth_corpus(geometry, 9, seed=4).blocks[0].span.tobytes() != a.blocks[0].span.tobytes()
    summary = a.summary(geometry)
    assert summary.short_windows >= 1 and summary.padding_windows >= 1
    prov = a.provenance[0]
    assert prov["source"] == "synth" and prov["overlapped_turns"] >= 0 and prov["turns"] >= 1
    # speech and silence: frame energy varies a lot
    frames = a.blocks[0].span[: len(a.blocks[0].span) // 160 * 160].reshape(-1, 160)
    energy = (frames**2).mean(axis=1)
    assert energy.max() > 100 * np.percentile(energy, 5)


def test_short_final_window_ends_its_span(geometry):
    """The case a leak feeds on: the last audio window stops exactly at its block's span end."""
    corpus = synth_corpus(geometry, 6)
    for block, prov in zip(corpus.blocks, corpus.provenance, strict=True):
        if prov["short_windows"]:
            last = int(np.flatnonzero(block.valid > 0)[-1])
            assert block.valid[last] < geometry.window_samples
            assert block.offsets[last] + block.valid[last] == block.span.shape[0]


def test_cutting_covers_the_recording(geometry):
    audio = np.random.default_rng(0).standard_normal(geometry.window_samples * 3 + 123).astype(np.float32)
    step = geometry.window_samples // 4
    cut = cut_blocks(audio, geometry, step, "rec")
    starts = window_starts(audio.shape[0], geometry.window_samples, step)
    assert sum(p["windows"] for _, p in cut) == len(starts)
    last_block, last_prov = cut[-1]
    assert last_prov["padding_windows"] == 8 - last_prov["windows"]
    assert (last_block.valid[last_prov["windows"] :] == 0).all()
    for block, prov in cut:
        start = prov["start_sample"]
        for off, v in zip(block.offsets, block.valid, strict=True):
            np.testing.assert_array_equal(block.span[off : off + v], audio[start + off : start + off + v])


def test_parquet_roundtrip_and_plain_readers(tmp_path, geometry, small_corpus):
    path = tmp_path / "c.parquet"
    summary = write_corpus(path, small_corpus, geometry)
    assert summary == small_corpus.summary(geometry) == CorpusReader(path, geometry).validate()
    back = read_corpus(path, geometry)
    assert back.ids == small_corpus.ids and back.provenance == small_corpus.provenance
    for a, b in zip(back.blocks, small_corpus.blocks, strict=True):
        np.testing.assert_array_equal(a.span, b.span)
        np.testing.assert_array_equal(a.valid, b.valid)
    table = pq.read_table(path)
    assert table.schema.remove_metadata().equals(SCHEMA)
    assert pq.ParquetFile(path).metadata.row_group(0).column(2).compression == "ZSTD"
    assert pq.ParquetFile(path).metadata.num_row_groups == 1  # 12 blocks, 16 per row group: streamed in groups
    assert json.loads(table.schema.metadata[b"harness.corpus"])["window_samples"] == geometry.window_samples


def _corrupt(table: pa.Table, row: int, column: str, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    return table.set_column(
        table.schema.get_field_index(column), column, pa.array(values, table.schema.field(column).type)
    )


def test_a_corpus_with_one_bad_block_is_refused_whole_naming_it(tmp_path, geometry, small_corpus):
    table = to_table(small_corpus, geometry)
    bad_offsets = list(table.column("offsets")[5].as_py())
    bad_offsets[2] = -7
    pq.write_table(_corrupt(table, 5, "offsets", bad_offsets), tmp_path / "bad.parquet")
    with pytest.raises(CorpusError) as info:
        read_corpus(tmp_path / "bad.parquet", geometry)
    msg = str(info.value)
    assert "row 5" in msg and small_corpus.ids[5] in msg and "OFFSETS[2]=-7" in msg


def test_capture_schema_written_by_another_program(tmp_path, geometry):
    """An engine writes the schema with its own types (float64 audio, int32 offsets): normalised on import."""
    span = np.zeros(geometry.window_samples + 7 * 100, dtype=np.float64)
    table = pa.table(
        {
            "block_id": ["eng-1"],
            "source": ["capture"],
            "span": pa.array([span.tolist()], pa.list_(pa.float64())),
            "offsets": pa.array([list(range(0, 800, 100))], pa.list_(pa.int32())),
            "valid": pa.array([[geometry.window_samples] * 8], pa.list_(pa.int32())),
            "provenance": ['{"stream": 4}'],
        }
    )
    pq.write_table(table, tmp_path / "cap.parquet")
    with pytest.raises(
        CorpusError, match="no 'harness.corpus' metadata: the geometry the corpus was cut for is unknown"
    ):
        read_corpus(tmp_path / "cap.parquet", geometry)
    corpus = read_corpus(tmp_path / "cap.parquet", geometry, require_meta=False)  # what `corpus capture` does
    assert corpus.blocks[0].span.dtype == np.float32 and corpus.blocks[0].offsets.dtype == np.int64
    assert corpus.provenance[0] == {"stream": 4}


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda t: t.drop_columns(["valid"]), "missing column 'valid'"),
        (lambda t: t.set_column(0, "block_id", pa.array(["x", "x"])), "appears twice"),
    ],
)
def test_bad_capture_files(tmp_path, geometry, small_corpus, mutate, message):
    table = to_table(Corpus(small_corpus.blocks[:2], ["capture"] * 2, [{}, {}]), geometry)
    pq.write_table(mutate(table), tmp_path / "c.parquet")
    with pytest.raises(CorpusError, match=message):
        read_corpus(tmp_path / "c.parquet", geometry)


@pytest.mark.parametrize(
    "meta,message",
    [
        (b"7", "metadata 'harness.corpus': must be a JSON object \\(got 7\\)"),
        (b"[1, 2]", "metadata 'harness.corpus': must be a JSON object \\(got \\[1, 2\\]\\)"),
        (
            b'{"version": 1, "sample_rate": "abc", "window_samples": 16000, "windows_per_block": 8}',
            "sample_rate: Input should be a valid integer",
        ),
        (
            b'{"version": 99, "sample_rate": 16000, "window_samples": 16000, "windows_per_block": 8}',
            "version: unknown format version",
        ),
        (b"not json", "metadata 'harness.corpus' is not JSON"),
    ],
)
def test_corpus_metadata_is_checked_whole(tmp_path, geometry, small_corpus, meta, message):
    table = to_table(small_corpus, geometry).replace_schema_metadata({b"harness.corpus": meta})
    pq.write_table(table, tmp_path / "c.parquet")
    with pytest.raises(CorpusError, match=message):
        read_corpus(tmp_path / "c.parquet", geometry)


def test_a_null_inside_offsets_is_named_as_a_null(tmp_path, geometry, small_corpus):
    table = to_table(small_corpus, geometry)
    offsets = table.column("offsets").to_pylist()
    offsets[3][4] = None
    table = table.set_column(
        table.schema.get_field_index("offsets"), "offsets", pa.array(offsets, pa.list_(pa.int64()))
    )
    pq.write_table(table, tmp_path / "c.parquet")
    with pytest.raises(BlockError, match=r"OFFSETS\[4\]=None: null value inside the list \(row 3"):
        read_corpus(tmp_path / "c.parquet", geometry)


def test_one_flipped_byte_is_caught_by_the_page_checksums(tmp_path, geometry, small_corpus):
    from tests.tamper import flip_byte

    path = tmp_path / "c.parquet"
    write_corpus(path, small_corpus, geometry)
    flip_byte(path, at=path.stat().st_size // 3)  # inside the audio pages
    with pytest.raises(HarnessError, match="c.parquet"):
        read_corpus(path, geometry)


def test_not_parquet_and_wrong_geometry(tmp_path, geometry, small_corpus):
    (tmp_path / "x.parquet").write_bytes(b"garbage")
    with pytest.raises(CorpusError, match="not a readable Parquet corpus file"):
        read_corpus(tmp_path / "x.parquet", geometry)
    path = tmp_path / "c.parquet"
    write_corpus(path, small_corpus, geometry)
    from lanes.models.diar_nn_g import CONFIGS

    with pytest.raises(CorpusError, match="cut for window_samples=16000"):
        read_corpus(path, CONFIGS["full"].geometry())


def test_write_is_all_or_nothing(tmp_path, geometry, small_corpus):
    from harness.data.blocks import Block

    broken = Block(
        id="zz",
        op=small_corpus.blocks[0].op,
        span=small_corpus.blocks[0].span,
        offsets=small_corpus.blocks[0].offsets,
        valid=small_corpus.blocks[0].valid + 10**6,
    )
    corpus = Corpus([*small_corpus.blocks[:3], broken], ["synth"] * 4, [{}] * 4)
    with pytest.raises(CorpusError, match="'zz'"):
        write_corpus(tmp_path / "c.parquet", corpus, geometry)
    assert list(tmp_path.iterdir()) == []  # nothing half-written, no temporary left


# ------------------------------------------------------------------ WAV


def test_wav_pcm16_roundtrip_into_blocks(tmp_path, geometry):
    audio = 0.3 * np.sin(np.arange(geometry.window_samples * 3) / 7.0)
    write_wav(tmp_path / "a.wav", audio, geometry.sample_rate)
    corpus = wav_corpus([tmp_path / "a.wav"], geometry)
    assert corpus.sources[0] == "wav" and corpus.provenance[0]["file"].endswith("a.wav")
    np.testing.assert_allclose(corpus.blocks[0].span[:100], audio[:100], atol=1 / 32767)


def _wav(path, samples: bytes, tag: int, channels: int, rate: int, bits: int):
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(samples),
        b"WAVE",
        b"fmt ",
        16,
        tag,
        channels,
        rate,
        rate * channels * bits // 8,
        channels * bits // 8,
        bits,
        b"data",
        len(samples),
    )
    path.write_bytes(header + samples)
    return path


def test_wav_float_and_stereo_are_read(tmp_path):
    left = np.linspace(-1, 1, 100, dtype=np.float32)
    stereo = np.stack([left, -left], axis=1).reshape(-1)
    audio, rate, channels = read_wav(_wav(tmp_path / "s.wav", stereo.tobytes(), 3, 2, 16000, 32))
    assert rate == 16000 and channels == 2 and np.allclose(audio, 0)
    pcm24 = b"".join(int(v * (2**23 - 1)).to_bytes(3, "little", signed=True) for v in left)
    audio24, _, _ = read_wav(_wav(tmp_path / "p.wav", pcm24, 1, 1, 16000, 24))
    np.testing.assert_allclose(audio24, left, atol=1e-6)


def test_wav_bad_inputs_are_named(tmp_path, geometry):
    write_wav(tmp_path / "hi.wav", np.zeros(1000), 44100)
    with pytest.raises(CorpusError, match=r"hi.wav: sample rate 44100 Hz, the model needs 16000 Hz"):
        wav_corpus([tmp_path / "hi.wav"], geometry)
    (tmp_path / "n.wav").write_bytes(b"hello world, not audio")
    with pytest.raises(CorpusError, match="not a RIFF/WAVE file"):
        read_wav(tmp_path / "n.wav")
    good = write_wav(tmp_path / "t.wav", np.zeros(1000), 16000).read_bytes()
    (tmp_path / "t.wav").write_bytes(good[:-500])
    with pytest.raises(CorpusError, match="truncated"):
        read_wav(tmp_path / "t.wav")
    with pytest.raises(CorpusError, match="unsupported sample format"):
        read_wav(_wav(tmp_path / "u.wav", b"\0" * 16, 1, 1, 16000, 8))
    with pytest.raises(CorpusError, match="cannot read"):
        read_wav(tmp_path / "missing.wav")
    odd = _wav(tmp_path / "odd.wav", b"\0" * 1001, 1, 1, 16000, 16)
    with pytest.raises(CorpusError, match="odd.wav: data chunk holds 1001 bytes, not a whole number of 2-byte samples"):
        read_wav(odd)


def test_the_same_audio_twice_is_refused(tmp_path, geometry):
    audio = 0.3 * np.sin(np.arange(geometry.window_samples * 2) / 7.0)
    write_wav(tmp_path / "a.wav", audio, geometry.sample_rate)
    (tmp_path / "copy.wav").write_bytes((tmp_path / "a.wav").read_bytes())
    with pytest.raises(CorpusError, match="copy.wav: the same audio as .*a.wav"):
        wav_corpus([tmp_path / "a.wav", tmp_path / "copy.wav"], geometry)


def test_a_step_longer_than_the_audio_is_valid_input(tmp_path, geometry):
    audio = 0.3 * np.sin(np.arange(geometry.window_samples + 500) / 7.0)
    write_wav(tmp_path / "a.wav", audio, geometry.sample_rate)
    corpus = wav_corpus([tmp_path / "a.wav"], geometry, step=10 * geometry.window_samples)
    assert len(corpus) == 1 and int((corpus.blocks[0].valid > 0).sum()) == 1
