"""Per-module noise floors, recorded with the golden: how much each module differs from itself.

Localisation normalises each module's packed-vs-alone error by that module's own noise floor
(:mod:`harness.localisation.module_errors`). The floor is what the release does to itself: at ``golden record``,
for a small seeded sample of blocks (``[localise] floor_blocks``, default 1), every OP's request of
each block runs twice, alone, as the exact lane's two passes do, with every module hooked
(:func:`harness.localisation.first_divergence.record_activations`), and per module the largest max abs and max relative
difference between the passes is kept, with the largest finite magnitude the module output (its
scale: the ulp floor is taken at it). A third run moves every leaf module's output by one ulp
(:func:`harness.localisation.first_divergence.one_ulp_jitter`, seeded) and keeps each module's largest change
(``jitter``): two passes on a CPU are usually bitwise, and then that is the noise a packed call may
carry without any defect, grown through the network. Only the sample runs again, after the exact
lane, so the golden's outputs and corpus are bitwise what they were, and the cost is three calls per
sampled block and OP.

The result is the golden manifest's optional ``module_floors`` key (sealed with it;
``harness.data.schemas.files.ModuleFloors``). A model without ``torch_modules()`` or whose modules
refuse hooks (TorchScript) is not sampled: the key then says why (``skipped``), and localisation
normalises by the ulp scale alone, saying so. The voiceprint OPs replay the WEIGHTS/IDX the exact
lane sent for the sampled blocks (collected while it runs, :meth:`FloorSampler.add`, or read back from
the golden's outputs as written, :meth:`FloorSampler.add_inputs`, as ``golden record`` does); a sampled
block without voiceprint rows is not sampled for that OP.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NotRequired, Protocol, TypedDict

import numpy as np

from harness.base.errors import HarnessError, one_line
from harness.base.process_settings import release_free_memory
from harness.data.blocks import Block
from harness.data.corpus_reader import CorpusReader
from harness.data.geometry import Geometry
from harness.data.masks import VoiceprintRows
from harness.data.ops import Op
from harness.data.outputs import LaneOutputs, VoiceprintOutputs
from harness.data.schemas.config_file import LocaliseSection
from harness.data.schemas.localisation import ModuleFloors

FORMAT = 1
PASSES = 2
KEYS = ("max_abs", "max_rel", "scale", "jitter")
NO_MODULES = "the model exposes no torch modules to hook (torch_modules())"
NOT_IN_PROCESS = "the model does not run in this process (a server's backend): nothing to hook"


def sample_ids(ids: Sequence[str], blocks: int, seed: int) -> list[str]:
    """``blocks`` of ``ids`` drawn with ``seed``, in corpus order (all of them when there are fewer)."""
    chosen = sorted(random.Random(seed).sample(range(len(ids)), min(blocks, len(ids))))
    return [ids[i] for i in chosen]


class FloorsJson(TypedDict):
    """The golden manifest's ``module_floors`` as the JSON object sealed with it (``ModuleFloors`` reads it)."""

    format: int
    passes: int
    seed: int
    blocks: list[str]
    ops: dict[str, dict[str, dict[str, float]]]  # per OP, per module: KEYS
    skipped: NotRequired[str]
    serial: NotRequired[str]


class FloorsField(TypedDict, total=False):
    """The manifest's ``module_floors`` key, for its fields (absent: no floors recorded or turned off)."""

    module_floors: FloorsJson


def skipped(reason: str, seed: int) -> FloorsJson:
    """The manifest's ``module_floors`` when none could be recorded: why, in one line (the manifest's JSON object,
    sealed with it: ``ModuleFloors``)."""
    return {"format": FORMAT, "passes": PASSES, "seed": seed, "blocks": [], "ops": {}, "skipped": reason}


class RecordedVoiceprints(Protocol):
    """Where recorded voiceprint rows are read from (a golden's outputs: ``golden.lane_reader.LaneReader``)."""

    def select_voiceprints(self, block_ids: Sequence[str]) -> Mapping[Op, VoiceprintOutputs]: ...


