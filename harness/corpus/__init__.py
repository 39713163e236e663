"""The block corpus: one Parquet schema, three sources (synthetic, WAV files, engine capture)."""

from harness.corpus.cutting import cut_blocks
from harness.data.corpus_schema import Corpus, read_corpus, write_corpus

__all__ = ["Corpus", "cut_blocks", "read_corpus", "write_corpus"]
