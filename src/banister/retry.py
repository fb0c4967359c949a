"""Validate and retry: parse the answer, check it against a JSON Schema, and on failure ask again
with the validator's message, for a bounded number of attempts.

Needs ``jsonschema`` (imported on first use). This is the alternative to constrained decoding when the decoder can't be changed; it costs a whole
call per failure (``1 / p`` calls on average for a model valid with probability ``p``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Attempt", "RetryResult", "feedback_prompt", "retry", "validate_answer"]


@dataclass(frozen=True)
class Attempt:
    """One call: the prompt sent, the text received, and the error (None when valid)."""

    prompt: str
    text: str
    error: str | None


@dataclass(frozen=True)
class RetryResult:
    """The outcome of :func:`retry`: ``value`` is the parsed answer, or None when every attempt failed."""

    value: Any
    ok: bool
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def num_attempts(self) -> int:
        return len(self.attempts)


def validate_answer(text: str, schema: Mapping[str, Any] | bool) -> tuple[Any, str | None]:
    """Parse ``text`` as JSON and validate it: ``(value, None)`` when valid, else ``(None, message)``."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} at character {exc.pos}"
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return value, None
    where = "/".join(str(p) for p in error.absolute_path) or "the top level"
    return None, f"schema violation at {where}: {error.message}"


def feedback_prompt(prompt: str, text: str, error: str) -> str:
    """The prompt of the next attempt: the original one, the rejected answer, and why it was rejected."""
    return f"{prompt}\nYour previous answer was:\n{text}\nIt was rejected: {error}\nAnswer again with the JSON only.\n"


def retry(
    generate: Callable[[str], str],
    schema: Mapping[str, Any] | bool,
    prompt: str,
    *,
    max_attempts: int = 3,
) -> RetryResult:
    """Call ``generate(prompt)`` until its answer parses and fits ``schema``, at most ``max_attempts`` times.

    After a failure the next prompt quotes the rejected answer and the validator's message
    (:func:`feedback_prompt`), so the model can correct itself.
    """
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, got {max_attempts!r}")
    import jsonschema  # type: ignore[import-untyped]

    jsonschema.Draft202012Validator.check_schema(schema)
    attempts: list[Attempt] = []
    current = prompt
    for _ in range(max_attempts):
        text = generate(current)
        value, error = validate_answer(text, schema)
        attempts.append(Attempt(current, text, error))
        if error is None:
            return RetryResult(value, True, attempts)
        current = feedback_prompt(prompt, text, error)
    return RetryResult(None, False, attempts)
