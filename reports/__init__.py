"""Reports for people (the release sign-off: HTML, Markdown, JSON) and for CI (JUnit XML)."""

from reports.junit import evidence_warnings, summary_line, write_junit
from reports.signoff import ReportContext, build_facts, write_report

__all__ = ["ReportContext", "build_facts", "evidence_warnings", "summary_line", "write_junit", "write_report"]
