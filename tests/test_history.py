"""A history of figures beside the ledger (``<ledger>.history/<seq:08d>.parquet``), written in
the ledger's own transaction, read back only as committed, and ``harness history`` that shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.base.errors import LedgerError
from harness.data.schemas import Score
from harness.data.schemas.history import SeriesAnswer
from harness.ledger.history_store import history_folder, margin_of, part_path, read_part, rows_of, series, write_part
from harness.ledger.ledger_history import ledger_and_history, read_history
from harness.ledger.ledger_store import commit, journal_path, load_ledger
from harness.ledger.promotion import apply_score
from harness.pipeline.promote import promote_file
from tests.cli_run import harness_cli
from tests.test_promotion import CONFIG, LOOSE, RELEASE, STRICT, world  # noqa: F401 (fixture)
from tests.test_promotion_truth import promote


@pytest.fixture(scope="module")
def scores(world):  # noqa: F811
    """Three passing scores of k=2 (three nights) and a failing one, each its own run, as files."""
    return {
        "a": world["scored"]((2,)),
        "b": world["scored"]((2,)),
        "c": world["scored"]((2,)),
        "fail": world["scored"]((2,), STRICT),
    }


LOOSE_CONFIG = CONFIG.with_overrides(tolerances=LOOSE)  # the tolerances the world's passing scores were judged with


def load(path: Path) -> Score:
    return Score.model_validate(json.loads(Path(path).read_text()))


def gated(score: Score) -> int:
    return sum(1 for s in score.shapes.values() for v in s.ops.values() for c in v.checks if c.relation != "report")


def promoted(scores, folder: Path, *names: str) -> Path:
    """A ledger in ``folder`` with the scores ``names`` promoted in order (in-process)."""
    folder.mkdir()
    ledger = folder / "ledger.json"
    for name in names:
        promote_file(scores[name], LOOSE_CONFIG, ledger, folder / "promoted-shapes.json")
    return ledger


def test_margin_is_the_share_of_the_limit_used_where_it_is_defined():
    assert margin_of(2e-5, "<=", 1e-4) == pytest.approx(0.2)
    assert margin_of(0.9995, ">=", 0.999) == pytest.approx(0.5)  # cosine: the distance to 1, against the limit's
    assert margin_of(3.0, "<=", 0.0) is None  # a zero limit: no share of it
    assert margin_of(0.5, ">=", 1.0) is None
    assert margin_of(1.0, "==", 1.0) is None
    assert margin_of(None, "<=", 1e-4) is None  # non-finite


def test_rows_are_the_scores_gated_checks(scores):
    score = load(scores["a"])
    rows = rows_of(score, 7)
    assert len(rows) == gated(score) > 0
    assert {r.seq for r in rows} == {7} and {r.run_id for r in rows} == {score.run.id}
    assert {r.packer_identity for r in rows} == {score.packer["identity"]}
    first = next(c for c in score.shapes["2"].ops["0"].checks if c.relation != "report")
    row = next(r for r in rows if r.shape == 2 and r.op == 0 and r.metric == first.metric)
    assert (row.observed, row.allowed, row.ok, row.limit) == (
        None if first.observed is None else float(first.observed),
        None if first.allowed is None else float(first.allowed),
        first.ok,
        first.limit,
    )
    assert row.margin == margin_of(row.observed, first.relation, row.allowed)


def test_each_promote_appends_one_part_and_the_series_is_ordered(scores, tmp_path):
    ledger = promoted(scores, tmp_path / "l", "a", "b")
    folder = history_folder(ledger)
    assert folder == tmp_path / "l" / "ledger.json.history"
    assert sorted(p.name for p in folder.iterdir()) == ["00000001.parquet", "00000002.parquet"]
    a, b = load(scores["a"]), load(scores["b"])
    assert read_history(ledger) == rows_of(a, 1) + rows_of(b, 2)
    assert len(read_part(part_path(folder, 2))) == gated(b)
    picked = series(read_history(ledger), shape=2, op=0, metric="max_abs")
    assert [r.seq for r in picked] == [1, 2] and [r.run_id for r in picked] == [a.run.id, b.run.id]
    assert series(read_history(ledger), shape=2, op=0, device_kind="no such device") == []
    # the folder is one table to any Parquet reader
    assert pq.read_table(folder).num_rows == gated(a) + gated(b)


def test_a_kill_after_the_part_leaves_an_orphan_that_is_ignored_then_replaced(world, scores, tmp_path):  # noqa: F811
    ledger = promoted(scores, tmp_path / "l", "a")
    manifest = tmp_path / "l" / "promoted-shapes.json"
    killed = promote(scores["fail"], ledger, manifest, world["strict"], HARNESS_FAULT="kill:promote:history-written")
    assert killed.returncode == -9
    orphan = part_path(history_folder(ledger), 2)
    assert orphan.is_file() and load_ledger(ledger).seq == 1 and not journal_path(ledger).exists()
    assert {r.run_id for r in read_part(orphan)} == {load(scores["fail"]).run.id}
    assert read_history(ledger) == rows_of(load(scores["a"]), 1)  # the orphan is not committed: not read
    promote_file(scores["b"], LOOSE_CONFIG, ledger, manifest)  # seq 2 committed again, by another score
    book, rows = ledger_and_history(ledger)
    assert book.seq == 2 and rows == rows_of(load(scores["a"]), 1) + rows_of(load(scores["b"]), 2)


def test_a_kill_after_the_journal_commits_the_part_with_the_ledger(world, scores, tmp_path):  # noqa: F811
    ledger = promoted(scores, tmp_path / "l", "a")
    manifest = tmp_path / "l" / "promoted-shapes.json"
    killed = promote(scores["b"], ledger, manifest, world["default"], HARNESS_FAULT="kill:promote:journal-written")
    assert killed.returncode == -9 and journal_path(ledger).exists() and load_ledger(ledger).seq == 1
    book, rows = ledger_and_history(ledger)  # finishes the journaled commit first
    assert book.seq == 2 and not journal_path(ledger).exists()
    assert rows == rows_of(load(scores["a"]), 1) + rows_of(load(scores["b"]), 2)


def test_a_commit_without_figures_removes_an_orphan_of_its_seq(scores, tmp_path):
    """A part of seq N must be the one commit N carried: a commit with no score drops a killed commit's part."""
    ledger = promoted(scores, tmp_path / "l", "a")
    orphan = write_part(history_folder(ledger), 2, rows_of(load(scores["fail"]), 2))
    score = load(scores["b"])
    commit(
        ledger,
        tmp_path / "l" / "promoted-shapes.json",
        RELEASE,
        lambda book: apply_score(book, score, score.run.created, RELEASE),
    )
    assert not orphan.exists() and load_ledger(ledger).seq == 2
    assert read_history(ledger) == rows_of(load(scores["a"]), 1)


