"""The block corpus: one Parquet schema, three sources (synthetic, WAV files, engine capture)."""

from harness.corpus.cutting import cut_blocks
from harness.data.corpus_reader import read_corpus
from harness.data.corpus_schema import Corpus, write_corpus

__all__ = ["Corpus", "cut_blocks", "read_corpus", "write_corpus"]
