"""The Parquet golden store: the exact lane's outputs, with everything that produced them."""
