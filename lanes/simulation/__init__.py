"""Simulation: models that behave like an accelerator (device time apart from host time)."""
