"""The README's "How it is used" block runs as written, line by line, on a CPU (BLOCKS=4).

The runner (and its rules: one line at a time, the statuses a line's comment allows) is
tests/doc_blocks.py, shared with tests/test_docs_blocks.py, which runs every docs/*.md page's blocks.
"""

from __future__ import annotations

import re

import pytest

from tests.doc_blocks import ROOT, Line, command_lines, fresh_folder, harness_env, run_lines


def usage_block() -> list[Line]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## How it is used", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "README.md: no ```bash block under 'How it is used'"
    return list(command_lines(block.group(1)))


def test_the_block_is_what_this_test_runs():
    lines = usage_block()
    assert lines[0].text.startswith("harness init")
    assert any(line.text.startswith("harness shapes") for line in lines)
    # 4 blocks cannot bound a rate: the nightly's verdict may fail, and its comment says so
    assert [line.allowed for line in lines if line.text.startswith("harness nightly ")] == [(0, 1)]


@pytest.mark.slow
def test_the_readme_flow_runs_verbatim(tmp_path):
    transcript = run_lines(
        usage_block(), fresh_folder(tmp_path), harness_env(BLOCKS="4"), title="README.md: the 'How it is used' block"
    )
    (tmp_path / "transcript.txt").write_text("\n".join(transcript))
    assert (tmp_path / "nightly" / "report" / "report.html").is_file()
    assert "promoted-shapes manifest" in "\n".join(transcript)
