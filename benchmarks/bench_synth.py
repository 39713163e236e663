"""``corpus synth`` speed: seconds per block now and before this change, at the full and small geometry.

    python benchmarks/bench_synth.py [--blocks 12] [--repeat 5]

The implementation before this change (one ``np.sin`` per harmonic per sample) is kept below
as the baseline; both generate the same number of blocks from the same seeds, interleaved in
every repetition, and medians are reported. Also checks, in the same run, that the new
generator gives the same bytes twice (determinism) and that streaming it holds one recording
at a time.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import numpy as np

from harness.corpus.cutting import cut_blocks
from harness.corpus.synth import Voice, conversation, iter_synth_blocks, synth_corpus
from harness.data.geometry import Geometry

# --- the implementation before this change (the baseline) -----------------------------------


def make_voices_before(rng: np.random.RandomState, count: int) -> list[Voice]:
    voices = []
    pitches = rng.permutation(np.linspace(95.0, 260.0, max(count, 2)))[:count]
    for pitch in pitches:
        f1 = rng.uniform(300, 850)
        voices.append(
            Voice(
                pitch_hz=float(pitch),
                formants_hz=(float(f1), float(rng.uniform(f1 + 500, 2300)), float(rng.uniform(2400, 3400))),
                brightness=float(rng.uniform(0.9, 1.6)),
                loudness=float(rng.uniform(0.05, 0.12)),
            )
        )
    return voices


def render_turn_before(rng: np.random.RandomState, voice: Voice, length: int, sample_rate: int) -> np.ndarray:
    t = np.arange(length) / sample_rate
    vibrato = 1.0 + 0.03 * np.sin(2 * np.pi * rng.uniform(3, 6) * t + rng.uniform(0, 2 * np.pi))
    drift = 1.0 + 0.08 * np.sin(2 * np.pi * rng.uniform(0.2, 0.6) * t)
    f0 = voice.pitch_hz * vibrato * drift
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    out = np.zeros(length)
    for h in range(1, int(3800 // voice.pitch_hz) + 1):
        freq = h * voice.pitch_hz
        gain = h**-voice.brightness * sum(1.0 / (1.0 + ((freq - f) / (0.12 * f + 60)) ** 2) for f in voice.formants_hz)
        out += gain * np.sin(h * phase)
    syllable_rate = rng.uniform(3.0, 5.5)
    envelope = np.clip(np.sin(np.pi * syllable_rate * t + rng.uniform(0, np.pi)) * 1.6, 0, 1) ** 0.7
    ramp = np.minimum(1.0, np.minimum(np.arange(length), np.arange(length)[::-1]) / (0.02 * sample_rate))
    out *= envelope * ramp
    peak = np.abs(out).max() or 1.0
    return voice.loudness * out / peak


def synth_recording_before(seed: int, seconds: float, speakers: int, sample_rate: int):
    rng = np.random.RandomState(seed)
    length = int(seconds * sample_rate)
    voices = make_voices_before(rng, speakers)
    turns = conversation(rng, length, speakers, sample_rate)
    audio = 0.002 * rng.standard_normal(length)
    for turn in turns:
        audio[turn.start : turn.start + turn.length] += render_turn_before(
            rng, voices[turn.speaker], turn.length, sample_rate
        )
    return audio.astype(np.float32), turns


def synth_blocks_before(geometry: Geometry, blocks: int, seed: int = 0, speakers: int = 3) -> list:
    step = geometry.window_samples // 4
    per_block = geometry.windows_per_block
    out: list = []
    r = 0
    while len(out) < blocks:
        rng = np.random.RandomState([seed, r])
        windows = per_block * int(rng.randint(2, 4)) - int(rng.randint(1, 4))
        tail = rng.uniform(0.3, 0.8)
        length = (windows - 1) * step + int(tail * geometry.window_samples)
        audio, turns = synth_recording_before(
            int(rng.randint(2**31 - 1)), length / geometry.sample_rate, speakers, geometry.sample_rate
        )
        out.extend(block for block, _ in cut_blocks(audio, geometry, step, prefix=f"synth-s{seed}-r{r:03d}"))
        r += 1
    return out[:blocks]


# ---------------------------------------------------------------------------------------------


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def digest(blocks) -> str:
    h = hashlib.sha256()
    for b in blocks:
        h.update(b.span.tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=12, help="blocks per run at the full geometry (x4 small)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    geometries = {
        "full (160,000-sample windows)": (Geometry(), args.blocks),
        "small (16,000-sample windows)": (Geometry(window_samples=16_000, frames_per_window=58), 4 * args.blocks),
    }
    synth_corpus(Geometry(), 1)  # warm up (imports, the sine table)
    print(f"medians of {args.repeat} interleaved repetitions, seeds 0..{args.repeat - 1}")
    for name, (g, n) in geometries.items():
        before, now = [], []
        for rep in range(args.repeat):
            before.append(timed(lambda g=g, n=n, rep=rep: synth_blocks_before(g, n, seed=rep)))
            now.append(timed(lambda g=g, n=n, rep=rep: synth_corpus(g, n, seed=rep)))
        b, a = float(np.median(before)) / n, float(np.median(now)) / n
        print(f"{name}: {n} blocks per run")
        print(f"  before this change  {b * 1e3:8.2f} ms/block")
        print(f"  now                 {a * 1e3:8.2f} ms/block   {b / a:5.1f}x faster")
        same = digest(synth_corpus(g, n, seed=7).blocks) == digest(b for b, _, _ in iter_synth_blocks(g, n, seed=7))
        print(f"  same bytes from synth_corpus and iter_synth_blocks (seed 7): {same}")


if __name__ == "__main__":
    main()
