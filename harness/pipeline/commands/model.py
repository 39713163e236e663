"""``harness model check`` (:mod:`harness.cli.model_cmds`): the configured model against the whole contract,
before any corpus or golden (the reference network itself is :mod:`lanes.models.diar_nn_g.model`).

The model is built as every command builds it (the spec, ``[model] seed``, the device), but not refused for a
broken description here: that is one of the lines (``lanes.models.model_check``). A spec that names no model, a
factory that raises, a geometry that does not parse: exit 2, as everywhere. A failed check: exit 1.
"""

from __future__ import annotations

from harness.data.schemas.config_file import ConfigFile
from harness.pipeline.answer import Answer


def model_check(cfg: ConfigFile, progress: bool, wait_s: float | None = None) -> Answer:
    from harness.progress import progress_bar  # deferred: imports rich (start-up)
    from lanes.models.model_api import load_model  # deferred: the model's own imports (torch, for a network)
    from lanes.models.model_check.check import CheckOptions, run_model_check, total_calls  # deferred: numpy, the lanes

    spec = cfg.model.spec
    model = load_model(spec, seed=cfg.model.seed, device=cfg.release.device)
    options = CheckOptions.of(cfg) if wait_s is None else CheckOptions.of(cfg, wait_s)
    with progress_bar(f"model check {spec}", total_calls(), progress) as tick:
        report = run_model_check(model, spec, cfg.numerics, options, tick)
    return Answer.of(report.render(), held=report.passed)
