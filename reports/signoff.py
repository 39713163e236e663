"""The release sign-off report: one page that says which packed shapes the engine may use, and why.

``write_report`` turns a score (``harness score`` / ``nightly``), optionally the promotion ledger,
the transitions of the last promotion, a localisation result and a separate golden verification,
into three files that hold the same facts:

- ``report.json``: the facts (``build_facts``), for tools and for diffing two sign-offs;
- ``report.md``: the same tables in Markdown, for a pull request or a wiki;
- ``report.html``: one self-contained page (inline CSS, plots as inline SVG, no script, no URL
  of any kind) that can be mailed, attached to a CI job or archived.

Nothing is judged here: every check row (metric, observed, allowed, ok, how many, where) is the
gate's, rendered as it is. The one decision shown, "may the engine use this shape now?", is the
ledger's: a shape is usable when the ledger says promoted (or, without a ledger, when this run
passed it), this run did not fail it, and the golden was reproduced (a golden that no longer
reproduces puts every promotion's evidence in doubt, and the report says so first).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup
from pydantic import BaseModel

from harness.base.fsio import atomic_write_many
from harness.base.jsonio import plain, plain_dict
from harness.data.schemas.records import Ledger
from harness.data.schemas.results import STALL_FACTOR, Reproduction, Score
from harness.ledger.promotion import Transition, judging_overrides, ledger_states, overrides_line
from reports.engine import EngineManifest, engine_line
from reports.evidence_sections import evidence_facts
from reports.host_line import throughput_rows, timing_line
from reports.margin_section import margin_facts, margin_images
from reports.module_error_section import module_error_facts, module_error_images
from reports.numbers import cosine, fmt, fmt_check, packing_alone, summary_cosine
from reports.plots import SpeedPoint, bitwise_line, error_distribution_svg, speedup_svg
from reports.row_view import json_of
from reports.shape_facts import shape_facts
from reports.signoff_rows import golden_checks_of, ledger_rows, reproducibility_row
from reports.template_cache import bytecode_cache

FORMAT = 2
TEMPLATES = Path(__file__).parent / "templates"
OPS_SHOWN = ("0", "1", "2")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")  # "<" that Markdown could read as the start of an HTML tag
TITLE = "Release sign-off: {release}"
if TYPE_CHECKING:
    from harness.ledger.margins import MarginsView
# localisation results per shape and OP (``harness.localisation.first_divergence``; LocalisationFile.shapes):
# free-form dicts
Localisation = Mapping[str, Mapping[str, Mapping[str, Any]]]


# ---------------------------------------------------------------------------------------------
# Facts


def build_facts(
    score: Score,
    ledger: Ledger | None = None,
    transitions: Sequence[Transition] | None = None,
    localisation: Localisation | None = None,
    verification: Reproduction | None = None,
    promoted: bool = True,
    engine: EngineManifest | None = None,
) -> dict[str, Any]:  # report.json's document, plain JSON (SignoffReport declares it; its numbers kept as they are)
    """Everything the report shows, as one JSON-able dict (what report.json holds). ``engine``: the manifest
    the engine reads and what it allows here (None: not known to this report; the line still names the file).

    The documents come in as their models (read by attribute), the report's rows are built as typed rows
    (``reports.shape_facts``, ``reports.host_line``, the rows below); the facts are the report's own
    document, plain JSON (the templates and report.json read them), made plain once at the end."""
    loc = plain_dict(localisation) if localisation else {}
    golden_checks = golden_checks_of(score, verification)
    golden_ok = all(c.passed for c in golden_checks)
    states = (
        ledger_states(
            ledger,
            score.fingerprint,
            score.device_kind,
            score.numerics_profile,
            # score.packer is the packer's describe() JSON (free-form, the Packer protocol's): its identity by key
            score.packer.get("identity"),
        )
        if ledger is not None
        else {}
    )
    lanes = score.lane_timings()
    shape_keys = sorted(set(score.shapes) | {str(k) for k in states}, key=int)
    shapes = {
        k: shape_facts(
            k, score.shapes.get(k), states.get(int(k)), lanes.get(k), golden_ok, ledger is not None, loc.get(k)
        )
        for k in shape_keys
    }
    usable = [1] + [int(k) for k, s in shapes.items() if s.usable]
    not_usable = [int(k) for k, s in shapes.items() if not s.usable]
    lane_rows = throughput_rows(score)
    headline = None
    if not golden_ok:
        bad = next(c for c in golden_checks if not c.passed)
        headline = (
            f"The golden is NOT reproduced in this environment: {bad.summary}. Every shape below was judged "
            "against a golden this environment does not reproduce, so none may be used until it does."
        )
    return plain_dict(
        {
            "kind": "harness.signoff",
            "format": FORMAT,
            "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "title": TITLE.format(release=score.release),
            "release": score.release,
            "verdict": "pass" if golden_ok and all(s.verdict != "fail" for s in shapes.values()) else "fail",
            "headline": headline,
            "decision": {
                "usable": sorted(set(usable)),
                "not_usable": not_usable,
                "release_shapes_note": "k=1 is the release's own shape (the exact lane): it needs no promotion",
                "golden_ok": golden_ok,
                "ledger_given": ledger is not None,
            },
            "run_id": score.run.id,
            "score_created": score.created,
            "golden_id": score.golden.id,
            "fingerprint": score.fingerprint,
            "model": _by_name(score.model),
            "device_kind": score.device_kind,
            "numerics_profile": score.numerics_profile,
            "environment": _by_name(score.environment),
            "backend": score.backend.rows() if score.backend is not None else None,  # what ran the requests
            "numerics": score.numerics.in_force,
            "mode": score.voiceprint_inputs,
            "pad_to_fixed": score.pad_to_fixed,
            "packer": score.packer.get("name", "harness"),  # score.packer: the packer's own describe() JSON
            "laws": score.laws.model_dump(mode="json"),  # the packing-laws verdict of that packer, judged at its start
            "corpus": _by_name(score.corpus),
            "tolerances": score.tolerances.model_dump(mode="json"),
            "reproducibility": json_of(reproducibility_row(score.reproducibility)),
            "golden_checks": [json_of(c) for c in golden_checks],
            "shapes": {k: json_of(s) for k, s in shapes.items()},
            "warnings": [json_of(w) for s in shapes.values() for w in s.warnings],  # the evidence's, every shape's
            "throughput": [json_of(r) for r in lane_rows],
            "exact_lane": next((json_of(r) for r in lane_rows if r.lane == "exact"), None),
            "exact_timing_source": score.exact_timing_source,
            "host": score.host.model_dump(mode="json")
            if score.host is not None
            else None,  # harness.throughput.host_share
            "timing_line": timing_line(score),
            "transitions": [plain_dict(t.as_json()) for t in transitions] if transitions is not None else None,
            "ledger": [json_of(r) for r in ledger_rows(states)] if ledger is not None else None,
            "overrides": [o.model_dump(mode="json") for o in judging_overrides(score)],  # harness.ledger.promotion
            "overrides_line": overrides_line(score),
            "no_promote_line": None if promoted else "Not promoted (--no-promote): the ledger was not changed.",
            "engine": None
            if engine is None
            else {
                "manifest": engine.path,
                "exists": engine.exists,
                "allows": dict(engine.allows) if engine.allows is not None else None,
            },
            "engine_line": engine_line(score, engine, promoted),
        }
    )


def _by_name(model: BaseModel) -> dict[str, object]:
    """A table of named values (model, environment, corpus) in name order: the pages list them so, whatever
    order their model declares its fields in (as the files they come from, written with sorted keys, did)."""
    return dict(sorted(model.model_dump(mode="json").items()))


# ---------------------------------------------------------------------------------------------
# Images


def build_images(score: Score) -> dict[str, Markup]:
    """Inline SVG plots: "speedup" (a point per row of the throughput table) and per shape and OP
    "dist_<k>_<op>" (none for a bitwise OP; an OP's ``limits`` is the score's open dict of named figures)."""
    points = [SpeedPoint(r.k, r.speedup, r.verdict) for r in throughput_rows(score)]
    images = {"speedup": Markup(speedup_svg(points))} if any(p.speedup is not None for p in points) else {}
    for k, shape in score.shapes.items():
        for op, verdict in sorted(shape.ops.items()):
            if bitwise_line(int(op), verdict.metrics):
                continue  # every window/row identical: one line says it, an empty histogram would not
            # the OP's limits by name (OpVerdictModel.limits: each tolerance mode its own): None where none is set
            limit = verdict.limits.get("max_abs")
            images[f"dist_{k}_{op}"] = Markup(error_distribution_svg(verdict.distribution, int(op), k, limit))
    return images


# ---------------------------------------------------------------------------------------------
# Templates (numbers: reports.numbers)


@functools.cache  # one pair per process, each template compiled once (or loaded: reports.template_cache)
def template_environments() -> tuple[jinja2.Environment, jinja2.Environment]:
    loader = jinja2.FileSystemLoader(str(TEMPLATES))
    html = jinja2.Environment(
        loader=loader,
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=bytecode_cache("html"),
    )
    md = jinja2.Environment(
        loader=loader,
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=bytecode_cache("md"),
    )
    for env in (html, md):  # Jinja's registries: keyed by the names the templates use
        env.filters.update(
            {
                "fmt": fmt,
                "fmt_check": fmt_check,
                "packing_alone": packing_alone,
                "cosine": cosine,  # a measured cosine: never '1' when the rows differ
                "summary_cosine": summary_cosine,
                "ks": lambda ks: ", ".join(str(k) for k in ks) if ks else "none",
            }
        )
        # what a "stalled call" is (harness.throughput.timing counts them)
        env.globals.update({"stall_factor": f"{STALL_FACTOR:g}"})
    md.filters.update({"md": _md_cell})
    return html, md


def _section_json(section: object) -> object:
    """A section's rows as plain JSON (a list of sections: each)."""
    return [json_of(item) for item in section] if isinstance(section, list) else json_of(section)


