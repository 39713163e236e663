"""``harness golden diff A B``: two goldens of the same corpus, B's exact lane judged against A's.

The command's pipeline face; the file it writes is declared in :mod:`harness.data.schemas.golden_diff`.

Two goldens of one corpus recorded on another device, driver, torch, numerics profile or model
version answer the question a release engineer asks before trusting on B what was promoted on A:
do they give the same answers, and if not, where and by how much? B is judged against A exactly as
a score judges a lane against its golden: the same judges, the same tolerances (A's noise floor in
noise-floor mode: A is the reference), streamed batch by batch over both goldens' outputs (memory:
one batch of each, whatever the corpus). Two deliberate differences from a score, both because
this is a comparison of two references, not evidence for a promotion:

- the voiceprints are judged as in chained mode: each golden called its voiceprint OPs with the
  WEIGHTS its own segmentation gave, so a row re-weighted by an OP 0 flip is counted as one, not
  refused as "not isolated";
- no sample-size bound (the 95 % upper bound of the flip rate): two goldens of a 12-block corpus
  that agree bitwise agree, however small the corpus; flips are still counted and limited.

What differs in the environment is said first (the likely cause), then each OP, then the worst blocks.
Goldens of different corpora (corpus.parquet's sha256, the block list), geometries or OPs are
refused in one line naming both.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from golden.locate import refuse_folder_of_goldens
from golden.store import CORPUS, Golden, load_golden
from harness.base.destinations import check_output_file
from harness.base.errors import GoldenError, check_interrupted, step
from harness.base.figures import fmt
from harness.base.jsonio import write_json_atomic
from harness.base.overlap import prefetch
from harness.data.modes import VoiceprintInputs
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs
from harness.data.schemas.golden_diff import DiffStatus, GoldenDiff, GoldenSide, OpDiff
from harness.data.schemas.results import OpVerdictModel
from harness.data.tolerances import Tolerances
from harness.host.environment import differences, numerics_differences
from harness.judging.lane_scoring import LaneScorer, op_key, op_limits
from harness.pipeline.score import BATCH_BLOCKS

FORMAT = 1
WORST_SHOWN = 5  # worst blocks shown per OP in the text (the JSON holds the judges' whole `failing` list)


def check_same_corpus(a: Golden, b: Golden) -> list[str]:
    """The block ids both goldens hold (A's order), or one line naming both goldens and what differs.
    The manifests are compared first (no file read); the outputs' files are hashed only once they agree."""
    sha_a, sha_b = (g.manifest.files[CORPUS].sha256 for g in (a, b))
    if sha_a != sha_b:
        raise GoldenError(
            f"{b.path}: recorded on another corpus than {a.path} ({CORPUS} sha256 {sha_b[:12]}... vs "
            f"{sha_a[:12]}...): `golden diff` compares two goldens of one corpus; record B on A's "
            f"corpus (`harness golden record --corpus {a.path / CORPUS}`)"
        )
    if a.geometry != b.geometry:
        raise GoldenError(
            f"{b.path}: declares another geometry than {a.path}: the two goldens' outputs cannot be "
            "compared window by window"
        )
    if a.ops != b.ops:
        raise GoldenError(
            f"{b.path}: holds OPs {[int(o) for o in b.ops]}, {a.path} holds {[int(o) for o in a.ops]}: "
            "`golden diff` compares the same OPs"
        )
    ids_a, ids_b = a.block_ids(), b.block_ids()
    if ids_a != ids_b:
        first = next((x, y) for x, y in zip([*ids_a, None], [*ids_b, None], strict=False) if x != y)
        raise GoldenError(
            f"{b.path}: holds other blocks than {a.path} (first difference: {first[1]!r} vs "
            f"{first[0]!r}): `golden diff` compares two goldens of one corpus"
        )
    return list(ids_a)


def environment_differences(a: Golden, b: Golden) -> list[str]:
    """What differs from A to B, the likely cause first: the model, then the machine and software
    (``harness.host.environment.differences``), then every numeric setting in force, then the profile."""
    ma, mb = a.manifest, b.manifest
    out = [
        f"model.{k}: {getattr(ma.model, k)!r} -> {getattr(mb.model, k)!r}"
        for k in ("fingerprint", "name")
        if getattr(ma.model, k) != getattr(mb.model, k)
    ]
    out += differences(ma.environment.model_dump(mode="json"), mb.environment.model_dump(mode="json"))
    out += numerics_differences(dict(ma.numerics.in_force), dict(mb.numerics.in_force))
    if ma.numerics_profile != mb.numerics_profile:
        out.append(f"numerics_profile: {ma.numerics_profile!r} -> {mb.numerics_profile!r}")
    return out


def diff(a: Golden, b: Golden, tolerances: Tolerances) -> GoldenDiff:
    """B's exact lane judged against A's (see the module doc); the answer (frozen)."""
    with step("check goldens"):
        ids = check_same_corpus(a, b)
    ops = a.ops
    scorer = LaneScorer(
        "golden-b",
        ops,
        a.geometry,
        op_limits(tolerances, ops, a.floors(), sample_bound=False),
        VoiceprintInputs.CHAINED,
    )
    reader_a, reader_b = a.outputs(), b.outputs()

    def batches() -> Iterator[tuple[LaneOutputs, LaneOutputs]]:
        for start in range(0, len(ids), BATCH_BLOCKS):
            chunk = ids[start : start + BATCH_BLOCKS]
            yield reader_a.select(chunk), reader_b.select(chunk)

    with step("diff"):
        for gold, other in prefetch(batches(), name="diff-reader"):  # the next batch read while this one is judged
            check_interrupted()
            scorer.add(gold, other)
    per_op = {op_key(v.op): OpDiff(status=op_status(v), verdict=v) for v in scorer.verdicts()}
    order: tuple[DiffStatus, ...] = ("bitwise", "within-tolerance", "differs")
    worst = order[max(order.index(o.status) for o in per_op.values())]
    return GoldenDiff.model_validate(
        {
            "kind": "harness.golden-diff",
            "format": FORMAT,
            "a": side(a),
            "b": side(b),
            "corpus": {"sha256": a.manifest.files[CORPUS].sha256, "blocks": len(ids)},
            "voiceprint_inputs": "chained",
            "tolerances": tolerances,
            "environment_differences": environment_differences(a, b),
            "ops": per_op,
            "status": worst,
            "differing_ops": sum(o.status == "differs" for o in per_op.values()),
        }
    )


def op_status(verdict: OpVerdictModel) -> DiffStatus:
    if not verdict.passed:
        return "differs"
    return "bitwise" if verdict.figures.bitwise else "within-tolerance"


def side(g: Golden) -> GoldenSide:
    m = g.manifest
    return GoldenSide(
        id=g.golden_id,
        path=str(g.path),
        manifest_sha256=g.manifest_sha256,
        created=m.created,
        fingerprint=g.fingerprint,
        model_name=m.model.name,
        device_kind=g.device_kind,
        numerics_profile=m.numerics_profile,
    )


def describe(d: GoldenDiff) -> list[str]:
    """The text answer: the two goldens, the environment differences FIRST, one line per OP, the worst
    blocks of every OP that is not bitwise, and a last line with the answer."""
    lines = [
        f"golden diff: A {d.a.id} ({d.a.path}) vs B {d.b.id} ({d.b.path}), one corpus of {d.corpus.blocks} "
        f"blocks (corpus.parquet sha256 {d.corpus.sha256[:12]}...)"
    ]
    if d.environment_differences:
        lines.append(f"environment differences (A -> B, {len(d.environment_differences)}):")
        lines += [f"  {line}" for line in d.environment_differences]
    else:
        lines.append("environment differences (A -> B): none recorded")
    for key, o in sorted(d.ops.items()):
        lines += op_lines(key, o)
    shown = [line for key, o in sorted(d.ops.items()) if o.status != "bitwise" for line in worst_blocks(key, o)]
    if shown:
        lines.append(f"worst blocks (at most {WORST_SHOWN} per OP):")
        lines += [f"  {line}" for line in shown]
    modes = sorted({d.tolerances.for_op(Op(op)).mode for op in (0, 1, 2)})
    judged = f"judged in {'/'.join(modes)} mode"
    if d.status == "bitwise":
        lines.append(f"B matches A bitwise in every OP ({judged})")
    elif d.status == "within-tolerance":
        lines.append(f"B matches A within the tolerances in every OP, not bitwise ({judged})")
    else:
        bad = ", ".join(k for k, o in sorted(d.ops.items()) if o.status == "differs")
        lines.append(
            f"B DIFFERS from A beyond the tolerances in {d.differing_ops} of {len(d.ops)} OPs (OP {bad}; "
            f"{judged}): a promotion made on one is not evidence for the other"
        )
    return lines


def op_lines(key: str, o: OpDiff) -> list[str]:
    v = o.verdict
    if o.status == "bitwise":
        return [f"OP {key}: bitwise (every bit equal)"]
    if o.status == "within-tolerance":
        figures = [c.line() for c in v.checks if c.metric in ("max_abs", "min_cosine") and c.relation != "report"]
        return [f"OP {key}: within tolerance, not bitwise" + (f" ({'; '.join(figures)})" if figures else "")]
    return [
        f"OP {key}: DIFFERS ({len(v.reasons)} failing check{'s' if len(v.reasons) != 1 else ''}):",
        *(f"  {reason}" for reason in v.reasons),
    ]


def worst_blocks(key: str, o: OpDiff) -> list[str]:
    out = []
    for row in o.verdict.offenders[:WORST_SHOWN]:
        place = (("window", row.window), ("speaker", row.speaker))
        where = f"block {row.block!r}" + "".join(f" {name} {at}" for name, at in place if at is not None)
        out.append(f"OP {key} {where}: {row.metric} {fmt(row.value)}")
    return out


def run_diff(a_path: Path, b_path: Path, tolerances: Tolerances, out: Path | None) -> tuple[GoldenDiff, list[str]]:
    """The command: both goldens loaded (manifests checked, files hashed), the output checked writable
    BEFORE any output is read, the diff, then ``--out`` written whole (atomic rename) or not at all."""

    for path, name in ((a_path, "A"), (b_path, "B")):
        refuse_folder_of_goldens(path, name)
    if out is not None:
        check_output_file(out, "golden diff file", inputs=[("A", a_path), ("B", b_path)])
    a, b = load_golden(a_path), load_golden(b_path)
    result = diff(a, b, tolerances)
    lines = describe(result)
    if out is not None:
        write_json_atomic(out, result.model_dump(mode="json"))
        lines.append(f"wrote {out}")
    return result, lines


def as_json(result: GoldenDiff) -> object:
    """The diff as the JSON ``--json`` prints: the document at its boundary (a JSON object)."""
    return result.model_dump(mode="json")
