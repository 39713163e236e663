"""WAV files -> blocks, with no audio library: a small RIFF reader and the engine's cutting.

Accepted: RIFF/WAVE, PCM 16/24/32-bit integer or IEEE float 32/64 (also inside
WAVE_FORMAT_EXTENSIBLE), at the model's sample rate. Several channels are averaged to mono
(and the provenance says so). Another sample rate is refused, naming the file and the rate:
resampling changes the audio the golden is about, so it is the user's explicit step
(e.g. ``sox in.wav -r 16000 out.wav``).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from harness.base.errors import CorpusError
from harness.corpus.cutting import cut_blocks
from harness.data.corpus_schema import Corpus, CorpusRow, geometry_meta
from harness.data.geometry import Geometry

_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE


def read_wav(path: str | Path) -> tuple[np.ndarray, int, int]:
    """(mono float32 samples, sample rate, original channel count)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise CorpusError(f"{path}: not a RIFF/WAVE file")
    fmt = None
    samples = None
    pos = 12
    while pos + 8 <= len(data):
        chunk_id, size = data[pos : pos + 4], struct.unpack("<I", data[pos + 4 : pos + 8])[0]
        body = data[pos + 8 : pos + 8 + size]
        if chunk_id == b"fmt ":
            if len(body) < 16:
                raise CorpusError(f"{path}: fmt chunk too short")
            tag, channels, rate, _, _, bits = struct.unpack("<HHIIHH", body[:16])
            if tag == _EXTENSIBLE and len(body) >= 26:
                tag = struct.unpack("<H", body[24:26])[0]
            fmt = (tag, channels, rate, bits)
        elif chunk_id == b"data":
            if len(body) < size:
                raise CorpusError(f"{path}: data chunk truncated ({len(body)} of {size} bytes)")
            samples = body
        pos += 8 + size + (size & 1)
    if fmt is None:
        raise CorpusError(f"{path}: no fmt chunk")
    if samples is None:
        raise CorpusError(f"{path}: no data chunk")
    tag, channels, rate, bits = fmt
    if channels < 1:
        raise CorpusError(f"{path}: {channels} channels")
    audio = _decode(path, samples, tag, bits)
    frame = channels
    if audio.size % frame:
        raise CorpusError(f"{path}: data is not a whole number of {channels}-channel frames")
    audio = audio.reshape(-1, channels).mean(axis=1) if channels > 1 else audio
    if audio.size == 0:
        raise CorpusError(f"{path}: holds no samples")
    if not np.isfinite(audio).all():
        raise CorpusError(f"{path}: holds NaN or Inf samples")
    return audio.astype(np.float32), rate, channels


def _decode(path: Path, raw: bytes, tag: int, bits: int) -> np.ndarray:
    width = {(_PCM, 16): 2, (_PCM, 24): 3, (_PCM, 32): 4, (_FLOAT, 32): 4, (_FLOAT, 64): 8}.get((tag, bits))
    if width is None:
        raise CorpusError(
            f"{path}: unsupported sample format (format tag {tag}, {bits} bits); use PCM 16/24/32 or float"
        )
    if len(raw) % width:
        raise CorpusError(
            f"{path}: data chunk holds {len(raw)} bytes, not a whole number of {width}-byte samples "
            "(a truncated or corrupt file)"
        )
    if tag == _PCM and bits == 16:
        return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    if tag == _PCM and bits == 32:
        return (np.frombuffer(raw, dtype="<i4").astype(np.float64) / 2**31).astype(np.float32)
    if tag == _PCM and bits == 24:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        return (v / float(1 << 23)).astype(np.float32)
    if bits == 32:
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    return np.frombuffer(raw, dtype="<f8").astype(np.float32)


def write_wav(path: str | Path, audio: np.ndarray, sample_rate: int) -> Path:
    """16-bit PCM mono (for tests and examples)."""
    pcm = np.clip(np.round(np.asarray(audio, dtype=np.float64) * 32767), -32768, 32767).astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF",
        36 + len(pcm),
        b"WAVE",
        b"fmt ",
        16,
        _PCM,
        1,
        sample_rate,
        sample_rate * 2,
        2,
        16,
        b"data",
        len(pcm),
    )
    Path(path).write_bytes(header + pcm)
    return Path(path)


def iter_wav_blocks(paths: list[str | Path], geometry: Geometry, step: int | None = None) -> Iterator[CorpusRow]:
    """(block, "wav", provenance) for every block of every file, one file in memory at a time.

    The same audio given twice (by content, whatever its name) is refused: it would be cut into two
    sets of identical blocks and inflate the corpus the sample-size gate counts."""
    if not paths:
        raise CorpusError("no WAV files given")
    step = step or geometry.window_samples // 4
    stems: set[str] = set()
    seen: dict[str, Path] = {}
    for p in paths:
        p = Path(p)
        try:
            content = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError as exc:
            raise CorpusError(f"{p}: cannot read ({exc.strerror})") from None
        if content in seen:
            raise CorpusError(f"{p}: the same audio as {seen[content]} (identical content): give each recording once")
        seen[content] = p
        audio, rate, channels = read_wav(p)
        if rate != geometry.sample_rate:
            raise CorpusError(
                f"{p}: sample rate {rate} Hz, the model needs {geometry.sample_rate} Hz "
                f"(resample first, e.g. sox {p.name} -r {geometry.sample_rate} out.wav)"
            )
        stem = p.stem
        while stem in stems:
            stem += "_"
        stems.add(stem)
        for block, prov in cut_blocks(audio, geometry, step, prefix=f"wav-{stem}"):
            prov.update(
                {
                    "source": "wav",
                    "file": str(p),
                    "sha256": content,
                    "channels": channels,
                    "downmixed": channels > 1,
                    "step": step,
                }
            )
            yield CorpusRow(block, "wav", prov)


def wav_corpus(paths: list[str | Path], geometry: Geometry, step: int | None = None) -> Corpus:
    return Corpus.collect(iter_wav_blocks(paths, geometry, step), geometry_meta(geometry))