def flip_data_byte(path: Path) -> None:
    """Flip the last byte of the largest column chunk: page data (a small part's middle may be a page
    header's statistics, which no reader uses), so only the page checksum can catch it."""
    meta = pq.ParquetFile(path).metadata
    col = max((meta.row_group(0).column(i) for i in range(meta.num_columns)), key=lambda c: c.total_compressed_size)
    at = (
        min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None)
        + col.total_compressed_size
        - 1
    )
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _rewrite(path: Path, change) -> None:
    """Rewrite a part's table (its metadata kept), as a hand edit with pyarrow would."""
    table = pq.read_table(path)
    pq.write_table(change(table).replace_schema_metadata(table.schema.metadata), path)


def _observed_doubled(table: pa.Table) -> pa.Table:
    i = table.schema.get_field_index("observed")
    return table.set_column(
        i, "observed", pa.array([None if v is None else 2 * v for v in table.column(i).to_pylist()], pa.float64())
    )


@pytest.mark.parametrize(
    "how, says",
    [
        ("flipped-byte", "corrupt"),
        ("truncated", "not a readable Parquet history part"),
        ("other-kind", "not a harness history part"),
        ("hand-edited", "edited after it was written"),
        ("renamed", "holds ledger commit 1, not 2"),
        ("stray-parquet", "not a history part"),
    ],
)
def test_a_broken_part_is_one_line_naming_the_file(scores, tmp_path, how, says):
    ledger = promoted(scores, tmp_path / "l", "a", "b")
    folder = history_folder(ledger)
    part = part_path(folder, 2)
    if how == "flipped-byte":
        flip_data_byte(part)
    elif how == "truncated":
        part.write_bytes(part.read_bytes()[:200])
    elif how == "other-kind":
        pq.write_table(pa.table({"x": [1]}), part)
    elif how == "hand-edited":
        _rewrite(part, _observed_doubled)
    elif how == "renamed":
        part.unlink()
        part_path(folder, 1).rename(part)
    else:
        part = folder / "extra.parquet"
        pq.write_table(pa.table({"x": [1]}), part)
    with pytest.raises(LedgerError) as exc:
        read_history(ledger)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(str(part)) and says in message, message


