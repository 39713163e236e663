"""Where a command may write (harness.base.destinations): one rule for every output location of every command.

Every check that can refuse is shown to refuse (a golden, inside one, a run, a link into a golden, an input)
and to accept the honest location beside it (the negative controls: inside an input folder that is no golden
or run is one); a check creates
nothing. The commands themselves are in the failure catalogue (tests/catalogue_locations.py: every command
that writes, through the command line, the workspace unchanged).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.base.destinations import check_output_dir, check_output_file, sealed_directory
from harness.base.errors import OutputError


@pytest.fixture
def tree(tmp_path) -> Path:
    """goldens/r (a golden: its manifest's kind), runs/x (a run), a corpus file and an empty folder."""
    for folder, kind in (("goldens/r", "harness.golden"), ("runs/x", "harness.run")):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "manifest.json").write_text(json.dumps({"kind": kind}))
    (tmp_path / "c.parquet").write_text("corpus")
    (tmp_path / "in").mkdir()
    return tmp_path


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    "where, says",
    [
        ("goldens/r", "it is a golden directory, sealed by its manifest"),
        ("goldens/r/n", "inside goldens/r (a golden directory is sealed"),
        ("goldens/r/n/deeper", "inside goldens/r (a golden directory is sealed"),
        ("runs/x", "it is a run directory, sealed by its manifest"),
        ("runs/x/k2", "inside runs/x (a run directory is sealed"),
        ("link", "it is a golden directory"),  # a link to a golden is the golden
        ("link/n", "inside link (a golden directory is sealed"),
        ("in", "over --golden in, an input of this command"),
    ],
)
def test_an_output_folder_inside_a_golden_a_run_or_an_input_is_refused(tree, monkeypatch, where, says):
    monkeypatch.chdir(tree)
    (tree / "link").symlink_to(tree / "goldens" / "r")
    before = listing(tree)
    with pytest.raises(OutputError) as exc:
        check_output_dir(Path(where), "nightly output folder", [("--golden", Path("in"))])
    assert str(exc.value).startswith(f"{where}: cannot write the nightly output folder ") and says in str(exc.value)
    assert "\n" not in str(exc.value) and listing(tree) == before


@pytest.mark.parametrize("where", ["n", "goldens/n", "goldens", "runs", "n/deep/er", ".", "in/sub"])
def test_an_honest_output_folder_is_accepted_and_nothing_is_created(tree, monkeypatch, where):
    """Negative control: beside a golden, the folder of goldens, a new folder, the working folder, inside an
    input folder that is no golden or run (a shard folder may hold more)."""
    monkeypatch.chdir(tree)
    before = listing(tree)
    assert check_output_dir(
        Path(where), "nightly output folder", [("--golden", Path("goldens/r")), ("shard folder", Path("in"))]
    ) == Path(where)
    assert listing(tree) == before


@pytest.mark.parametrize(
    "where, says",
    [
        ("goldens/r/s.json", "inside goldens/r (a golden directory is sealed"),
        ("runs/x/s.json", "inside runs/x (a run directory is sealed"),
        ("c.parquet", "over --corpus c.parquet, an input of this command"),
        ("goldens/r/manifest.json", "inside goldens/r"),
    ],
)
def test_an_output_file_inside_a_golden_a_run_or_over_an_input_is_refused(tree, monkeypatch, where, says):
    monkeypatch.chdir(tree)
    before = listing(tree)
    with pytest.raises(OutputError) as exc:
        check_output_file(
            Path(where), "score file", inputs=[("--corpus", Path("c.parquet")), ("--golden", "in"), ("--run", None)]
        )
    assert str(exc.value).startswith(f"{where}: cannot write the score file ") and says in str(exc.value)
    assert listing(tree) == before


def test_an_output_file_over_an_input_is_refused_through_a_hard_link_too(tree, monkeypatch):
    monkeypatch.chdir(tree)
    (tree / "c2.parquet").hardlink_to(tree / "c.parquet")
    with pytest.raises(OutputError, match="over --corpus c.parquet"):
        check_output_file(Path("c2.parquet"), "corpus", inputs=[("--corpus", Path("c.parquet"))])


@pytest.mark.parametrize("where", ["s.json", "goldens/s.json", "runs/s.json", "new/s.json", "c2.parquet", "in/s.json"])
def test_an_honest_output_file_is_accepted(tree, monkeypatch, where):
    """Negative control: beside the golden and the run, in a new folder, beside the input, in an input folder."""
    monkeypatch.chdir(tree)
    before = listing(tree)
    assert check_output_file(
        Path(where), "score file", inputs=[("--corpus", Path("c.parquet")), ("shard folder", Path("in"))]
    ) == Path(where)
    assert listing(tree) == before


def test_the_writability_checks_still_come_first(tree, monkeypatch):
    """A folder where a file goes and a file where a folder goes are named as such, before the other rules."""
    monkeypatch.chdir(tree)
    with pytest.raises(OutputError, match="c.parquet: cannot write the golden folder: c.parquet is a file"):
        check_output_dir(Path("c.parquet"), "golden folder", [("--corpus", Path("c.parquet"))])
    with pytest.raises(OutputError, match="it is a directory"):
        check_output_file(Path("goldens"), "score file")
    with pytest.raises(OutputError, match="the file exists"):
        check_output_file(Path("c.parquet"), "corpus", overwrite=False, inputs=[("--corpus", Path("c.parquet"))])


def test_sealed_directory_finds_the_golden_a_path_is_in(tree):
    assert sealed_directory(tree / "goldens" / "r" / "x") == tree / "goldens" / "r"
    assert sealed_directory(tree / "goldens" / "r") is None  # its parents only ...
    assert sealed_directory(tree / "goldens" / "r", itself=True) == tree / "goldens" / "r"  # ... or itself too
    assert sealed_directory(tree / "goldens" / "x") is None
