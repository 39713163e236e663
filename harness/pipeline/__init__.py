"""Composition: the only code that wires the core, the lanes, the golden store and the reports together.

Every command of the CLI is one function of :mod:`harness.pipeline.commands` (those that build the model or
run the lanes) or :mod:`harness.pipeline.gate_commands` (those that judge, promote and render files).
"""
