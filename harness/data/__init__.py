"""The data layer: the types every package shares and the files that hold them (blocks, OPs,
geometry, outputs, schemas, Parquet, JSON). It imports nothing above it, and stands on the ground
floor (harness.base: errors, file writes, output sets, workers)."""
