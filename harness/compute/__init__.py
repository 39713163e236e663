"""The arithmetic of two answers: row differences, ULP distances, the top two classes, cosine and relative L2
(compiled loops with a numpy fallback)."""