def test_the_negative_control_of_the_broken_parts_reads_clean(scores, tmp_path):
    """The same history untouched reads (so each refusal above is the defect's, not the setup's)."""
    ledger = promoted(scores, tmp_path / "l", "a", "b")
    _rewrite(part_path(history_folder(ledger), 2), lambda t: t)  # rewritten, rows unchanged: still its own
    assert len(read_history(ledger)) == gated(load(scores["a"])) + gated(load(scores["b"]))


def test_history_command_prints_the_series_and_its_json(scores, tmp_path, capsys, monkeypatch):
    ledger = promoted(scores, tmp_path / "l", "a", "b")
    a, b = load(scores["a"]), load(scores["b"])
    code, out, err = harness_cli(
        capsys, monkeypatch, "history", "--ledger", str(ledger), "--shape", "2", "--op", "0", "--metric", "max_abs"
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("history of shape k=2 OP 0 (ledger commit 2): 2 row(s)")
    assert [ln.split()[0] for ln in lines[1:]] == ["#1", "#2"]
    assert f"run {a.run.id} on {a.device_kind}" in lines[1] and "max_abs" in lines[1] and "margin" in lines[1]
    assert f"run {b.run.id}" in lines[2]
    code, out, err = harness_cli(capsys, monkeypatch, "history", "--ledger", str(ledger), "--shape", "2", "--json")
    assert code == 0, err
    answer = SeriesAnswer.model_validate(json.loads(out))
    assert answer.ledger_seq == 2 and answer.files.found_by == "--ledger"
    assert answer.rows == series(read_history(ledger), shape=2, op=0)
    code, out, _ = harness_cli(capsys, monkeypatch, "history", "--ledger", str(ledger), "--shape", "9")
    assert code == 0 and "no history row matches" in out


def test_rows_and_the_answer_validate_against_their_published_json_schemas(scores, tmp_path, capsys, monkeypatch):
    from tests.test_json_schemas import problems

    ledger = promoted(scores, tmp_path / "l", "a")
    for row in read_history(ledger):
        assert not problems("history-row", row.model_dump(mode="json"))
    code, out, _ = harness_cli(capsys, monkeypatch, "history", "--ledger", str(ledger), "--shape", "2", "--json")
    assert code == 0 and not problems("series-answer", json.loads(out))
    assert problems("history-row", {**read_history(ledger)[0].model_dump(mode="json"), "op": 7})  # control


def test_history_command_refuses_a_corrupt_part_in_one_line(scores, tmp_path, capsys, monkeypatch):
    ledger = promoted(scores, tmp_path / "l", "a")
    part = part_path(history_folder(ledger), 1)
    flip_data_byte(part)
    code, out, err = harness_cli(capsys, monkeypatch, "history", "--ledger", str(ledger), "--shape", "2")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("harness: error: ") and str(part) in err, err


def test_a_part_is_the_same_bytes_as_pyarrow_s_own_and_imports_no_pandas(scores, tmp_path, monkeypatch):
    """A part's table is built column by column from buffers (harness.data.arrow_build): pyarrow's
    ``Table.from_pylist`` imported pandas, ~1 s of every promotion. Same file bytes as pyarrow's
    own conversion, for a failing score too (False and None figures)."""
    import os
    import subprocess
    import sys
    import textwrap

    from harness.ledger import history_store

    rows = rows_of(load(scores["a"]), 3) + rows_of(load(scores["fail"]), 3)
    assert {r.ok for r in rows} == {True, False} and any(r.margin is None for r in rows)
    ours = history_store.write_part(tmp_path / "ours", 3, rows).read_bytes()
    monkeypatch.setattr(history_store.arrow_build, "table", lambda data, schema: pa.Table.from_pydict(data, schema))
    theirs = history_store.write_part(tmp_path / "theirs", 3, rows).read_bytes()
    assert ours == theirs, "a history part built from buffers differs from pyarrow's own conversion of its rows"
    (tmp_path / "rows.json").write_text(json.dumps([r.model_dump(mode="json") for r in rows]))
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from harness.data.schemas.history import HistoryRow
        from harness.ledger.history_store import write_part
        rows = [HistoryRow(**r) for r in json.loads(Path({str(tmp_path / "rows.json")!r}).read_text())]
        assert write_part(Path({str(tmp_path / "sub")!r}), 3, rows).read_bytes() == {ours!r}
        print("pandas" in sys.modules)
    """)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[1],
        text=True,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", "writing a history part imported pandas (~1 s); expected no import"


# ---------------------------------------------------------------------------- a part is this ledger's, or refused
# A part of another ledger (restored from another environment's backup, an rsync of the wrong folder) is well
# formed, sealed and of the right seq: only the ledger's own events at that seq (their run and score digest) tell.


def two_ledgers(scores, tmp_path, mine: str = "a", theirs: str = "b") -> tuple[Path, Path]:
    """This ledger (``mine`` promoted) and another one (``theirs``), each with its commit 1 and its part."""
    return promoted(scores, tmp_path / "mine", mine), promoted(scores, tmp_path / "theirs", theirs)


def test_a_part_of_another_ledger_is_refused_by_history_naming_the_part_and_the_commit(
    scores, tmp_path, capsys, monkeypatch
):
    ledger, other = two_ledgers(scores, tmp_path)
    args = ("history", "--ledger", str(ledger), "--shape", "2", "--op", "0")
    code, out, err = harness_cli(capsys, monkeypatch, *args)
    assert code == 0 and load(scores["a"]).run.id in out, err  # control: its own part reads
    part = part_path(history_folder(ledger), 1)
    part.write_bytes(part_path(history_folder(other), 1).read_bytes())  # cp L2.json.history/00000001.parquet ...
    code, out, err = harness_cli(capsys, monkeypatch, *args)
    assert code == 2 and out == "", err
    (line,) = err.splitlines()
    assert (
        line.startswith(
            f"harness: error: {part}: not this ledger's history part: it holds the figures of run "
            f"{load(scores['b']).run.id} for shape k=2"
        )
        and f"but commit 1 of {ledger} applied run {load(scores['a']).run.id}" in line
    ), line


def test_a_part_of_the_same_run_scored_otherwise_is_refused_by_its_score_digest(world, scores, tmp_path):  # noqa: F811
    """Another ledger promoted a score of the *same* run judged with other tolerances: its rows name this
    ledger's run, so only the score digest the part records (``harness.score_digest``) tells it apart."""
    from golden.runs import load_run
    from harness.pipeline.score import score_run, write_score

    ledger = promoted(scores, tmp_path / "mine", "a")
    a = load(scores["a"])
    rescored = write_score(tmp_path / "strict.json", score_run(world["golden"], load_run(a.run.path), STRICT))
    assert load(rescored).run.id == a.run.id and load(rescored).digest != a.digest
    other = tmp_path / "theirs"
    other.mkdir()
    promote_file(rescored, CONFIG.with_overrides(tolerances=STRICT), other / "ledger.json", other / "m.json")
    part = part_path(history_folder(ledger), 1)
    part.write_bytes(part_path(history_folder(other / "ledger.json"), 1).read_bytes())
    with pytest.raises(
        LedgerError, match=f"not this ledger's history part: it holds the figures of score {load(rescored).digest[:12]}"
    ):
        read_history(ledger)
    assert pq.read_schema(part).metadata[b"harness.score_digest"] == json.dumps(load(rescored).digest).encode()


@pytest.fixture(scope="module")
def ledger_of_a(scores, tmp_path_factory) -> Path:
    """One ledger with score "a" promoted, made once for the property test's examples."""
    return promoted(scores, tmp_path_factory.mktemp("bound") / "l", "a")


BOUND = ("run_id", "shape", "packer_identity", "device_kind", "numerics_profile", "fingerprint")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_row_bound_to_no_event_of_its_seq_is_refused_and_an_unchanged_part_is_not(scores, ledger_of_a, data):
    """The law: a part is read as this ledger's iff every row names an event of its seq (shape, model, device
    kind, profile, packer) of the same run, and the score digest it records is that event's."""
    from harness.ledger.history_store import check_bound

    ledger_path = ledger_of_a
    ledger = load_ledger(ledger_path)
    a = load(scores["a"])
    rows = rows_of(a, 1)
    check_bound(Path("p"), 1, rows, a.digest, ledger, ledger_path)  # control: its own figures
    check_bound(Path("p"), 1, rows, None, ledger, ledger_path)  # a part written before the digest was recorded
    i = data.draw(st.integers(0, len(rows) - 1))
    field = data.draw(st.sampled_from(BOUND))
    value = data.draw(st.integers(3, 99) if field == "shape" else st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True))
    if value == getattr(rows[i], field):
        return
    changed = [*rows[:i], rows[i].model_copy(update={field: value}), *rows[i + 1 :]]
    with pytest.raises(LedgerError, match="not this ledger's history part"):
        check_bound(Path("p"), 1, changed, a.digest, ledger, ledger_path)
    other_digest = data.draw(st.from_regex(r"[0-9a-f]{64}", fullmatch=True))
    if other_digest != a.digest:
        with pytest.raises(LedgerError, match="not this ledger's history part"):
            check_bound(Path("p"), 1, rows, other_digest, ledger, ledger_path)


