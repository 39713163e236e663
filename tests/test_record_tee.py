"""`golden record` copies the corpus into the golden while the lanes run (a tee, not a copy first).

The golden must be the one the serial copy made, byte for byte: its corpus is what writing the corpus alone
writes, and the lanes get every block exactly as reading the copy back gives it (so the outputs are the copy-
first recording's; checked once against the tree before this change with both a file and a synthetic source:
every file the same but the calls' wall_s and the manifest's times). A refused block or a failing call must
leave no golden and no temporary folder; the copy must really be made during the lanes (it is not in place
when the first call runs). Small model, 2 or 3 blocks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

from golden.store import CORPUS
from harness.base.errors import BackendError, CorpusError
from harness.data.corpus_reader import CorpusReader
from harness.data.corpus_schema import CorpusWriter, write_corpus
from harness.data.numeric_settings import NumericSettings
from harness.pipeline.record import copied, record_golden
from lanes.backends.backend import InProcessBackend


class Watching(InProcessBackend):
    """The in-process backend (pipelined): each model call records its request and whether the golden's
    corpus copy was in place (any ``<root>/*/corpus.parquet``) when it ran; ``fail_at``: the call that raises."""

    def __init__(self, model, root: Path, fail_at: int | None = None) -> None:
        super().__init__(model, NumericSettings())
        self.root, self.fail_at = root, fail_at
        self.calls: list[str] = []
        self.copy_in_place: list[bool] = []

    def _execute(self, request, where):
        self.calls.append(where)
        self.copy_in_place.append(any(self.root.glob(f"*/{CORPUS}")) or any(self.root.glob(f".*/{CORPUS}")))
        if self.fail_at is not None and len(self.calls) == self.fail_at + 1:
            raise BackendError(f"{where}: model raised ValueError: boom")
        return super()._execute(request, where)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _left(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_the_corpus_is_copied_while_the_lanes_run_and_the_golden_is_the_serial_copys(
    tmp_path, small_model, small_corpus, small_config
):
    part = small_corpus.subset([0, 1])
    serial_copy = tmp_path / "corpus.parquet"
    write_corpus(serial_copy, part.rows(), small_model.geometry)  # what the copy-first recording wrote
    backend = Watching(small_model, tmp_path / "goldens")
    golden, _ = record_golden(tmp_path / "goldens", "rel", part.rows(), backend, small_config)
    assert backend.copy_in_place[0] is False, "the corpus copy was complete before the first call"
    assert len(backend.calls) >= 2 * 3 * 2  # 2 blocks, 3 OPs, two passes (+ the module floors' sample)
    assert _sha(golden.path / CORPUS) == _sha(serial_copy)
    assert set(golden.manifest.module_floors.ops) == {"0", "1", "2"}  # sampled after the lanes, every OP
    assert not [t.name for t in threading.enumerate() if t.name in ("corpus-writer", "lanes-reader")]


def test_the_lanes_get_each_block_as_reading_the_copy_back_gives_it(tmp_path, small_model, small_corpus):
    """What makes the outputs the copy-first recording's: the same arrays, dtypes included, in the same order."""
    g = small_model.geometry
    part = small_corpus.subset([0, 1, 2])
    serial_copy = tmp_path / "corpus.parquet"
    write_corpus(serial_copy, part.rows(), g)
    with CorpusWriter(tmp_path / "tee.parquet", g) as writer:
        teed = list(copied(part.rows(), writer, g))
        writer.close()
    read_back = list(CorpusReader(serial_copy, g))
    assert [b.id for b in teed] == [b.id for b in read_back]
    for a, b in zip(teed, read_back, strict=True):
        for name in ("span", "offsets", "valid"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), f"block {a.id!r} {name}: {x.dtype} vs {y.dtype}"
        assert a.op is b.op and a.weights is None and a.idx is None
    assert _sha(tmp_path / "tee.parquet") == _sha(serial_copy)


def test_a_refused_block_stops_the_recording_before_it_is_sent_leaving_nothing(
    tmp_path, small_model, small_corpus, small_config
):
    rows = list(small_corpus.subset([0, 1]).rows())
    bad, source, prov = rows[1]
    rows[1] = (dataclasses.replace(bad, valid=np.full_like(bad.valid, 10**6)), source, prov)  # VALID over a window
    backend = Watching(small_model, tmp_path / "goldens")
    with pytest.raises(CorpusError, match="VALID"):
        record_golden(tmp_path / "goldens", "rel", iter(rows), backend, small_config)
    assert not any(repr(bad.id) in where for where in backend.calls), "a refused block reached the model"
    assert _left(tmp_path / "goldens") == [], "a failed recording left a golden or its temporary folder"


def test_a_failing_call_leaves_no_golden_and_no_temporary_folder(tmp_path, small_model, small_corpus, small_config):
    backend = Watching(small_model, tmp_path / "goldens", fail_at=5)
    with pytest.raises(BackendError, match="boom"):
        record_golden(tmp_path / "goldens", "rel", small_corpus.subset([0, 1]).rows(), backend, small_config)
    assert len(backend.calls) == 6
    assert _left(tmp_path / "goldens") == []
    assert not [t.name for t in threading.enumerate() if t.name in ("corpus-writer", "lanes-reader", "device-queue")]
