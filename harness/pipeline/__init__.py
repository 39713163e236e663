"""Composition: the only code that wires the core, the lanes, the golden store and the reports together.

Every command of the CLI is one function of :mod:`harness.pipeline.commands`.
"""
