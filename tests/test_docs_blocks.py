"""Every ```bash block of every docs/*.md page runs as written (twice, in the same fresh folder), or
says in the page why it cannot run here: a documented command that fails is found by this test first,
not by a reader."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.doc_blocks import (
    COMMAND,
    ROOT,
    Block,
    allowed_exits,
    fresh_folder,
    harness_env,
    page_blocks,
    parse_blocks,
    run_block,
)

PAGES = sorted((ROOT / "docs").glob("*.md"))
BLOCKS = [block for page in PAGES for block in page_blocks(page)]
BASH = [block for block in BLOCKS if block.lang == "bash"]
RUN = [block for block in BASH if block.not_run is None]


def block_id(block: Block) -> str:
    return block.where


def test_every_bash_block_is_run_or_says_why_not():
    assert PAGES and RUN, "no docs page or no runnable ```bash block found: the parser reads nothing"
    unmarked_empty = [b.where for b in BASH if b.not_run is None and not b.lines]
    assert not unmarked_empty, f"{len(unmarked_empty)} ```bash block(s) hold no command: {unmarked_empty}"
    no_reason = [b.where for b in BASH if b.not_run is not None and not b.not_run.strip("#: ")]
    assert not no_reason, (
        f"{len(no_reason)} of {len(BASH)} ```bash blocks are marked not run without a reason: "
        f"{no_reason}; write '# <reason>: not run by the docs test'"
    )
    once_no_reason = [b.where for b in BASH if b.runs_once is not None and not b.runs_once.strip()]
    assert not once_no_reason, f"blocks marked '# runs once:' without saying why: {once_no_reason}"
    # the blocks the issue names are run, not marked away
    run_pages = {b.page for b in RUN}
    assert {"docs/models.md", "docs/audit.md", "docs/packer-protocol.md"} <= run_pages, sorted(run_pages)


def test_no_command_hides_in_an_untagged_block():
    """A command block without ```bash would escape this test: untagged fences are outputs only."""
    hidden = [
        f"{b.where}: {line.strip()!r}"
        for b in BLOCKS
        if b.lang == ""
        for line in b.body.splitlines()
        if COMMAND.match(line)
    ]
    assert not hidden, (
        f"{len(hidden)} command line(s) in untagged ``` blocks: "
        + "; ".join(hidden)
        + "; tag the block ```bash (and mark it if it cannot run here)"
    )


# Blocks slow by nature (minutes on 2 loaded cores, run twice): marked `slow` (`pytest -m "not slow"` leaves
# them out), each with the tests that also run its commands. Keyed by page and the block's first line.
SLOW = {
    (
        "docs/models.md",
        "harness corpus synth leak.parquet",
    ): "corpus synth, golden record, nightly: the README flow (tests/test_readme.py); the controls: "
    "tests/test_controls.py",
    (
        "docs/audit.md",
        "python examples/capture_simulated_engine.py",
    ): "the same three captures audited: tests/test_audit.py",
    (
        "docs/packer-protocol.md",
        "harness laws ",
    ): "the example packers on the laws: tests/test_packer_protocol.py, tests/test_packing_laws.py",
}


def slow_reason(block: Block) -> str | None:
    return next(
        (why for (page, start), why in SLOW.items() if block.page == page and block.first_line.startswith(start)), None
    )


def test_every_slow_entry_names_a_block_that_runs():
    stale = [key for key in SLOW if not any(b.page == key[0] and b.first_line.startswith(key[1]) for b in RUN)]
    assert not stale, f"{len(stale)} of {len(SLOW)} SLOW entries match no runnable block: {stale}"


# `docs`: these run the pages' commands, minutes of CPU in all; tox runs them in its triton environment (numpy
# 1.x, beside the Triton tests) rather than in py311's, so the two halves of `tox p` take about as long.
@pytest.mark.docs
@pytest.mark.parametrize(
    "block", [pytest.param(b, marks=[pytest.mark.slow] if slow_reason(b) else []) for b in BASH], ids=block_id
)
def test_the_block_runs_as_written_and_reruns(block, tmp_path):
    if block.not_run is not None:
        pytest.skip(f"marked in the page: {block.not_run}")
    run_block(block, fresh_folder(tmp_path), harness_env())


# --- the runner itself: each rule fails on the defect it is for ---------------------------------------

PAGE = """\
# A page

```bash
echo one > one.txt
mkdir made                                     # not rerunnable: mkdir refuses an existing folder
```

```bash
# needs a GPU: not run by the docs test
nvidia-smi
```

1. In a list item:

   ```bash
   # runs once: the folder must not exist
   mkdir once
   false            # exit 1: a verdict failed
   ls missing-file
   ```

```bash
harness nightly --golden G \\
    --out nightly   # exit 0: all promoted, 1: a shape failed
```

```
harness: error: an output, not a command
```
"""


