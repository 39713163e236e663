"""``harness corpus``: ``synth``, ``wav``, ``capture`` and ``show`` (:mod:`harness.cli.corpus_cmds`), one function
each, answering with an :class:`~harness.pipeline.answer.Answer`. A command that writes checks where before any
work.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.base.destinations import check_output_file
from harness.pipeline.answer import Answer

if TYPE_CHECKING:
    from harness.data.corpus_schema import CorpusRow
    from harness.data.geometry import Geometry
    from harness.data.schemas.config_file import ConfigFile


def _write_corpus(
    cfg: ConfigFile,
    out: Path,
    force: bool,
    inputs: Sequence[tuple[str, Path | None]],
    rows: Callable[[Geometry], Iterable[CorpusRow]],
) -> Answer:
    """The corpus cut for the configuration's model, written to ``out`` (checked first: ``inputs`` are
    never overwritten)."""
    from harness.data.corpus_schema import write_corpus  # deferred: imports numpy, pyarrow (start-up)
    from harness.pipeline.backends import model_geometry  # deferred: imports numpy, pyarrow, pydantic (start-up)

    geometry = model_geometry(cfg)
    check_output_file(out, "corpus", overwrite=force, inputs=[*inputs, ("--config", cfg.source)])
    summary = write_corpus(out, rows(geometry), geometry)
    return Answer.of([f"wrote {out}: {json.dumps(summary.model_dump())}"])


def corpus_synth(cfg: ConfigFile, out: Path, blocks: int, seed: int, step: int, force: bool) -> Answer:
    """Deterministic multi-speaker audio (``step`` 0: a quarter window)."""
    from harness.corpus.synth import iter_synth_blocks  # deferred: imports numpy, pyarrow (start-up)

    return _write_corpus(cfg, out, force, [], lambda g: iter_synth_blocks(g, blocks, seed=seed, step=step or None))


def corpus_wav(cfg: ConfigFile, out: Path, wavs: Sequence[Path], step: int, force: bool) -> Answer:
    """WAV files cut into blocks; the last block padded with VALID = 0 windows."""
    from harness.corpus.wav import iter_wav_blocks  # deferred: imports numpy, pyarrow (start-up)

    inputs = [("WAV", w) for w in wavs]
    return _write_corpus(cfg, out, force, inputs, lambda g: iter_wav_blocks(list(wavs), g, step=step or None))


def corpus_capture(cfg: ConfigFile, out: Path, captured: Path, force: bool) -> Answer:
    """Blocks captured from the engine, validated whole (refused at the first bad block)."""
    from harness.data.corpus_reader import CorpusReader  # deferred: imports numpy, pyarrow (start-up)

    rows = lambda g: CorpusReader(captured, g, require_meta=False).rows()  # noqa: E731
    return _write_corpus(cfg, out, force, [("CAPTURED", captured)], rows)


def corpus_show(cfg: ConfigFile, corpus: Path) -> Answer:
    """Every block of a corpus validated for the configuration's model; its summary."""
    from harness.data.corpus_reader import CorpusReader  # deferred: imports numpy, pyarrow (start-up)
    from harness.pipeline.backends import model_geometry  # deferred: imports numpy, pyarrow, pydantic (start-up)

    return Answer.of([json.dumps(CorpusReader(corpus, model_geometry(cfg)).validate().model_dump())])
