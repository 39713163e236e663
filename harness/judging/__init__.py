"""Judging outputs: the judges per OP, one lane's scoring, golden reproduction, statistics."""
