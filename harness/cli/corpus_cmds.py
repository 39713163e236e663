"""``harness corpus ...``: build or check a block corpus, cut for the configured model's geometry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.app import ConfigOpt, ModelOpt, answer, corpus_app, resolve_config
from harness.data.limits import MAX_BLOCKS, MAX_STEP_SAMPLES

OverwriteOpt = Annotated[bool, typer.Option("--force", help="Replace an existing output file.")]
StepOpt = Annotated[
    int, typer.Option(min=0, max=MAX_STEP_SAMPLES, help="Window step in samples (0: a quarter window).")
]


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
    from harness.pipeline.commands import corpus as corpus_commands  # deferred: its imports are heavy (start-up)

    answer(corpus_commands.corpus_synth(resolve_config(config, model), out, blocks, seed, step, force))


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
    from harness.pipeline.commands import corpus as corpus_commands  # deferred: its imports are heavy (start-up)

    answer(corpus_commands.corpus_wav(resolve_config(config, model), out, wavs, step, force))


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
    from harness.pipeline.commands import corpus as corpus_commands  # deferred: its imports are heavy (start-up)

    answer(corpus_commands.corpus_capture(resolve_config(config, model), out, captured, force))


@corpus_app.command("show")
def corpus_show(
    corpus: Annotated[Path, typer.Argument(help="Corpus Parquet file.")],
    model: ModelOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Validate a corpus (every block) and print its summary."""
    from harness.pipeline.commands import corpus as corpus_commands  # deferred: its imports are heavy (start-up)

    answer(corpus_commands.corpus_show(resolve_config(config, model), corpus))
