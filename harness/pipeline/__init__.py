"""Composition: the only code that wires the core, the lanes, the golden store and the reports together.

Every command of the CLI is one function of the command module of its group, named after it
(:mod:`harness.pipeline.commands`: ``harness golden X`` is :mod:`harness.pipeline.commands.golden`).
"""
