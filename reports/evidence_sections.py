"""Every kind of evidence's section of the sign-off report, asked of the registered kinds in their order.

The harness's own kinds have sections of their own (tables, plots: :mod:`reports.repeat_section`,
:mod:`reports.arrangement_section`, :mod:`reports.load_section`); any other registered kind renders through
the generic section (its :class:`harness.evidence.kind.ReportSection`: a title, a table, lines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from harness.data.schemas.results import Score
from harness.evidence.kind_registry import kinds
from reports.arrangement_section import ArrangementFacts, arrangement_facts, arrangement_images
from reports.load_section import LoadFacts, load_facts, load_images
from reports.repeat_section import RepeatFacts, repeat_facts


@dataclass(frozen=True)
class Section:
    """A section rendered by the generic template: a title, a table and lines (report.json's
    ``evidence_sections``, each as ``harness.data.schemas.report.EvidenceSection`` declares it)."""

    kind: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    lines: list[str]


@dataclass
class EvidenceFacts:
    """What the kinds add to the report: each section (None: absent, as it is while no kind has one) and the
    images by name. Filled in by the kinds in their order."""

    load: LoadFacts | None = None
    repeats: RepeatFacts | None = None
    arrangements: ArrangementFacts | None = None
    evidence_sections: list[Section] | None = None
    images: dict[str, Markup] = field(default_factory=dict)


def _load(score: Score, out: EvidenceFacts) -> None:
    if score.load is not None:  # a concurrency sweep (harness.pipeline.load_sweep): its section, else none
        out.load = load_facts(score)
        out.images.update(load_images(score))


def _repeats(score: Score, out: EvidenceFacts) -> None:
    out.repeats = repeat_facts(score)  # only with --repeats N: otherwise none, the same file as before


def _arrangements(score: Score, out: EvidenceFacts) -> None:
    if (arranged := arrangement_facts(score)) is not None:  # only with --arrangements N >= 2: else as before
        out.arrangements = arranged
        out.images.update(arrangement_images(arranged))


OWN_SECTIONS: dict[str, Callable[[Score, EvidenceFacts], None]] = {
    "load": _load,
    "repeats": _repeats,
    "arrangements": _arrangements,
}


def evidence_facts(score: Score) -> EvidenceFacts:
    """Every registered kind's part of the report (``evidence_sections``: the generic sections, in order)."""
    out = EvidenceFacts()
    generic = []
    for kind in kinds():
        own = OWN_SECTIONS.get(kind.name)
        if own is not None:
            own(score, out)
        elif (section := kind.report(score)) is not None:
            generic.append(
                Section(
                    kind=kind.name,
                    title=section.title,
                    columns=list(section.columns),
                    rows=[list(r) for r in section.rows],
                    lines=list(section.lines),
                )
            )
    generic += [section for section in (_canaries(score), _could_see(score)) if section is not None]
    if generic:  # only then: a report of the harness's own kinds is the same file it was
        out.evidence_sections = generic
    return out


def _canaries(score: Score) -> Section | None:
    """The night's canaries: what was planted, what it was expected to be refused as, what refused it."""
    run = score.canaries
    if run is None:
        return None
    if not run.planted:
        return Section(kind="canaries", title="Canaries", columns=[], rows=[], lines=[f"none planted: {run.why}"])
    rows = [
        [
            c.name,
            c.planted,
            c.expected,
            "passed (not refused)" if c.shape.cause is None else c.shape.cause.kind,
            "seen" if c.seen else "NOT SEEN",
        ]
        for c in run.canaries
    ]
    share = (
        f" ({100 * run.seconds / run.network_seconds:.2g} % of the run's {run.network_seconds:.1f} s of network time)"
        if run.network_seconds
        else ""
    )
    head = (
        "every planted defect was refused with its expected cause: the gate can see on this model and backend"
        if run.seen
        else "a planted defect was NOT refused with its expected cause: the gate is blind to it; nothing was promoted"
    )
    lines = [f"k={run.k}: {head}; {run.calls} calls, {run.seconds:.2f} s on the device{share}"]
    lines += [f"{c.name}: {c.shape.cause.line(run.k or 0)}" for c in run.canaries if c.shape.cause is not None]
    return Section(
        kind="canaries",
        title="Canaries: defects planted tonight, each to be refused",
        columns=["canary", "planted", "expected cause", "refused as", "gate"],
        rows=rows,
        lines=lines,
    )


def _could_see(score: Score) -> Section | None:
    """What the night could see: per shape and OP, the smallest effects its evidence refuses."""
    rows, lines = [], []
    for k, shape in sorted(score.shapes.items(), key=lambda kv: int(kv[0])):
        for op, found in sorted((shape.sensitivity or {}).items()):
            rate = "-" if found.rate_refused is None else f"{100 * found.rate_refused:.2g} %"
            floor = (
                "-"
                if found.neighbour_floor is None
                else "any bit"
                if found.neighbour_floor == 0
                else f"{found.neighbour_floor:.3g}"
            )
            rows.append([f"k={k}", f"OP {op}", f"{found.units:,} {found.unit}", rate, found.element, floor])
            lines.append(found.line)
    if not rows:
        return None
    return Section(
        kind="sensitivity",
        title="What this night could see",
        columns=["shape", "OP", "judged", "rate refused (95 % power)", "one unit refused at", "leak refused at"],
        rows=rows,
        lines=lines,
    )