class FloorSampler:
    """Collects, while the exact lane runs, the voiceprint inputs of the sampled blocks; then records the
    floors (module doc). Build it with :func:`floor_sampler`; ``reason``: why none can be recorded (the
    record says so); ``ids`` empty and no reason: floors turned off (``floor_blocks = 0``)."""

    def __init__(
        self,
        model: object | None,
        geometry: Geometry,
        ids: list[str],
        seed: int,
        ops: Sequence[Op],
        reason: str | None = None,
    ) -> None:
        self.model = model
        self.spill: Path | None = (
            None  # where the passes' module outputs are written (harness.localisation.activations)
        )
        self.progress: Callable[[str | None], None] | None = None  # told each pass and module (None: done)
        self.note: Callable[[str], None] | None = None  # told, in one line, that the passes ran one after another
        self.serial: str | None = None  # why the passes ran one after another (None: side by side)
        self.geometry = geometry
        self.ids = ids
        self.seed = seed
        self.ops = tuple(ops)
        self.reason = reason
        self.rows: dict[Op, dict[str, VoiceprintRows]] = {op: {} for op in self.ops if op.is_voiceprint}
        self._wanted = frozenset(ids)

    def add(self, batch: LaneOutputs) -> None:
        """Keep the WEIGHTS/IDX the exact lane sent for the sampled blocks of ``batch``."""
        mine = [b for b in batch.block_ids if b in self._wanted]
        if not mine:
            return
        for op, outputs in batch.voiceprint.items():
            if op in self.rows:
                self.rows[op].update(outputs.select(mine).inputs())

    def add_inputs(self, recorded: RecordedVoiceprints) -> None:
        """Keep the WEIGHTS/IDX of the sampled blocks from the golden's outputs as written (the exact lane's
        first pass: what :meth:`add` keeps from its batches). ``golden record`` samples after the lanes, as
        its corpus copy is made while they run (the sample is drawn from the copy's block ids)."""
        if not self.ids or not self.rows:
            return
        for op, outputs in recorded.select_voiceprints(self.ids).items():
            if op in self.rows:
                self.rows[op].update(outputs.inputs())

    def fields(self, corpus: CorpusReader) -> FloorsField:
        """The golden manifest's ``module_floors`` key over the sampled blocks of ``corpus`` (``{}`` when floors
        are turned off). A model whose modules refuse hooks is recorded as skipped, saying why: the golden is
        recorded anyway."""
        if self.reason is not None:
            return {"module_floors": skipped(self.reason, self.seed)}
        if not self.ids:
            return {}
        try:
            sampled = (b for b, _, _ in corpus.rows(keep=self._wanted) if b.id in self._wanted)
            return {"module_floors": self._record(sampled)}
        except HarnessError:
            raise
        except Exception as exc:  # hooks refused (ScriptModule), or a model that cannot be hooked
            why = f"the model's modules could not be hooked ({type(exc).__name__}: {one_line(exc)})"
            return {"module_floors": skipped(why, self.seed)}

    def _record(self, corpus: Iterable[Block]) -> FloorsJson:
        """The manifest's ``module_floors`` object (``ModuleFloors``), as it is sealed with the manifest."""
        floors: dict[str, dict[str, dict[str, float]]] = {}
        for block in corpus:
            for op in self.ops:
                request = self._request(block, op)
                if request is not None:
                    self._measure(op, request, floors.setdefault(str(int(op)), {}))
        record: FloorsJson = {
            "format": FORMAT,
            "passes": PASSES,
            "seed": self.seed,
            "blocks": list(self.ids),
            "ops": floors,
        }
        return record if self.serial is None else {**record, "serial": self.serial}

    def _measure(self, op: Op, request: Block, table: dict[str, dict[str, float]]) -> None:
        """Two plain passes and one under :func:`harness.localisation.first_divergence.one_ulp_jitter`, alone,
        hooked: each module's
        largest difference between the plain passes, and between the jittered one and the first, kept. The
        three run side by side, compared module by module as they go (harness.localisation.lockstep); calls that do not
        run in step are measured one after the other, their outputs kept out of memory
        (harness.localisation.activations)."""
        from harness.localisation import lockstep  # imports torch

        figures = None
        if self.serial is None:  # a model found not to be entered twice is not tried side by side again
            try:
                figures = self._side_by_side(op, request)
            except lockstep.PassStuck as exc:
                raise HarnessError(
                    f"module noise floors, OP {int(op)}: {exc}; record without them: --set localise.floor_blocks=0"
                ) from None
            except lockstep.OutOfStep as exc:  # NotReentrant among them: a model three threads cannot enter
                self.serial = str(exc)
                if self.note is not None:
                    self.note(f"module noise floors: {exc}: measuring one pass after another (the same figures)")
        if figures is None:
            figures = self._one_after_another(op, request)
        for name, figure in figures.result().items():
            old = table.get(name, dict.fromkeys(KEYS, 0.0))
            table[name] = {key: max(old[key], float(figure[key])) for key in KEYS}
        release_free_memory()  # the next request's passes start from what is alive, not from a fragmented heap

    def _side_by_side(self, op: Op, request: Block) -> _Figures:
        """The three passes at once, each module compared when every pass has produced it."""
        import torch

        from harness.localisation import lockstep  # deferred: imports torch (start-up)
        from harness.localisation.first_divergence import (  # deferred: imports torch (start-up)
            OUTPUT,
            families,
            one_ulp_jitter,
        )

        model: Any = self.model
        nets, _ = families(model, op)
        figures = _Figures()
        modules = sum(1 for top in nets.values() for name, _ in top.named_modules() if name) + len(nets)
        self._say(op, f"3 passes side by side, module 0 of {modules}")

        def compare(name: str, outputs: list[Any]) -> None:
            figures.add(name, outputs)
            self._say(op, f"3 passes side by side, module {len(figures.figures)} of {modules}")

        with one_ulp_jitter(nets, self.seed, when=lambda: lockstep.current() == 2):
            answers = lockstep.run([lambda: model.infer(request.tensors())] * 3, nets, compare)
        if len({a.shape for a in answers}) == 1:
            figures.add(OUTPUT, [torch.from_numpy(np.ascontiguousarray(a)) for a in answers])
        return figures

    def _one_after_another(self, op: Op, request: Block) -> _Figures:
        """The three passes one after another, each module's outputs written out and compared one at a time."""
        from harness.localisation.first_divergence import (  # imports torch
            comparable,
            families,
            one_ulp_jitter,
            record_activations,
        )

        model: Any = self.model
        nets, row_modules = families(model, op)
        every = slice(0, None)
        figures = _Figures()
        self._say(op, "pass 1 of 3")
        want_acts, want_out = record_activations(model, request.tensors(), nets, every, every, row_modules, self.spill)
        with want_acts:
            self._say(op, "pass 2 of 3")
            got_acts, got_out = record_activations(
                model, request.tensors(), nets, every, every, row_modules, self.spill
            )
            with got_acts:
                self._say(op, "pass 3 of 3, every leaf module one ulp off")
                with one_ulp_jitter(nets, self.seed):
                    jit_acts, jit_out = record_activations(
                        model, request.tensors(), nets, every, every, row_modules, self.spill
                    )
                with jit_acts:
                    names = len(want_acts.names()) + 1
                    pairs = comparable(want_acts, (got_acts, got_out), (jit_acts, jit_out), want_out=want_out)
                    for i, (name, want, (got, jit)) in enumerate(pairs, start=1):
                        self._say(op, f"module {i} of {names}")
                        figures.add(name, [want, got, jit])
        return figures

    def _say(self, op: Op, what: str) -> None:
        if self.progress is not None:
            self.progress(f"module noise floors: OP {int(op)}, {what}")

    def _request(self, block: Block, op: Op) -> Block | None:
        if op is Op.SEGMENTATION:
            return block
        rows = self.rows[op].get(block.id)
        if rows is None or rows.idx.shape[0] == 0:
            return None
        return block.with_voiceprint(op, rows.weights, rows.idx, rows.speakers, self.geometry)


