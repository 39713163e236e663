"""The lane commands: ``run``, ``score``, ``promote``, ``report`` and ``laws`` (:mod:`harness.cli.lane_cmds`),
one function each, answering with an :class:`~harness.pipeline.answer.Answer`: run the fast lanes against a
golden, judge the run, move the ledger, render the sign-off pages, judge a packer on the packing laws.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from golden.locate import refuse_folder_of_goldens
from golden.store import load_golden
from harness.base.destinations import check_output_dir, check_output_file, same_file
from harness.base.errors import HarnessError, clip_list, committed
from harness.base.jsonio import read_json
from harness.base.outputset import output_set, pin
from harness.data.schemas.config_file import (
    ConfigFile,
)
from harness.evidence.kind_registry import loaded
from harness.ledger.score_check import check_self_consistent, read_score
from harness.pipeline.answer import Answer
from harness.pipeline.backends import IN_PROCESS, BackendChoice, make_backend, make_packer
from harness.pipeline.model_match import check_before_building
from harness.pipeline.run import RunOptions, plan_for, run_shapes
from harness.progress import progress_bar

if TYPE_CHECKING:
    from harness.data.schemas.results import Score
    from harness.ledger.committed import Committed


def run(cfg: ConfigFile, golden_path: Path, runs: Path, progress: bool, pad_to_fixed: bool | None = None) -> Answer:
    """``harness run``: the backend and packer are the configuration's (``[backend]``, ``[packer]``, command-line
    overrides merged in and validated with the file); ``pad_to_fixed`` overrides the plan's padding only."""
    with loaded(cfg.evidence.kinds):  # a team's kinds of evidence, for this command only
        return _run(cfg, golden_path, runs, progress, pad_to_fixed)


def _run(cfg: ConfigFile, golden_path: Path, runs: Path, progress: bool, pad_to_fixed: bool | None = None) -> Answer:
    knobs, laws_examples = cfg.packer, cfg.packer.laws_examples
    check_output_dir(runs, "runs folder", [("--golden", golden_path), ("--config", cfg.source)])
    check_golden_before_building(cfg, golden_path)
    be = make_backend(cfg, BackendChoice.of(cfg))
    gold = load_golden(golden_path, expect_fingerprint=be.fingerprint)  # before the laws, the warm-up, any block
    plan = plan_for(cfg, pad_to_fixed=pad_to_fixed)
    packing = make_packer(knobs.cmd, knobs.spec, be.geometry, knobs.digest)
    try:
        with progress_bar(
            f"run shapes {clip_list(plan.shapes)}",
            plan.calls(gold.blocks),
            progress,
            announce=f"writing to {runs}/ (a new run folder inside when done)",
        ) as tick:
            result = run_shapes(
                gold, be, plan, runs, cfg, RunOptions(packer=packing, progress=tick, laws_examples=laws_examples)
            )
    finally:
        packing.close()
    return Answer.of([f"wrote run {result.run_id} at {result.path}"])


def check_golden_before_building(cfg: ConfigFile, golden_path: Path) -> None:
    """What ``run`` and ``nightly`` can refuse before the model is built: a folder of goldens, a golden whose
    manifest or files do not hold, a golden of another reference model's geometry. The fingerprint is compared
    as soon as the model is built."""

    refuse_folder_of_goldens(golden_path)  # at once, listing the goldens inside
    check_before_building(load_golden(golden_path), cfg.model.spec, cfg.backend.url in IN_PROCESS)


def score(cfg: ConfigFile, golden_path: Path, run_path: Path, out: Path) -> Answer:
    """``harness score``: a run judged against its golden, with the configuration's kinds of evidence."""
    with loaded(cfg.evidence.kinds):  # a team's kinds of evidence, for this command only
        return _score(cfg, golden_path, run_path, out)


def _score(cfg: ConfigFile, golden_path: Path, run_path: Path, out: Path) -> Answer:
    from golden.runs import load_run  # deferred: imports pyarrow (start-up)
    from golden.store import load_golden  # deferred: imports pyarrow (start-up)
    from harness.pipeline.score import score_run, write_score  # deferred: imports pyarrow (start-up)

    check_output_file(
        out, "score file", inputs=[("--golden", golden_path), ("--run", run_path), ("--config", cfg.source)]
    )
    gold, r = load_golden(golden_path), load_run(run_path)
    result = score_run(gold, r, cfg.tolerances)
    write_score(out, result)
    return Answer.of(score_lines(result) + [f"wrote {out}"], held=result.verdict == "pass")