def test_a_release_shape_gets_no_event_and_no_row(scores, tmp_path):
    """A commit writes the figures of the shapes it records an event for: with k=2 a release shape, the score's
    k=2 is judged but gets no event, so no row, and the history still reads as this ledger's."""
    score = load(scores["a"])
    assert rows_of(score, 1, skip={2}) == [] and rows_of(score, 1, skip={4}) == rows_of(score, 1)
    folder = tmp_path / "l"
    folder.mkdir()
    release_2 = CONFIG.with_overrides(tolerances=LOOSE, release_shapes={op: (1, 2) for op in CONFIG.release_shapes})
    promote_file(scores["a"], release_2, folder / "ledger.json", folder / "m.json")
    book, rows = ledger_and_history(folder / "ledger.json")
    assert book.seq == 1 and book.entries == {} and rows == []
    assert read_part(part_path(history_folder(folder / "ledger.json"), 1)) == []


def test_figures_of_another_score_are_never_written_as_a_commit_s_part(scores, tmp_path):
    """The writer holds itself to the reader's rule: a commit handed another score's figures is a bug (exit 3)
    and writes nothing, neither the part nor the ledger."""
    from harness.ledger.history_store import Figures

    ledger = promoted(scores, tmp_path / "l", "a")
    b = load(scores["b"])
    wrong = load(scores["c"])
    with pytest.raises(RuntimeError, match="not this ledger's history part"):
        commit(
            ledger,
            tmp_path / "l" / "promoted-shapes.json",
            RELEASE,
            lambda book: apply_score(book, b, b.run.created, RELEASE),
            history=lambda seq: Figures(rows_of(wrong, seq), wrong.digest),
        )
    assert load_ledger(ledger).seq == 1 and not part_path(history_folder(ledger), 2).exists()


def test_the_nightly_checks_the_history_before_any_work(scores, tmp_path, world):  # noqa: F811
    """A nightly's margins read the history after its commit and may decide its exit status: a part of another
    ledger is refused before any work (check_outputs), a genuine history passes (negative control)."""
    from harness.pipeline.nightly_job import check_outputs

    ledger, other = two_ledgers(scores, tmp_path)
    golden = world["golden"].path
    assert (
        check_outputs(CONFIG, golden, tmp_path / "n", ledger, tmp_path / "mine" / "promoted-shapes.json")[0] == ledger
    )
    part = part_path(history_folder(ledger), 1)
    part.write_bytes(part_path(history_folder(other), 1).read_bytes())
    with pytest.raises(LedgerError, match=f"{part}: not this ledger's history part"):
        check_outputs(CONFIG, golden, tmp_path / "n", ledger, tmp_path / "mine" / "promoted-shapes.json")
    check_outputs(CONFIG, golden, tmp_path / "n", ledger, promotes=False)  # --no-promote, a shard: not read
    assert not (tmp_path / "n").exists()
