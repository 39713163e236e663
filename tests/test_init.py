"""``harness init`` writes the annotated configuration from the text the package ships, and never
replaces a user's file unless asked."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from harness.pipeline.commands.init import EXAMPLE, example_text
from harness.release_config import load_config
from tests.cli_run import harness_cli

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT_EXAMPLE = ROOT / "harness.toml.example"


def test_one_text_shipped_in_the_package_in_the_checkout_and_in_the_docs():
    """The package's copy (what `harness init` writes) and the checkout's are identical, loads to the
    embedded default, and is the block docs/configuration.md shows."""
    shipped = example_text()
    assert shipped == CHECKOUT_EXAMPLE.read_text(encoding="utf-8")
    assert shipped == (ROOT / "harness" / Path(*EXAMPLE)).read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", (ROOT / "docs" / "configuration.md").read_text(), re.DOTALL)
    assert block is not None and block.group(1) == shipped
    # a wheel carries it: the package data names the file
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "/".join(EXAMPLE) in package_data["harness"]


def test_init_writes_the_annotated_configuration(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = harness_cli(capsys, monkeypatch, "init")
    assert (code, err) == (0, "")
    written = tmp_path / "harness.toml"
    assert written.read_text(encoding="utf-8") == example_text()
    assert "wrote harness.toml" in out and "--config harness.toml" in out
    assert load_config(written).to_dict() == load_config(None).to_dict()
    code, _, err = harness_cli(capsys, monkeypatch, "init", "sub/release.toml")  # a path, its folder created
    assert (code, err) == (0, "") and (tmp_path / "sub" / "release.toml").read_text() == example_text()


def test_init_refuses_to_replace_a_file_unless_forced(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "harness.toml"
    mine.write_text("[release]\nname = 'mine'\n")
    code, out, err = harness_cli(capsys, monkeypatch, "init")
    assert code == 2 and out == ""
    assert err == (
        "harness: error: harness.toml: the file exists; nothing was written "
        "(harness init --force harness.toml replaces it)\n"
    )
    assert mine.read_text() == "[release]\nname = 'mine'\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["harness.toml"]  # no temporary name left
    code, _, err = harness_cli(capsys, monkeypatch, "init", "--force")
    assert (code, err) == (0, "") and mine.read_text() == example_text()


def test_init_refuses_a_folder_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "cfg").mkdir()
    code, out, err = harness_cli(capsys, monkeypatch, "init", str(tmp_path / "cfg"), "--force")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"harness: error: {tmp_path / 'cfg'}: cannot write the configuration: it is a directory")
    assert list((tmp_path / "cfg").iterdir()) == []
