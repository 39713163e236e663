"""Lanes: exact and fast lanes, the backends that run a request, and the reference model."""
