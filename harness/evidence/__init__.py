"""Kinds of evidence beside the plain lane, the one rule that judges them, and why a shape is refused."""
