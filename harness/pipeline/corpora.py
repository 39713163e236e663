"""Corpus files built by the ``corpus`` commands: streamed to disk, validated block by block."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.data.corpus_schema import CorpusReader, write_corpus
from harness.data.fsio import check_output_file
from harness.data.geometry import Geometry


def synth_to_file(out: Path, geometry: Geometry, blocks: int, seed: int, step: int, force: bool) -> dict[str, Any]:
    from harness.corpus.synth import iter_synth_blocks

    check_output_file(out, "corpus", overwrite=force)
    return write_corpus(out, iter_synth_blocks(geometry, blocks, seed=seed, step=step or None), geometry)


def wav_to_file(out: Path, geometry: Geometry, wavs: Sequence[Path], step: int, force: bool) -> dict[str, Any]:
    from harness.corpus.wav import iter_wav_blocks

    check_output_file(out, "corpus", overwrite=force)
    return write_corpus(out, iter_wav_blocks(list(wavs), geometry, step=step or None), geometry)


def capture_to_file(out: Path, geometry: Geometry, captured: Path, force: bool) -> dict[str, Any]:
    check_output_file(out, "corpus", overwrite=force)
    reader = CorpusReader(captured, geometry, require_meta=False)
    return write_corpus(out, reader.rows(), geometry)
