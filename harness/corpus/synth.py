"""Deterministic multi-speaker audio, so the harness has realistic inputs with no downloads.

Each recording is a conversation between a few synthetic voices. A voice is a glottal-like
harmonic source (its own pitch, brightness) shaped by its own formants, with vibrato and a
slow pitch drift, gated into syllables; turns follow each other with pauses, and some turns
overlap (two voices at once), so the segmentation sees speech, silence, speaker changes and
overlap. Recording lengths are chosen so that the final window of each recording is short
(VALID < window): the case where a packing leak would read the next block's audio.

Why it is fast: a voice's spectrum is fixed (harmonic gains depend on its base pitch and
formants only), so one period of its waveform is tabulated once (a wavetable) and a turn is
read out of it at the instantaneous pitch, one table lookup per sample instead of one sine
per harmonic per sample. Pitch and syllable envelopes are smooth, so they are computed
every ``CONTROL`` samples and interpolated linearly.

Why it is deterministic (same seed, same bytes, under numpy 1.x and 2.x, on any CPU): all
randomness comes from ``numpy.random.RandomState`` (a stream numpy keeps stable), and every
sample value is computed with IEEE-exact operations only (+ - * /, sqrt, floor, cumsum,
take): sines come from :func:`stable_sin` (a polynomial), never from ``np.sin``/``np.power``,
whose SIMD implementations may differ in the last bit between numpy builds and CPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from harness.corpus.cutting import cut_blocks
from harness.data.corpus_schema import Corpus, CorpusRow, geometry_meta
from harness.data.geometry import Geometry

TABLE = 4096  # samples per tabulated period: linear interpolation error below -70 dB at 40 harmonics
CONTROL = 32  # samples between control points of pitch and envelope (2 ms at 16 kHz)
NOISE_RMS = 0.002  # room noise
MAX_HARMONIC_HZ = 3800.0


@dataclass(frozen=True)
class Voice:
    pitch_hz: float
    formants_hz: tuple[float, float, float]
    brightness: float  # spectral tilt: amplitude of harmonic h ~ h ** -brightness (a multiple of 1/8)
    loudness: float


@dataclass(frozen=True)
class Turn:
    speaker: int
    start: int
    length: int


# --- a sine from exact operations only -----------------------------------------------------

_TWO_OVER_PI = 0.6366197723675814
_PIO2_HI = 1.5707963267341256  # pi/2 split in two (fdlibm's pio2_1, pio2_1t): exact n * hi
_PIO2_LO = 6.077100506506192e-11
_SIN = (-1 / 6, 1 / 120, -1 / 5040, 1 / 362880, -1 / 39916800, 1 / 6227020800)  # Taylor, to r ** 13
_COS = (-1 / 2, 1 / 24, -1 / 720, 1 / 40320, -1 / 3628800, 1 / 479001600)  # to r ** 12


def stable_sin(x: np.ndarray) -> np.ndarray:
    """sin(x) (float64, |error| < 1e-12 for |x| < 1e5) bit-for-bit the same on every platform.

    Reduced to [-pi/4, pi/4] around the nearest multiple of pi/2, then Taylor polynomials of
    sin or cos by quadrant; only +, -, *, floor and selects, which IEEE 754 rounds exactly.
    """
    x = np.asarray(x, dtype=np.float64)
    n = np.floor(x * _TWO_OVER_PI + 0.5)
    r = (x - n * _PIO2_HI) - n * _PIO2_LO
    r2 = r * r
    s = r + r * r2 * _horner(r2, _SIN)
    c = 1.0 + r2 * _horner(r2, _COS)
    quadrant = n.astype(np.int64) & 3
    out = np.where(quadrant & 1, c, s)
    signed: np.ndarray = np.where(quadrant & 2, -out, out)
    return signed


def _horner(x: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """c0 + x (c1 + x (c2 + ...)), in that order."""
    out = np.full_like(x, coefficients[-1])
    for c in coefficients[-2::-1]:
        out *= x
        out += c
    return out


# --- voices and conversations ------------------------------------------------------------------


def make_voices(rng: np.random.RandomState, count: int) -> list[Voice]:
    voices = []
    pitches = rng.permutation(np.linspace(95.0, 260.0, max(count, 2)))[:count]
    for pitch in pitches:
        f1 = rng.uniform(300, 850)
        voices.append(
            Voice(
                pitch_hz=float(pitch),
                formants_hz=(float(f1), float(rng.uniform(f1 + 500, 2300)), float(rng.uniform(2400, 3400))),
                brightness=round(float(rng.uniform(0.9, 1.6)) * 8) / 8,  # eighths: h ** -b from square roots
                loudness=float(rng.uniform(0.05, 0.12)),
            )
        )
    return voices


@dataclass(frozen=True)
class Wavetable:
    """One period of a voice, ``TABLE`` float32 samples, and the step to each next sample."""

    values: np.ndarray
    slopes: np.ndarray  # values[i + 1] - values[i], wrapping around the period


def wavetable(voice: Voice) -> Wavetable:
    """The voice's period, peak = loudness.

    Harmonic h has amplitude h ** -brightness times its closeness to each formant; the table
    holds everything below ``MAX_HARMONIC_HZ`` at the voice's base pitch (vibrato and drift
    move it by at most 11 %, far below the Nyquist frequency at 16 kHz). Harmonic h at table
    step k is sin(2 pi h k / TABLE): entry (h k mod TABLE) of one sine table.
    """
    harmonics = np.arange(1, int(MAX_HARMONIC_HZ // voice.pitch_hz) + 1, dtype=np.int64)
    eighths = round(voice.brightness * 8)
    gains = []
    for h in harmonics.tolist():
        freq = h * voice.pitch_hz
        closeness = 0.0
        for f in voice.formants_hz:
            q = (freq - f) / (0.12 * f + 60)
            closeness += 1.0 / (1.0 + q * q)
        gains.append(_inverse_power_eighths(h, eighths) * closeness)
    weighted = _sine_table().take(_harmonic_steps(harmonics.size))
    weighted *= np.array(gains)[:, None]
    period = np.zeros(TABLE)
    for row in weighted:  # summed in a fixed order, harmonic by harmonic
        period += row
    period *= voice.loudness / np.abs(period).max()
    values = period.astype(np.float32)
    return Wavetable(values, np.roll(values, -1) - values)


@dataclass
class _SharedTables:
    """Tables every voice reads, computed once per process (the harmonic steps grow to the most harmonics asked)."""

    sine: np.ndarray | None = None
    steps: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))


_TABLES = _SharedTables()


def _sine_table() -> np.ndarray:
    """sin(2 pi k / TABLE) for k < TABLE (computed once)."""
    if _TABLES.sine is None:
        _TABLES.sine = stable_sin(np.arange(TABLE, dtype=np.float64) * (2 * np.pi / TABLE))
    return _TABLES.sine


def _harmonic_steps(count: int) -> np.ndarray:
    """[h - 1, k] = h k mod TABLE for harmonics 1..count (cached: voices share it)."""
    if _TABLES.steps.shape[0] < count:
        h = np.arange(1, max(count, int(MAX_HARMONIC_HZ // 95.0)) + 1, dtype=np.int64)  # 95 Hz: lowest pitch
        _TABLES.steps = (h[:, None] * np.arange(TABLE, dtype=np.int64) % TABLE).astype(np.int32)
    return _TABLES.steps[:count]


def _inverse_power_eighths(h: int, eighths: int) -> float:
    """h ** -(eighths / 8) from square roots and products (exactly rounded; ``pow`` is not everywhere)."""
    root = float(np.sqrt(np.sqrt(np.sqrt(np.float64(h)))))
    power = 1.0
    for _ in range(eighths):
        power *= root
    return 1.0 / power


def conversation(
    rng: np.random.RandomState, length: int, speakers: int, sample_rate: int, overlap_prob: float = 0.25
) -> list[Turn]:
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


# --- rendering ---------------------------------------------------------------------------------

_J = np.arange(CONTROL, dtype=np.float64)
_RAMP32 = (_J / CONTROL).astype(np.float32)  # fraction of the way to the next control point
_RUN32 = (_J + 1).astype(np.float32)  # samples summed so far within a segment
_BEND32 = (_J * (_J + 1) / (2 * CONTROL)).astype(np.float32)  # sum of the ramp so far


def _upsample(control: np.ndarray, length: int) -> np.ndarray:
    """float32 linear interpolation between control points ``CONTROL`` samples apart."""
    c = control.astype(np.float32)
    return (c[:-1, None] + (c[1:] - c[:-1])[:, None] * _RAMP32).reshape(-1)[:length]


def _table_positions(rate: np.ndarray, length: int) -> np.ndarray:
    """Running sum of a linearly interpolated per-sample rate (table steps), modulo ``TABLE``.

    Summed in closed form per segment between control points: the position at sample j of
    segment k is start[k] + rate[k] (j + 1) + slope[k] j (j + 1) / 2C, where start[k] (the sum
    over earlier segments, float64, reduced modulo TABLE) is the only running sum. The rest is
    float32 (positions stay below a few thousand steps, resolved to 1/2048 of a step).
    """
    slope = rate[1:] - rate[:-1]
    segment = CONTROL * rate[:-1] + slope * ((CONTROL - 1) / 2)
    start = np.concatenate(([0.0], np.cumsum(segment)[:-1]))
    start -= np.floor(start / TABLE) * TABLE
    s32, r32, d32 = start.astype(np.float32), rate[:-1].astype(np.float32), slope.astype(np.float32)
    positions: np.ndarray = ((s32[:, None] + r32[:, None] * _RUN32) + d32[:, None] * _BEND32).reshape(-1)[:length]
    return positions


def render_turn(
    rng: np.random.RandomState, voice: Voice, table: Wavetable, length: int, sample_rate: int
) -> np.ndarray:
    """``length`` float32 samples of ``voice`` speaking: vibrato, drift, syllables, 20 ms fades.

    The instantaneous pitch, summed sample by sample, is the position in the voice's period
    (in table steps); each sample is the table read there, interpolated linearly.
    """
    points = length // CONTROL + 2
    t = np.arange(points, dtype=np.float64) * (CONTROL / sample_rate)
    vib_rate, vib_phase, drift_rate = rng.uniform(3, 6), rng.uniform(0, 2 * np.pi), rng.uniform(0.2, 0.6)
    syllable_rate = rng.uniform(3.0, 5.5)
    syllable_phase = rng.uniform(0, np.pi)
    vibrato, drift, syllables = stable_sin(
        np.stack(
            [
                2 * np.pi * vib_rate * t + vib_phase,
                2 * np.pi * drift_rate * t,
                np.pi * syllable_rate * t + syllable_phase,
            ]
        )
    )
    gate = np.clip(syllables * 1.6, 0.0, 1.0)
    envelope = np.sqrt(gate * np.sqrt(gate))  # gate ** 0.75: syllables with soft edges
    n = np.arange(points, dtype=np.float64) * CONTROL
    envelope *= np.minimum(1.0, np.minimum(n, length - 1 - n).clip(0.0) / (0.02 * sample_rate))
    rate = voice.pitch_hz * TABLE / sample_rate * (1.0 + 0.03 * vibrato) * (1.0 + 0.08 * drift)

    position = _table_positions(rate, length)
    whole = np.floor(position)
    frac = position - whole  # exact
    index = whole.astype(np.int32) & (TABLE - 1)
    out: np.ndarray = table.values.take(index)
    out += table.slopes.take(index) * frac
    out *= _upsample(envelope, length)
    return out


def synth_recording(seed: int, seconds: float, speakers: int, sample_rate: int) -> tuple[np.ndarray, list[Turn]]:
    rng = np.random.RandomState(seed)
    length = int(seconds * sample_rate)
    voices = make_voices(rng, speakers)
    tables = [wavetable(v) for v in voices]
    turns = conversation(rng, length, speakers, sample_rate)
    # room noise: uniform int16 draws (raw generator bytes, the cheapest draw) with the RMS of
    # the Gaussian noise they replace
    noise = np.frombuffer(rng.bytes(2 * length), dtype="<i2")
    audio = noise.astype(np.float32) * np.float32(NOISE_RMS * np.sqrt(3.0) / 32768)
    for turn in turns:
        audio[turn.start : turn.start + turn.length] += render_turn(
            rng, voices[turn.speaker], tables[turn.speaker], turn.length, sample_rate
        )
    return audio, turns


# --- corpora -----------------------------------------------------------------------------------


def iter_synth_blocks(
    geometry: Geometry, blocks: int, seed: int = 0, step: int | None = None, speakers: int = 3
) -> Iterator[CorpusRow]:
    """Exactly ``blocks`` (block, source, provenance) triples, one recording at a time.

    Each recording is 2-3 blocks long and ends on a short window, so the stream interleaves
    full blocks with short final blocks; only one recording is held in memory at once, so a
    corpus of any size can be written as it is generated.
    """
    if blocks <= 0:
        raise ValueError("a corpus needs at least one block")
    step = step or geometry.window_samples // 4
    per_block = geometry.windows_per_block
    produced, r = 0, 0
    while produced < blocks:
        rng = np.random.RandomState([seed, r])
        blocks_long, short_by = int(rng.randint(2, 4)), int(rng.randint(1, 4))
        windows = per_block * blocks_long - min(short_by, per_block - 1)  # last block partly padded
        tail = rng.uniform(0.3, 0.8)  # final window holds this fraction of a window
        length = (windows - 1) * step + int(tail * geometry.window_samples)
        seconds = length / geometry.sample_rate
        while _tiles_exactly(int(seconds * geometry.sample_rate), geometry.window_samples, step):
            length -= 1  # the windows would tile it exactly, and the final window would be full
            seconds = length / geometry.sample_rate
        audio, turns = synth_recording(int(rng.randint(2**31 - 1)), seconds, speakers, geometry.sample_rate)
        for block, prov in cut_blocks(audio, geometry, step, prefix=f"synth-s{seed}-r{r:03d}"):
            prov.update(
                {
                    "source": "synth",
                    "seed": seed,
                    "recording_seconds": round(seconds, 3),
                    "turns": len(turns),
                    "overlapped_turns": _overlaps(turns),
                }
            )
            yield CorpusRow(block, "synth", prov)
            produced += 1
            if produced == blocks:
                return
        r += 1


def synth_corpus(geometry: Geometry, blocks: int, seed: int = 0, step: int | None = None, speakers: int = 3) -> Corpus:
    """Exactly ``blocks`` blocks from deterministic recordings (:func:`iter_synth_blocks`, collected)."""
    return Corpus.collect(
        iter_synth_blocks(geometry, blocks, seed=seed, step=step, speakers=speakers), geometry_meta(geometry)
    )


def _tiles_exactly(samples: int, window: int, step: int) -> bool:
    """Whether windows of ``window`` samples every ``step`` end exactly at ``samples`` (the final window full).
    Judged on the length the recording gets (``synth_recording``: ``int(seconds x rate)``), not on the
    length asked for: ``8001 / 16000 x 16000`` is 8000.999..., a recording of 8000 samples, one full window."""
    return samples >= window and (samples - window) % step == 0


def _overlaps(turns: list[Turn]) -> int:
    ends = sorted((t.start, t.start + t.length) for t in turns)
    return sum(1 for (s0, e0), (s1, _) in zip(ends, ends[1:], strict=False) if s1 < e0)