def test_the_parser_reads_markers_exits_and_continuations():
    blocks = parse_blocks(PAGE, "docs/page.md")
    assert [b.lang for b in blocks] == ["bash", "bash", "bash", "bash", ""]
    plain, gpu, once, joined, output = blocks
    assert plain.lineno == 3 and plain.first_line == "echo one > one.txt" and plain.not_run is None
    assert gpu.not_run == "needs a GPU" and once.runs_once == "the folder must not exist"
    assert [line.allowed for line in once.lines] == [(0,), (1,), (0,)]
    assert joined.lines[0].text.startswith("harness nightly --golden G ") and joined.lines[0].allowed == (0, 1)
    assert allowed_exits('harness laws --packer-cmd "python x.py"    # a rebase bug: exit 1, minimal') == (1,)
    assert allowed_exits("echo '# exit 1'") == (0,)  # a quoted '#' is no comment
    assert not COMMAND.match(output.body)


def test_a_failing_line_is_named_with_its_stderr(tmp_path):
    once = parse_blocks(PAGE, "docs/page.md")[2]
    with pytest.raises(AssertionError) as failed:
        run_block(once, tmp_path, harness_env())
    message = str(failed.value)
    assert "docs/page.md:15" in message and "'# runs once: the folder must not exist'" in message
    assert "command line 3 of 3" in message and "line: ls missing-file" in message
    assert "observed 2, allowed 0" in message and "missing-file" in message.split("stderr:", 1)[1]


def test_a_block_that_cannot_rerun_fails_on_the_rerun(tmp_path):
    plain = parse_blocks(PAGE, "docs/page.md")[0]
    with pytest.raises(AssertionError, match=r"(?s)run 2 of 2 \(the rerun, in the same folder\).*line: mkdir made"):
        run_block(plain, tmp_path, harness_env())


def test_a_block_that_writes_nothing_runs_once_and_one_that_writes_runs_twice(tmp_path):
    reads = parse_blocks("```bash\nls -a\n```\n", "docs/p.md")[0]
    transcript = run_block(reads, tmp_path, harness_env())
    assert transcript[-1] == "docs/p.md:1: run 1 left the folder as it found it: no rerun"
    writes = parse_blocks("```bash\necho x >> log.txt\n```\n", "docs/p.md")[0]
    transcript = run_block(writes, tmp_path, harness_env())
    assert "no rerun" not in transcript[-1] and (tmp_path / "log.txt").read_text() == "x\nx\n"  # ran twice


def test_an_unexpected_success_of_a_failing_line_fails(tmp_path):
    page = "```bash\ntrue   # exit 1: this should have failed\n```\n"
    with pytest.raises(AssertionError, match="observed 0, allowed 1"):
        run_block(parse_blocks(page, "docs/p.md")[0], tmp_path, harness_env())


def test_the_fresh_folder_holds_the_checkout_files_the_blocks_use(tmp_path):
    folder = fresh_folder(tmp_path)
    assert (folder / "examples" / "capture_simulated_engine.py").is_file()
    assert (folder / "harness.toml.example").read_text() == (ROOT / "harness.toml.example").read_text()
    assert not list(Path(folder).rglob("__pycache__"))


# --- models.md carries the contract itself; no page points at a file a clone lacks ---------------------

LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")


def test_models_md_carries_the_request_contract():
    from harness.data import ops

    text = (ROOT / "docs" / "models.md").read_text()
    contract = text.split("## The request contract", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| (\w+) \|", contract, re.MULTILINE)}
    names = {
        ops.SPAN: "FP32",
        ops.OFFSETS: "INT64",
        ops.VALID: "INT32",
        ops.OP: "INT32",
        ops.WEIGHTS: "FP32",
        ops.IDX: "INT32",
        ops.SEGMENTATION_OUTPUT: "FP32",
        ops.EMBEDDING_OUTPUT: "FP32",
    }
    assert rows == names, f"the contract's tables: observed {rows}, expected {names}"
    assert "**VALID and padding.**" in contract and "**Packing**" in contract


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves_in_the_checkout(page):
    text = page.read_text()
    missing = [
        m.group("target")
        for m in LINK.finditer(text)
        if "://" not in m.group("target") and not (page.parent / m.group("target")).exists()
    ]
    assert "DESIGN.md" not in text, f"{page.name} refers to DESIGN.md, which a clone does not have"
    assert not missing, f"{page.name}: {len(missing)} relative link(s) to nothing in the checkout: {missing}"
