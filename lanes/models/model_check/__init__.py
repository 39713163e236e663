"""``harness model check``: a model against the whole contract, in seconds, before any corpus or golden.

:func:`~lanes.models.model_check.check.run_model_check` runs every check and answers with a
:class:`~lanes.models.model_check.check_report.ModelCheckReport` (one line per check); the command
(``harness.pipeline.commands.model``) and the pytest plugin (:mod:`lanes.models.model_check.contract_plugin`,
``pytest --harness-model SPEC``) print and judge the same report.
"""
