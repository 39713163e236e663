"""Answers to everyday questions, as lines for people: which shapes may the engine use, what is
in a golden, what happened to a shape."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from golden.locate import refuse_folder_of_goldens
from golden.manifest import check_files
from golden.store import Golden
from harness.base.errors import HarnessError
from harness.base.figures import fmt
from harness.data.ops import Op
from harness.data.schemas.answers import HistoryAnswer, ShapesAnswer
from harness.data.schemas.engine_manifest import PromotedShapes
from harness.data.schemas.history import HistoryRow, SeriesAnswer
from harness.data.schemas.records import Ledger, LedgerEntry, as_written
from harness.judging.judges import floor_figures, judge_for
from harness.ledger.ledger_store import LEDGER, MANIFEST, beside_golden
from harness.ledger.promotion import describe_overrides
from harness.pipeline.golden_counts import counts_line, golden_counts

CONTENT_NOT_CHECKED = (
    "the data files' content was NOT checked (--no-hash: sizes only); check it with "
    "`harness golden show` without --no-hash, or `harness golden verify`"
)


class _Settings(BaseModel):
    """The numeric settings in force that the answers print, read from a record's ``in_force``
    (:class:`~harness.data.schemas.machine.InForce`, a JSON object: one recorded before a key existed lacks it,
    printed as None)."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    threads: int | None = None
    mkldnn: bool | None = None
    matmul_allow_tf32: bool | None = None
    cudnn_benchmark: bool | None = None


class _Libraries(BaseModel):
    """The library versions and CPU ``golden show`` prints: keys the environment record keeps as the machine
    gave them (:class:`~harness.data.schemas.machine.EnvironmentModel` declares the device's only); None where a
    golden lacks them."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    torch: str | None = None
    numpy: str | None = None
    cpu: str | None = None


def check_golden_content(gold: Golden) -> int:
    """Every data file's sha256 against the manifest (hashed in parallel); a mismatch is one
    GoldenError line naming the file. Returns the bytes hashed.

    Why by default: a golden whose bytes changed must not be shown as fine when ``score`` would
    refuse it; hashing costs about one read of the golden's files (README, "Measured")."""
    check_files(gold.path, gold.manifest.files, hashed=list(gold.manifest.files))
    return sum(e.bytes for e in gold.manifest.files.values())


def describe_golden(gold: Golden, hashed: int | None = None) -> list[str]:
    """``hashed``: the bytes whose sha256 was checked (None: content not checked, said in words)."""
    m = gold.manifest
    env, repro, corpus = m.environment, m.reproducibility, m.corpus
    libraries = _Libraries.model_validate(env.model_extra or {})
    in_force = _Settings.model_validate(m.numerics.in_force)
    lines = [
        f"golden {gold.golden_id} (release {gold.release}), recorded {m.created}, format {m.format}",
        f"  model: {m.model.name}, fingerprint {gold.fingerprint}",
        f"  device: {gold.device_kind}; numerics profile {m.numerics_profile} "
        f"(threads {in_force.threads}, mkldnn {in_force.mkldnn}, tf32 {in_force.matmul_allow_tf32})",
        f"  environment: torch {libraries.torch}, numpy {libraries.numpy}, CUDA {env.cuda}, "
        f"cuDNN {env.cudnn}, CPU {libraries.cpu}",
        f"  corpus: {corpus.blocks} blocks, {corpus.audio_windows} audio windows ({corpus.short_windows} "
        f"short, {corpus.padding_windows} padding), {corpus.span_seconds} s of audio, sources "
        f"{', '.join(corpus.sources)}",
        f"  voiceprint inputs: {m.voiceprint_inputs}; OPs {', '.join(str(o) for o in m.ops)}",
        f"  recorded to judge: {counts_line(golden_counts(gold))}",
        f"  reproduction when recorded: {'bitwise' if repro.bitwise else 'NOT bitwise'} "
        f"({repro.repeats} interleaved exact-lane runs)",
    ]
    for op, f in sorted(repro.ops.items()):
        figures = f.model_dump(mode="json")
        said = floor_figures.words(judge_for(Op(int(op))).floor_figures, figures)  # the OP's judge's figures
        floor = said if f.bitwise else f"noise floor {said}"
        lines.append(f"    OP {op}: {floor}")
    size = sum(e.bytes for e in m.files.values())
    content = (
        "content checked: the sha256 of every file matches the manifest" if hashed is not None else CONTENT_NOT_CHECKED
    )
    lines.append(f"  files: {len(m.files)}, {size / 2**20:.1f} MiB; {content}")
    return lines


