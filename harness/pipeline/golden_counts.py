"""What a golden recorded to judge, per OP: windows holding audio (OP 0), voiceprint rows (OP 1/2).

A golden whose segmentation never marks a speaker active has no voiceprint row: its voiceprint OPs can
never be judged, and every nightly against it would refuse every shape for a reason three lines down.
Recording says the counts per OP and refuses such an OP at once; ``golden show`` prints them. Read from
the manifest (its files' Parquet row counts and its corpus summary): nothing is opened.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from harness.base.errors import GoldenError
from harness.data.geometry import Geometry
from harness.data.masks import MaskPolicy
from harness.data.ops import Op

if TYPE_CHECKING:
    from golden.store import Golden
    from harness.data.schemas import CorpusSummary

Counts = Mapping[Op, tuple[int, str]]  # per OP: how many units it recorded to judge, and what they are


def recorded_counts(
    files: Mapping[str, Mapping[str, Any]], corpus: CorpusSummary, ops: Iterable[Op]
) -> dict[Op, tuple[int, str]]:
    """Per OP, what a golden recorded to judge: OP 0 its windows holding audio, OP 1/2 their voiceprint rows."""
    out: dict[Op, tuple[int, str]] = {}
    for op in ops:
        if op is Op.SEGMENTATION:
            out[op] = (int(corpus.audio_windows), "windows holding audio")
        else:
            # the files' manifest entries as the golden's writers return them: JSON objects of the manifest
            out[op] = (int((files.get(f"op{int(op)}.parquet") or {}).get("rows") or 0), "voiceprint rows")
    return out


def golden_counts(gold: Golden) -> dict[Op, tuple[int, str]]:
    """What a loaded golden recorded to judge, per OP (:func:`recorded_counts` of its manifest)."""
    files = {name: entry.model_dump(mode="json") for name, entry in gold.manifest.files.items()}
    return recorded_counts(files, gold.manifest.corpus, gold.ops)


def counts_line(counts: Counts) -> str:
    """'OP 0: 32 windows holding audio; OP 1: 57 voiceprint rows; ...' (golden record and golden show)."""
    return "; ".join(f"OP {int(op)}: {n:,} {unit}" for op, (n, unit) in counts.items())


def refuse_unjudgeable(
    files: Mapping[str, Mapping[str, Any]],
    corpus: CorpusSummary,
    ops: Iterable[Op],
    masks: MaskPolicy,
    geometry: Geometry,
) -> None:
    """An OP with nothing recorded to judge (no window holding audio; no voiceprint row: the segmentation never
    gave a speaker enough active frames for the masks) can never be judged, on any shape: no packed shape of it
    could ever be promoted, and every nightly would refuse every shape for it. Refused here, naming the OP and
    the mask settings, before anything is written."""
    for op, (n, _) in recorded_counts(files, corpus, ops).items():
        if n:
            continue
        if op is Op.SEGMENTATION:
            raise GoldenError(
                "refusing to record a golden: OP 0 has no window holding audio (every window's VALID "
                "is 0): nothing could ever be judged; record a corpus with audio"
            )
        rule = (
            f"[masks] min_active_frames = {masks.min_active_frames}"
            if masks.min_active_frames is not None
            else f"[masks] min_active_fraction = {masks.min_active_fraction}"
        )
        raise GoldenError(
            f"refusing to record a golden: OP {int(op)} recorded 0 voiceprint rows over "
            f"{int(corpus.audio_windows):,} windows holding audio: the masks give a speaker a row "
            f"only with >= {masks.threshold(geometry)} of {geometry.frames_per_window} frames active "
            f"in a window ({rule}) and the segmentation (OP 0) gave none, so no shape could ever be "
            f"judged on OP {int(op)}; record audio with speech, lower the [masks] threshold, or check "
            "the model's segmentation (does it ever mark a speaker active?)"
        )
