"""A probe model: see ../../probe.py (the repository root is not a model, so Triton skips the file)."""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # a __pycache__ folder at the repository root would be listed as a model
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from probe import TritonPythonModel  # noqa: E402,F401
