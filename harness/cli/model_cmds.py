"""``harness model check``: does a model meet the contract? In seconds, with no corpus or golden."""

from __future__ import annotations

from harness.cli.app import ConfigOpt, DeviceOpt, ModelOpt, ProgressOpt, SetOpt, answer, model_app, resolve_config


@model_app.command("check")
def model_check(
    model: ModelOpt = None,
    device: DeviceOpt = None,
    config: ConfigOpt = None,
    progress: ProgressOpt = True,
    sets: SetOpt = None,
) -> None:
    """Check a model against every part of the contract a golden record and a nightly need (docs/models.md).

    On three synthetic blocks, with no corpus, golden or ledger, one line per check: describe() (name and
    fingerprint), geometry; each OP's answer (output name, dtype, shape), alone and packed two blocks to a call;
    voiceprint rows from its OP 0 answers; finite answers; the same answer twice; stage() answering as infer();
    a call entered from two threads at once (a model that cannot be, a lock around its call, is a note: the
    harness serialises its calls); isolation at k=2 (block A's answer must be the same bits whatever audio its
    neighbour holds, in either slot); the time per block and OP.

    \b
    Exit 0: every check held (notes allowed); 1: a check failed (the last line names which);
    2: the model cannot be built (a spec naming no model, a factory that raises, a bad geometry).
    golden record, nightly, run and golden verify refuse a model whose describe() breaks the contract before
    any work; the lanes check every answer's name, dtype and shape as it comes. The model runs in this process
    ([backend] is not read); the configuration gives [model] seed, [corpus] seed and step, [masks], [tolerances].
    """
    from harness.pipeline.commands import model as model_commands  # deferred: its imports are heavy (start-up)

    cfg = resolve_config(config, model, device=device, sets=sets)
    answer(model_commands.model_check(cfg, progress))
