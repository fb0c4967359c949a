"""Benchmarks against the peer engines (llguidance, XGrammar, outlines-core), run in one process."""