def score_lines(result: Score) -> list[str]:
    """The golden's reproduction first when it failed (then every verdict is in doubt), then one
    line per shape."""
    lines = []
    v = result.verification
    if not v.passed:
        lines.append(
            f"GOLDEN NOT REPRODUCED: {v.summary}; the shape verdicts below were judged against a golden "
            "this environment does not reproduce"
        )
    for k, s in sorted(result.shapes.items(), key=lambda kv: int(kv[0])):
        if s.cause is not None:  # the refusal's cause first, with the evidence that decided it
            lines.append(f"shape k={k}: FAIL, {s.cause.text(k)}")
        else:
            lines.append(f"shape k={k}: {s.verdict.upper()}" + (f" ({s.reasons[0]})" if s.reasons else ""))
    lines += [
        f"warning: {w.line}" for _, s in sorted(result.shapes.items(), key=lambda kv: int(kv[0])) for w in s.warnings
    ]
    return lines


def promote(
    cfg: ConfigFile, score_path: Path, ledger: Path, manifest: Path, golden: Path | None, run_path: Path | None
) -> Answer:
    from harness.ledger.committed import held_to_ledger, read_committed  # deferred: imports pyarrow (start-up)
    from harness.ledger.ledger_store import check_paths  # deferred: imports pyarrow (start-up)
    from harness.ledger.promotion import release_shapes_of  # deferred: imports pydantic models (start-up)
    from harness.pipeline.promote import describe_transition, promote_file  # deferred: imports pyarrow (start-up)

    check_paths(
        ledger, manifest, [("--score", score_path), ("--golden", golden), ("--run", run_path), ("--config", cfg.source)]
    )
    result, _ = promote_file(score_path, cfg, ledger, manifest, golden, run_path)
    # what the ledger holds now, read back: the lines and the exit status say what was committed, not what was meant
    done = read_committed(ledger, manifest, result.run.id, result.digest)
    lines = score_lines(result)  # a golden that did not reproduce is said first: it is why nothing was promoted
    lines += [describe_transition(s.transition()) for s in done.shapes]
    release = release_shapes_of(cfg.release_shapes_json())
    wanted = [int(k) for k in result.shapes if int(k) not in release]
    last, code = held_to_ledger(committed_line(done, wanted), 0, done, wanted, result.verification)
    return Answer.of([*lines, f"{last}; wrote {ledger} and {manifest}"], held=code == 0)


def committed_line(done: Committed, wanted: Sequence[int]) -> str:
    """``harness promote``'s last line before the ledger holds it to itself: what the commit promoted."""
    if not wanted:
        return f"PASS: the score judged only the release's own shapes: nothing to promote ({done.where()})"
    if done.refused:
        named = ", ".join(f"k={s.shape}" for s in done.refused)
        first = done.refused[0]
        reason = first.event.reasons[0] if first.event.reasons else "its event failed"
        return (
            f"FAIL: {len(done.refused)} of {len(done.shapes)} shapes not promoted by the {done.where()} ({named}): "
            f"shape k={first.shape}: {reason}"
        )
    n, ks = len(done.promoted), ",".join(str(k) for k in done.promoted)
    return f"PASS: {n} shape{'s' if n != 1 else ''} promoted (k={ks}) by the {done.where()}"


def report(
    score_path: Path,
    out: Path,
    ledger: Path | None,
    manifest: Path | None,
    junit: Path | None,
    localisation: Path | None,
) -> Answer:
    inputs = [("--score", score_path), ("--ledger", ledger), ("--manifest", manifest), ("--localisation", localisation)]
    check_output_dir(out, "report folder", inputs)
    if junit is not None:
        check_output_file(junit, "JUnit file", inputs=inputs)
    # a nightly's score and localisation are read from one generation of its outputs, whatever is published meanwhile
    score_file, loc_file = pin([score_path, localisation or score_path])
    result = read_score(score_file)
    with loaded(result.evidence_kinds or (), f"{score_path}: evidence_kinds"):  # their sections and properties
        return _report(result, score_path, out, ledger, manifest, junit, localisation, loc_file)


