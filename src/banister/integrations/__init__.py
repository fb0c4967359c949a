"""Banister inside other engines: a transformers logits processor and a vLLM-shaped backend."""