def describe_shapes(manifest: PromotedShapes, checked: bool = True) -> list[str]:
    """Per model, device kind, numerics profile and packer: which k the engine may use per OP, since
    when, by which run, with which packing-laws verdict (a shape is allowed only for its own packer)."""
    lines = [
        f"promoted-shapes manifest: ledger commit {manifest.ledger_seq}, generated {manifest.generated}"
        + ("" if checked else " (NOT checked against its ledger: give --ledger)")
    ]
    if not manifest.models:
        lines.append("  no shape recorded yet: the engine may use only the release's own shapes")
    for fp, model in sorted(manifest.models.items()):
        for device, dev in sorted(model.devices.items()):
            for profile, p in sorted(dev.profiles.items()):
                n = _Settings.model_validate(p.numerics)
                lines.append(
                    f"model {fp[:16]}... on {device}, numerics {profile} (threads {n.threads}, "
                    f"mkldnn {n.mkldnn}, tf32 {n.matmul_allow_tf32}, cudnn benchmark {n.cudnn_benchmark}):"
                )
                release = "; ".join(
                    f"OP {op}: k = {', '.join(str(k) for k in ks)}" for op, ks in sorted(p.release_ops.items())
                )
                lines.append(f"  every packer (the release's own shapes): {release}")
                for packer, pk in sorted(p.packers.items()):
                    lines.append(f"  packer {packer}:")
                    for op, ks in sorted(pk.ops.items()):
                        lines.append(f"    OP {op}: k = {', '.join(str(k) for k in ks)}")
                    for k, ev in sorted(pk.evidence.items(), key=lambda kv: int(kv[0])):
                        laws = ev.laws
                        lines.append(
                            f"    k={k}: promoted {ev.promoted_at} for packer {packer} by run "
                            f"{ev.run_id} against {ev.golden_id} (release {ev.release}, "
                            f"{ev.corpus_blocks} blocks, tolerance {ev.tolerance_mode}, laws "
                            f"{laws.verdict}: {laws.examples} examples, seed {laws.seed})"
                        )
    return lines


def matching_entries(
    ledger: Ledger, shape: int | None, model: str | None, device: str | None, packer: str | None = None
) -> list[LedgerEntry]:
    """The ledger entries the ``ledger`` command's filters match, in the order it lists them."""
    entries = [
        e
        for e in ledger.entries.values()
        if (shape is None or e.shape == shape)
        and (model is None or e.fingerprint.startswith(model))
        and (device is None or e.device_kind == device)
        and (packer is None or e.packer_identity == packer)
    ]
    return sorted(entries, key=lambda e: (e.fingerprint, e.device_kind, e.numerics_profile, e.packer_identity, e.shape))


def describe_history(
    ledger: Ledger, shape: int | None, model: str | None, device: str | None, packer: str | None = None
) -> list[str]:
    entries = matching_entries(ledger, shape, model, device, packer)
    if not entries:
        return ["no ledger entry matches"]
    lines = []
    for e in entries:
        revoked = f", revoked by run {e.revoked_by}" if e.revoked_by else ""
        lines.append(
            f"shape k={e.shape} of model {e.fingerprint[:16]}... (release {e.release}) on "
            f"{e.device_kind} ({e.numerics_profile}), packer {e.packer_identity}: {e.state}{revoked}"
        )
        for ev in e.history:
            why = f": {ev.reasons[0]}" if ev.reasons else ""
            judged = ev.judged_under  # None in events written before it was recorded
            under = (
                " (overrides: not recorded)"
                if judged is None
                else f" (judged under overrides: {describe_overrides(judged.overrides)})"
                if judged.overrides
                else ""
            )
            lines.append(f"  #{ev.seq} {ev.at} run {ev.run_id} {ev.verdict} -> {ev.state}{under}{why}")
    return lines


@dataclass(frozen=True)
class LedgerFiles:
    """Where ``shapes``, ``ledger`` and ``history`` read: the ledger and the promoted-shapes manifest (None: not
    read) and how they were found (``harness.data.schemas.answers.Located``'s values)."""

    ledger: Path | None
    manifest: Path | None
    found_by: str

    def as_json(self) -> dict[str, str | None]:
        """As the commands' JSON answers name them (``Located``): paths as text."""
        return {
            "ledger": None if self.ledger is None else str(self.ledger),
            "manifest": None if self.manifest is None else str(self.manifest),
            "found_by": self.found_by,
        }