def _report(
    result: Score,
    score_path: Path,
    out: Path,
    ledger: Path | None,
    manifest: Path | None,
    junit: Path | None,
    localisation: Path | None,
    loc_file: Path,
) -> Answer:
    from harness.data.schemas import (  # deferred: imports a lazy attribute of harness.data.schemas (start-up)
        LocalisationFile,
        validate,
    )
    from harness.ledger.ledger_store import read_consistent  # deferred: imports pyarrow (start-up)
    from harness.pipeline.promote import engine_manifest  # deferred: imports pyarrow (start-up)
    from reports import ReportContext, write_junit, write_report  # deferred: imports jinja2, markupsafe (start-up)

    check_self_consistent(result, str(score_path))
    book, engine_reads = read_consistent(ledger, manifest) if ledger is not None else (None, None)
    loc = None
    if localisation is not None:
        data = validate(LocalisationFile, read_json(loc_file, "localisation file"), str(localisation))
        if data.score_digest != result.digest:
            raise HarnessError(
                f"{localisation}: localises another score (digest {data.score_digest[:12]}...), not {score_path}"
            )
        loc = {
            k: {op: v.model_dump(mode="json", exclude_unset=True) for op, v in ops.items()}  # as written
            for k, ops in data.shapes.items()
        }
    # the pages (and a JUnit file beside them) are one set, published in one step (harness.base.outputset)
    beside = junit if junit is not None and same_file(junit.parent, out) else None
    members = [*REPORT_PAGES, *([beside.name] if beside is not None else [])]
    with output_set(out, "report", members) as stage:
        write_report(
            stage,
            result,
            ReportContext(
                ledger=book,
                localisation=loc,
                engine=engine_manifest(result, manifest, engine_reads) if manifest is not None else None,
            ),
        )
        if beside is not None:
            write_junit(stage / beside.name, result, None)
    committed(out, "the report's pages" + (f" and {beside.name}" if beside is not None else ""))
    if junit is not None and beside is None:  # elsewhere: its own file, after the pages
        write_junit(junit, result, None)
        committed(junit, "the JUnit file")
    return Answer.of([f"report: {out / 'report.html'}"])


REPORT_PAGES = ("report.json", "report.md", "report.html")


@dataclass(frozen=True)
class LawsOutputs:
    """What ``harness laws`` writes beside its text: the report as JSON, as JUnit XML, or (``export_vectors``,
    judging no packer) the packing test vectors, replacing an existing vectors folder with ``replace``."""

    json: Path | None = None
    junit: Path | None = None
    export_vectors: Path | None = None
    replace: bool = False


def laws(
    packer_cmd: str | None,
    packer: str | None,
    examples: int,
    seed: int,
    timeout: float,
    packer_digest: str | None = None,
    outputs: LawsOutputs = LawsOutputs(),
) -> Answer:
    """Judge a packer on the packing laws (harness.laws), or (``export_vectors``) write the packing test
    vectors of the harness's own packer, at the law geometry, for an engine's own tests."""
    from harness.laws import LAW_GEOMETRY, check_packer  # deferred: imports hypothesis, pyarrow (start-up)
    from harness.packers import check_unchanged, packer_from_options  # deferred: imports pyarrow (start-up)

    if outputs.export_vectors is not None:
        from harness.packers.vector_files import export  # deferred: imports pyarrow (start-up)

        if packer_cmd is not None or packer is not None or packer_digest is not None:
            raise HarnessError(
                "--export-vectors: the vectors are the harness's own packer's answers; give no "
                "--packer-cmd, --packer or --packer-digest with it"
            )
        if outputs.json is not None or outputs.junit is not None:
            raise HarnessError(
                "--export-vectors judges no packer, so there is no verdict for --json or --junit: "
                "run `harness laws` with them apart"
            )
        return Answer.of(export(outputs.export_vectors, LAW_GEOMETRY, replace=outputs.replace))
    if outputs.replace:
        raise HarnessError("--replace: replaces an existing vectors folder; give it with --export-vectors DIR")
    from harness.pipeline.laws_outputs import check_laws_outputs, write_laws_outputs  # deferred: imports pydantic

    check_laws_outputs(
        outputs.json, outputs.junit, packer_cmd
    )  # before the packer is started: nothing is judged for nothing
    with closing(
        packer_from_options(
            packer_cmd,
            packer,
            LAW_GEOMETRY,
            timeout_s=timeout,  # a crash: exit 2, no restart
            digest=packer_digest,
        )
    ) as judged:
        report = check_packer(judged, examples=examples, seed=seed)
        check_unchanged(judged)  # the verdict is of what its identity names: its files held while it ran
    text = report.render()
    if outputs.json is None and outputs.junit is None:
        return Answer.of([text], held=report.ok)
    line, held = write_laws_outputs(report, outputs.json, outputs.junit)
    return Answer.of([text, line], held=held)
