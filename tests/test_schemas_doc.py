"""docs/schemas.md is generated from the schemas the harness validates with, and kept in step."""

from __future__ import annotations

from pathlib import Path

from harness.data.schemas import FILE_KINDS
from harness.data.schemas.docs import markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "schemas.md"


def test_docs_schemas_md_is_the_generated_text():
    assert DOC.read_text() == markdown(), "docs/schemas.md is stale: python -m harness.data.schemas > docs/schemas.md"


def test_every_file_kind_and_the_configuration_has_a_table():
    text = markdown()
    for title, model in FILE_KINDS.items():
        assert f"## {title}: `{model.__name__}`" in text
    assert "## configuration: `ConfigFile`" in text and "`min_active_fraction` | float > 0 <= 1" in text
    assert "| `format` | `2` | yes |" in text  # other format versions are refused, and the page says so
