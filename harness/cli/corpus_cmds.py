"""``harness corpus ...``: build or check a block corpus, cut for the configured model's geometry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import ConfigOpt, ModelOpt, corpus_app, resolve_config, say
from harness.data.destinations import check_output_file
from harness.data.limits import MAX_BLOCKS, MAX_STEP_SAMPLES

OverwriteOpt = Annotated[bool, typer.Option("--force", help="Replace an existing output file.")]
StepOpt = Annotated[
    int, typer.Option(min=0, max=MAX_STEP_SAMPLES, help="Window step in samples (0: a quarter window).")
]


def _geometry(config, model):
    from harness.pipeline.backends import model_geometry  # deferred: imports numpy, pyarrow, pydantic (start-up)

    return model_geometry(resolve_config(config, model))


@corpus_app.command("synth")
def corpus_synth(
    out: Annotated[Path, typer.Argument(help="Parquet file to write.")],
    blocks: Annotated[int, typer.Option(min=1, max=MAX_BLOCKS, help="Number of blocks.")] = 16,
    seed: Annotated[int, typer.Option("--corpus-seed", min=0, max=2**32 - 1, help="Seed of the synthetic audio.")] = 0,
    step: StepOpt = 0,
    force: OverwriteOpt = False,
    model: ModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Deterministic multi-speaker audio (turns, overlaps, silences, short final windows), no downloads.

    The corpus is cut for the model's geometry: the config's [model] spec (default 'full'), or --model.
    """
    from harness.corpus.synth import iter_synth_blocks  # deferred: imports numpy, pyarrow (start-up)
    from harness.data.corpus_schema import write_corpus  # deferred: imports numpy, pyarrow (start-up)

    geometry = _geometry(config, model)
    check_output_file(out, "corpus", overwrite=force, inputs=[("--config", config)])
    summary = write_corpus(out, iter_synth_blocks(geometry, blocks, seed=seed, step=step or None), geometry)
    say(f"wrote {out}: {json.dumps(summary)}")


@corpus_app.command("wav")
def corpus_wav(
    out: Annotated[Path, typer.Argument(help="Parquet file to write.")],
    wavs: Annotated[list[Path], typer.Argument(help="16 kHz WAV files (PCM 16/24/32 or float; stereo is averaged).")],
    step: StepOpt = 0,
    force: OverwriteOpt = False,
    model: ModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Cut WAV files into blocks of 8 windows; the last block is padded with VALID = 0 windows."""
    from harness.corpus.wav import iter_wav_blocks  # deferred: imports numpy, pyarrow (start-up)
    from harness.data.corpus_schema import write_corpus  # deferred: imports numpy, pyarrow (start-up)

    geometry = _geometry(config, model)
    check_output_file(out, "corpus", overwrite=force, inputs=[*(("WAV", w) for w in wavs), ("--config", config)])
    summary = write_corpus(out, iter_wav_blocks(list(wavs), geometry, step=step or None), geometry)
    say(f"wrote {out}: {json.dumps(summary)}")


@corpus_app.command("capture")
def corpus_capture(
    out: Annotated[Path, typer.Argument(help="Parquet file to write (normalised, validated).")],
    captured: Annotated[
        Path, typer.Argument(help="Blocks recorded by the engine in the corpus schema (docs/corpus.md).")
    ],
    force: OverwriteOpt = False,
    model: ModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Import blocks captured from the engine: validated whole (refused at the first bad block)."""
    from harness.data.corpus_reader import CorpusReader  # deferred: imports numpy, pyarrow (start-up)
    from harness.data.corpus_schema import write_corpus  # deferred: imports numpy, pyarrow (start-up)

    geometry = _geometry(config, model)
    check_output_file(out, "corpus", overwrite=force, inputs=[("CAPTURED", captured), ("--config", config)])
    summary = write_corpus(out, CorpusReader(captured, geometry, require_meta=False).rows(), geometry)
    say(f"wrote {out}: {json.dumps(summary)}")


@corpus_app.command("show")
def corpus_show(
    corpus: Annotated[Path, typer.Argument(help="Corpus Parquet file.")],
    model: ModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Validate a corpus (every block) and print its summary."""
    from harness.data.corpus_reader import CorpusReader  # deferred: imports numpy, pyarrow (start-up)

    say(json.dumps(CorpusReader(corpus, _geometry(config, model)).validate()))
