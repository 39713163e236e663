"""The data layer: the types every package shares and the files that hold them (blocks, OPs,
geometry, outputs, schemas, Parquet, JSON, errors). It imports nothing above it."""
