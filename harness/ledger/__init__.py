"""The ledger: promotion, its store, the history of figures, margins, and the check of a score."""