@dataclass
class _ModuleFigures:
    """One module's largest figures so far: its first pass's magnitude (scale), the second pass's difference from
    it (max_abs) and the jittered pass's (jitter)."""

    max_abs: float = 0.0
    scale: float = 0.0
    jitter: float = 0.0


class _Figures:
    """Per module, over its outputs as they come (a module may produce several): the largest magnitude of the
    first pass (its scale), the largest difference of the second pass and of the jittered one from it."""

    def __init__(self) -> None:
        self.figures: dict[str, _ModuleFigures] = {}

    def add(self, name: str, outputs: Sequence[Any]) -> None:
        from harness.localisation.module_errors import difference, scale_of  # imports torch

        want, got, jit = outputs
        scale = scale_of(want)
        f = self.figures.setdefault(name, _ModuleFigures())
        f.scale = max(f.scale, scale)
        f.max_abs = max(f.max_abs, float(difference(got, want, scale).max_abs))
        f.jitter = max(f.jitter, float(difference(jit, want, scale).max_abs))

    def result(self) -> dict[str, dict[str, float]]:
        """Per module: max_abs, max_rel (the largest difference over the module's scale), scale, jitter, as the
        manifest's ``module_floors`` holds them."""
        import torch

        tiny = float(torch.finfo(torch.float32).tiny)
        return {name: {**asdict(f), "max_rel": f.max_abs / max(f.scale, tiny)} for name, f in self.figures.items()}


