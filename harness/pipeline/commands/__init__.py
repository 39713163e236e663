"""The pipeline face of each command group of the CLI, one module each, named after it: ``harness golden X`` is
:mod:`harness.pipeline.commands.golden`, parsed by :mod:`harness.cli.golden_cmds`."""
