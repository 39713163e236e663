"""Deterministic multi-speaker audio, so the harness has realistic inputs with no downloads.

Each recording is a conversation between a few synthetic voices. A voice is a glottal-like
harmonic source (its own pitch, jitter of pitch, brightness) shaped by its own formants and
gated into syllables; turns follow each other with pauses, and some turns overlap (two
voices at once), so the segmentation sees speech, silence, speaker changes and overlap.
Recording lengths are chosen so that the final window of each recording is short
(VALID < window): the case where a packing leak would read the next block's audio.
Everything is drawn from ``numpy.random.RandomState(seed)`` (a stream numpy keeps stable).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.blocks import Block
from harness.corpus.cutting import cut_blocks
from harness.corpus.schema import Corpus
from harness.geometry import Geometry


@dataclass(frozen=True)
class Voice:
    pitch_hz: float
    formants_hz: tuple[float, float, float]
    brightness: float  # spectral tilt: amplitude of harmonic h ~ h ** -brightness
    loudness: float


@dataclass(frozen=True)
class Turn:
    speaker: int
    start: int
    length: int


def make_voices(rng: np.random.RandomState, count: int) -> list[Voice]:
    voices = []
    pitches = rng.permutation(np.linspace(95.0, 260.0, max(count, 2)))[:count]
    for pitch in pitches:
        f1 = rng.uniform(300, 850)
        voices.append(Voice(
            pitch_hz=float(pitch),
            formants_hz=(float(f1), float(rng.uniform(f1 + 500, 2300)), float(rng.uniform(2400, 3400))),
            brightness=float(rng.uniform(0.9, 1.6)),
            loudness=float(rng.uniform(0.05, 0.12)),
        ))
    return voices


def conversation(rng: np.random.RandomState, length: int, speakers: int, sample_rate: int,
                 overlap_prob: float = 0.25) -> list[Turn]:
    """Turns covering ``length`` samples: speech, pauses, speaker changes and overlaps."""
    turns, t, current = [], int(rng.uniform(0.2, 1.0) * sample_rate), 0
    while t < length:
        dur = int(rng.uniform(0.6, 3.5) * sample_rate)
        turns.append(Turn(current, t, min(dur, length - t)))
        if speakers > 1 and rng.uniform() < overlap_prob:
            other = (current + 1 + rng.randint(speakers - 1)) % speakers
            o_start = t + int(dur * rng.uniform(0.3, 0.8))
            o_len = int(rng.uniform(0.4, 1.5) * sample_rate)
            if o_start < length:
                turns.append(Turn(other, o_start, min(o_len, length - o_start)))
        gap = int(rng.choice([0.05, 0.3, 0.8, 1.6]) * sample_rate * rng.uniform(0.5, 1.5))
        t += dur + gap
        if speakers > 1:
            current = (current + 1 + rng.randint(speakers - 1)) % speakers
    return turns


def render_turn(rng: np.random.RandomState, voice: Voice, length: int, sample_rate: int) -> np.ndarray:
    t = np.arange(length) / sample_rate
    vibrato = 1.0 + 0.03 * np.sin(2 * np.pi * rng.uniform(3, 6) * t + rng.uniform(0, 2 * np.pi))
    drift = 1.0 + 0.08 * np.sin(2 * np.pi * rng.uniform(0.2, 0.6) * t)
    f0 = voice.pitch_hz * vibrato * drift
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    out = np.zeros(length)
    for h in range(1, int(3800 // voice.pitch_hz) + 1):
        freq = h * voice.pitch_hz
        gain = h ** -voice.brightness * sum(1.0 / (1.0 + ((freq - f) / (0.12 * f + 60)) ** 2)
                                            for f in voice.formants_hz)
        out += gain * np.sin(h * phase)
    syllable_rate = rng.uniform(3.0, 5.5)
    envelope = np.clip(np.sin(np.pi * syllable_rate * t + rng.uniform(0, np.pi)) * 1.6, 0, 1) ** 0.7
    ramp = np.minimum(1.0, np.minimum(np.arange(length), np.arange(length)[::-1]) / (0.02 * sample_rate))
    out *= envelope * ramp
    peak = np.abs(out).max() or 1.0
    return voice.loudness * out / peak


def synth_recording(seed: int, seconds: float, speakers: int, sample_rate: int) -> tuple[np.ndarray, list[Turn]]:
    rng = np.random.RandomState(seed)
    length = int(seconds * sample_rate)
    voices = make_voices(rng, speakers)
    turns = conversation(rng, length, speakers, sample_rate)
    audio = 0.002 * rng.standard_normal(length)  # room noise
    for turn in turns:
        audio[turn.start : turn.start + turn.length] += render_turn(rng, voices[turn.speaker], turn.length,
                                                                     sample_rate)
    return audio.astype(np.float32), turns


def synth_corpus(geometry: Geometry, blocks: int, seed: int = 0, step: int | None = None,
                 speakers: int = 3) -> Corpus:
    """At least ``blocks`` blocks from deterministic recordings (exactly ``blocks`` returned).

    Each recording is 2-3 blocks long and ends on a short window, so the corpus interleaves
    full blocks with short final blocks.
    """
    if blocks <= 0:
        raise ValueError("a corpus needs at least one block")
    step = step or geometry.window_samples // 4
    per_block = geometry.windows_per_block
    out_blocks: list[Block] = []
    provenance: list[dict] = []
    r = 0
    while len(out_blocks) < blocks:
        rng = np.random.RandomState([seed, r])
        windows = per_block * int(rng.randint(2, 4)) - int(rng.randint(1, 4))  # last block partly padded
        tail = rng.uniform(0.3, 0.8)  # final window holds this fraction of a window
        length = (windows - 1) * step + int(tail * geometry.window_samples)
        seconds = length / geometry.sample_rate
        audio, turns = synth_recording(int(rng.randint(2**31 - 1)), seconds, speakers, geometry.sample_rate)
        for block, prov in cut_blocks(audio, geometry, step, prefix=f"synth-s{seed}-r{r:03d}"):
            prov.update({"source": "synth", "seed": seed, "recording_seconds": round(seconds, 3),
                         "turns": len(turns), "overlapped_turns": _overlaps(turns)})
            out_blocks.append(block)
            provenance.append(prov)
        r += 1
    out_blocks, provenance = out_blocks[:blocks], provenance[:blocks]
    meta = {"sample_rate": geometry.sample_rate, "window_samples": geometry.window_samples,
            "windows_per_block": per_block}
    return Corpus(out_blocks, ["synth"] * len(out_blocks), provenance, meta)


def _overlaps(turns: list[Turn]) -> int:
    ends = sorted((t.start, t.start + t.length) for t in turns)
    return sum(1 for (s0, e0), (s1, _) in zip(ends, ends[1:], strict=False) if s1 < e0)
