"""Exact/fast lane accuracy harness: the core (blocks, packing, OPs, scoring, promotion, CLI)."""

__version__ = "0.1.0"