def floor_sampler(
    model: object | None, corpus: CorpusReader, settings: LocaliseSection, ops: Sequence[Op]
) -> FloorSampler:
    """The sampler of a recording: ``settings.floor_blocks`` blocks of ``corpus`` drawn with ``floor_seed``;
    ``model`` is the backend's in-process model (None: a server's, nothing to hook here)."""
    seed, reason = settings.floor_seed, None
    if settings.floor_blocks == 0:
        return FloorSampler(model, corpus.g, [], seed, ops)
    if model is None:
        reason = NOT_IN_PROCESS
    elif not hasattr(model, "torch_modules"):
        reason = NO_MODULES
    ids = [] if reason else sample_ids(corpus.ids(), settings.floor_blocks, seed)
    return FloorSampler(model, corpus.g, ids, seed, ops, reason)


def merge_module_floors(parts: Sequence[Mapping[str, Any] | None]) -> FloorsField:
    """The ``module_floors`` of shard goldens merged (``golden record --ray``): the worst of each module's
    figures and every shard's sampled blocks, as one recording of all of them would hold (``{}``: no shard
    recorded floors; a shard that skipped them makes the merge skipped, saying why). Each part is a shard
    manifest's ``module_floors`` as its JSON object, read here as a ``ModuleFloors``; the merge is that JSON
    object again, in the model's key order."""
    given = [ModuleFloors.model_validate(p) for p in parts if p is not None]
    if not given:
        return {}
    skipped_parts = [p for p in given if p.skipped]
    if skipped_parts or len(given) != len(parts):
        first = skipped_parts[0] if skipped_parts else None
        if first is None or first.skipped is None:
            return {"module_floors": skipped("a shard golden records no module floors", given[0].seed)}
        return {"module_floors": {**_json(first, first.blocks, _tables(first)), "skipped": first.skipped}}
    ops: dict[str, dict[str, dict[str, float]]] = {}
    for part in given:
        for op, table in _tables(part).items():
            merged = ops.setdefault(op, {})
            for name, figures in table.items():
                old = merged.get(name, dict.fromkeys(KEYS, 0.0))
                merged[name] = {key: max(float(old[key]), float(figures[key])) for key in KEYS}
    record = _json(given[0], [b for p in given for b in p.blocks], ops)
    serial = next((p.serial for p in given if p.serial), None)  # any shard's: how its floors were taken
    return {"module_floors": record if serial is None else {**record, "serial": serial}}


def _tables(floors: ModuleFloors) -> dict[str, dict[str, dict[str, float]]]:
    """Per OP, per module, the figures (KEYS) as the manifest's JSON holds them."""
    return {op: {name: f.model_dump(mode="json") for name, f in table.items()} for op, table in floors.ops.items()}


def _json(floors: ModuleFloors, blocks: list[str], ops: dict[str, dict[str, dict[str, float]]]) -> FloorsJson:
    """``module_floors``' JSON object in the model's key order, with these blocks and tables."""
    return {"format": floors.format, "passes": floors.passes, "seed": floors.seed, "blocks": blocks, "ops": ops}