def _md_cell(value: object) -> str:
    """Text safe in a Markdown table cell: no pipe, no newline, no raw HTML tag."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return _TAG_START.sub(r"\\<", text)


# ---------------------------------------------------------------------------------------------
# Writing


@dataclass(frozen=True)
class ReportContext:
    """What a report shows beside its score: the ledger and this night's transitions, the localisation, a
    separate verification, whether the night promoted (False: a ``--no-promote`` night, said in one line), the
    margins over the ledger's history (a "Margins" section, absent without them) and the manifest the engine
    reads (see :func:`build_facts`). Every part is optional: a report of a score alone is a report."""

    ledger: Ledger | None = None
    transitions: Sequence[Transition] | None = None
    localisation: Localisation | None = None
    verification: Reproduction | None = None
    promoted: bool = True
    margins: MarginsView | None = None
    engine: EngineManifest | None = None


def write_report(out_dir: Path, score: Score, context: ReportContext = ReportContext()) -> dict[str, Path]:
    """Write report.html, report.md and report.json under ``out_dir``; returns their paths."""
    c = context
    ledger, transitions, localisation, verification = c.ledger, c.transitions, c.localisation, c.verification
    promoted, margins, engine = c.promoted, c.margins, c.engine
    out_dir = Path(out_dir)
    facts = build_facts(score, ledger, transitions, localisation, verification, promoted, engine)
    images = build_images(score)
    if margins is not None:  # only then: a report without a history is the same file it was
        images.update(margin_images(margins))
    evidence = evidence_facts(score)  # every kind of evidence's section (reports.evidence_sections)
    images.update(evidence.images)
    errors = module_error_facts(localisation)  # localisation measured modules: else no section
    if errors is not None:
        images.update(module_error_images(errors))
    sections = {  # report.json's optional sections (SignoffReport's names), each present only where it has rows
        "margins": margin_facts(margins) if margins is not None else None,
        "load": evidence.load,
        "repeats": evidence.repeats,
        "arrangements": evidence.arrangements,
        "evidence_sections": evidence.evidence_sections,
        "module_errors": errors,
    }
    facts.update({name: plain(_section_json(section)) for name, section in sections.items() if section is not None})
    html_env, md_env = template_environments()
    page = {"f": facts, "images": images, "ops_shown": OPS_SHOWN}
    json_path, md_path, html_path = out_dir / "report.json", out_dir / "report.md", out_dir / "report.html"
    # all three or none: a report folder never holds one page of this score beside another's
    atomic_write_many(
        {
            json_path: json.dumps(facts, indent=1, sort_keys=True) + "\n",
            md_path: md_env.get_template("report.md.j2").render(**page),
            html_path: html_env.get_template("report.html.j2").render(**page),
        }
    )
    return {"json": json_path, "md": md_path, "html": html_path}
