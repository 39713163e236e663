"""Reports for people (the release sign-off: HTML, Markdown, JSON) and for CI (JUnit XML)."""

from reports.junit import summary_line, write_junit
from reports.signoff import build_facts, write_report

__all__ = ["build_facts", "summary_line", "write_junit", "write_report"]
