"""JUnit XML of ``harness laws --junit PATH``: one test case per packing law, for the engine's CI.

A CI shows JUnit failures by name, so a red build says which law broke and how without opening a log:

- classname ``packing_laws``, name the law: fails (type ``broken``) with the law's line as its message (on how
  many of how many examples it broke, its minimal counterexample in one line) and its finding's section as its
  text (the minimal block set, the request the packer produced, what differed; laws of one finding carry the
  same section); fails (type ``not-judged``) when the law was not judged on every example, which never counts
  as held; passes with the law's line as its output;
- suite properties: the packer, its identity (the key the ledger files its promotions under), the examples,
  seed and largest list judged, the verdict and the summary line.

Rendered from the document ``--json`` writes (:class:`harness.data.schemas.laws_file.LawsReportFile`), so the
two files and the text say the same.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.data.schemas.laws_file import LawsReportFile
from reports.junit import new_suite, suite_bytes

SUITE = "harness.laws"
CLASSNAME = "packing_laws"


def laws_junit(doc: LawsReportFile) -> bytes:
    """The JUnit file's bytes: one suite, one case per law."""
    suite = new_suite(
        SUITE,
        {
            "packer": doc.packer.name,
            "packer_identity": doc.packer.identity or "",
            "examples": doc.examples,
            "seed": doc.seed,
            "max_blocks": doc.max_blocks,
            "harness_version": doc.harness_version,
            "verdict": doc.verdict,
            "summary": doc.summary,
        },
        doc.created,
    )
    failures = 0
    for law in doc.laws:
        case = ET.SubElement(suite, "testcase", classname=CLASSNAME, name=law.law, time=f"{law.seconds:.6f}")
        props = ET.SubElement(case, "properties")
        for key, value in (
            ("status", law.status),
            ("tried", law.tried),
            ("broken_on", law.broken_on),
            ("boundary", law.boundary),
        ):
            ET.SubElement(props, "property", name=key, value=str(value))
        if law.status == "held":
            ET.SubElement(case, "system-out").text = law.line
            continue
        failures += 1
        kind = "broken" if law.status == "broken" else "not-judged"
        failure = ET.SubElement(case, "failure", message=law.line, type=kind)
        if law.finding is not None:
            failure.text = "\n".join(doc.findings[law.finding].text)
        else:
            failure.text = f"{law.line}\n{law.statement}"
    return suite_bytes(suite, len(doc.laws), failures, 0, doc.seconds)
