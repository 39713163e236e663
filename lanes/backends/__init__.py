"""Backends: where a request runs (in process or on a Triton server) and under which numeric settings."""