def locate_ledger(
    ledger: Path | None, manifest: Path | None, golden: Path | None, command: str, here: Path = Path(".")
) -> LedgerFiles:
    """Where ``shapes`` and ``ledger`` read: the ledger, the manifest (paths or None) and how they were found.

    The rule (documented in their --help and docs/nightly.md), so the plain commands meet what nightly wrote:

    - ``--ledger``/``--manifest`` as given win;
    - ``--golden G``: the files beside G, as nightly writes them (``G/../ledger.json``,
      ``G/../promoted-shapes.json``), for whichever of the two was not given;
    - neither: the one ledger among ``./ledger.json`` (``harness promote``'s default),
      ``./goldens/ledger.json`` and ``./goldens/*/ledger.json`` (nightly's, for goldens recorded into
      ``./goldens``), with the manifest beside it when there is one. None or several: one line naming
      where it looked or what it found, asking for --golden or --ledger. Nothing is ever created."""
    if golden is not None:
        refuse_folder_of_goldens(golden)
        if not (Path(golden) / "manifest.json").is_file():
            raise HarnessError(
                f"--golden {golden}: not a golden (no manifest.json); give the golden nightly ran "
                "against (its ledger is beside it), or --ledger"
            )
        found_ledger, beside = beside_golden(golden, ledger, manifest)
        if ledger is None and not found_ledger.exists():
            raise HarnessError(
                f"{found_ledger}: no ledger beside the golden {golden} (nightly and `harness promote "
                f"--golden` write it there); give --ledger if it is elsewhere"
            )
        found_manifest = beside if manifest is not None or beside.exists() else None
        return LedgerFiles(found_ledger, found_manifest, "--golden")
    if ledger is not None:
        return LedgerFiles(Path(ledger), manifest, "--ledger")
    if manifest is not None:
        return LedgerFiles(None, Path(manifest), "--manifest")
    here = Path(here)
    looked = [here / LEDGER, here / "goldens" / LEDGER]
    candidates = [p for p in looked if p.is_file()]
    candidates += sorted(p for p in (here / "goldens").glob(f"*/{LEDGER}") if p.is_file())
    unique: dict[Path, Path] = {}
    for p in candidates:
        unique.setdefault(p.resolve(), p)
    found = list(unique.values())
    if not found:
        raise HarnessError(
            f"{command}: no ledger found in {', '.join(str(p) for p in looked)} or "
            f"{here / 'goldens' / '*' / LEDGER}; give --golden GOLDEN (the ledger nightly wrote beside "
            "it) or --ledger LEDGER"
        )
    if len(found) > 1:
        raise HarnessError(
            f"{command}: {len(found)} ledgers found ({', '.join(str(p) for p in found)}); say which: "
            "--golden GOLDEN (the ledger beside it) or --ledger LEDGER"
        )
    beside = found[0].parent / MANIFEST
    return LedgerFiles(found[0], beside if beside.exists() else None, "search")


def shapes_document(
    manifest: PromotedShapes,
    files: LedgerFiles,
    checked: bool,
    may: dict[str, Any] | None = None,  # --may's answer as JSON (the command's asdict), printed as given
) -> str:
    """``harness shapes --json``: one JSON document, validated against its schema before it is printed."""
    doc = {
        "kind": "harness.shapes-answer",
        "format": 1,
        "files": files.as_json(),
        "checked": checked,
        "promoted_shapes": as_written(manifest),
        "may": may,
    }
    return _dumps(ShapesAnswer, doc)


def history_document(
    ledger: Ledger, files: LedgerFiles, shape: int | None, model: str | None, device: str | None, packer: str | None
) -> str:
    """``harness ledger --json``: the matching entries (as :func:`describe_history` lists them), validated."""
    doc = {
        "kind": "harness.ledger-answer",
        "format": 1,
        "files": files.as_json(),
        "ledger_seq": ledger.seq,
        "filters": {"shape": shape, "model": model, "device": device, "packer": packer},
        "entries": [as_written(e) for e in matching_entries(ledger, shape, model, device, packer)],
    }
    return _dumps(HistoryAnswer, doc)


def describe_series(rows: list[HistoryRow], ledger_seq: int, shape: int, op: int) -> list[str]:
    """``harness history``: one line per night (per committed score) and metric, oldest first, so a
    margin creeping towards 1 (the limit) reads down the page."""
    head = f"history of shape k={shape} OP {op} (ledger commit {ledger_seq})"
    if not rows:
        return [
            f"{head}: no history row matches (the history starts with the first `harness promote` of a "
            "harness that writes it)"
        ]
    lines = [f"{head}: {len(rows)} row(s); margin = share of the limit used (1 = at the limit)"]
    for r in rows:
        margin = "undefined" if r.margin is None else f"{r.margin:.3g}"
        lines.append(
            f"  #{r.seq} {r.created} run {r.run_id} on {r.device_kind} ({r.numerics_profile}), packer "
            f"{r.packer_identity}: {r.metric} {fmt(r.observed)} of {fmt(r.allowed)} allowed, margin "
            f"{margin}, {'ok' if r.ok else 'FAILED'}"
        )
    return lines


# filters: the command's filters as JSON (its asdict), printed as given
def series_document(rows: list[HistoryRow], ledger_seq: int, files: LedgerFiles, filters: dict[str, Any]) -> str:
    """``harness history --json``: the rows :func:`describe_series` lists, validated."""
    doc = {
        "kind": "harness.history-answer",
        "format": 1,
        "files": files.as_json(),
        "ledger_seq": ledger_seq,
        "filters": filters,
        "rows": [r.model_dump(mode="json") for r in rows],
    }
    return _dumps(SeriesAnswer, doc)


def _dumps(model: type[BaseModel], doc: dict[str, Any]) -> str:  # JSON built to be printed, validated first
    """Validated from the very JSON printed (not from the models it was built of: a model built with
    ``model_copy(update=...)`` was never checked): a document its own schema refuses is a bug (exit 3)."""
    model.model_validate(doc)
    return json.dumps(doc, indent=1, sort_keys=True)
