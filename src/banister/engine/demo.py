"""`banister demo`: the same prompt with and without a JSON Schema, side by side, checked by jsonschema."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from typing import Any, TextIO

from banister.engine.engine import Engine
from banister.sampling import SamplingParams

DEMO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 18, "maximum": 99},
        "role": {"enum": ["backend", "frontend", "data", "devops"]},
        "skills": {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 1, "maxItems": 3},
    },
    "required": ["name", "age", "role", "skills"],
    "additionalProperties": False,
}
"""The schema the demo (and the README) shows."""

DEMO_PROMPT = (
    "Describe a fictional software engineer as a JSON object with their name, age, role "
    "(backend, frontend, data or devops) and up to three skills."
)
"""The user message the demo sends through the model's chat template."""


@dataclass(frozen=True)
class DemoResult:
    """Both answers and what jsonschema says about each (``error`` is None when valid)."""

    constrained: str
    constrained_error: str | None
    unconstrained: str
    unconstrained_error: str | None


def check(text: str, schema: dict[str, Any]) -> str | None:
    """None when ``text`` is one JSON value valid under ``schema``, else why not (one line)."""
    import jsonschema

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top level"
        return f"JSON, but invalid at {where}: {exc.message}"
    return None


def run_demo(engine: Engine, *, max_tokens: int = 160, out: TextIO | None = None) -> DemoResult:
    """Generate for :data:`DEMO_PROMPT` greedily, with :data:`DEMO_SCHEMA` and without, in one batch.

    Prints the two answers side by side with jsonschema's verdict on each to ``out`` (when given)
    and returns them.
    """
    messages = [{"role": "user", "content": DEMO_PROMPT}]
    constrained, free = engine.generate(
        [messages, messages],
        [
            SamplingParams(temperature=0.0, max_tokens=max_tokens, json_schema=DEMO_SCHEMA),
            SamplingParams(temperature=0.0, max_tokens=max_tokens),
        ],
    )
    result = DemoResult(
        constrained.text, check(constrained.text, DEMO_SCHEMA), free.text, check(free.text, DEMO_SCHEMA)
    )
    if out is not None:
        _print(result, out)
    return result


def _print(result: DemoResult, out: TextIO, width: int = 48) -> None:
    left = _wrap(result.constrained, width)
    right = _wrap(result.unconstrained, width)
    rule = "-" * width
    rows = [("with banister (schema enforced)", "without constraints"), (rule, rule)]
    rows += [(left[i] if i < len(left) else "", right[i] if i < len(right) else "") for i in range(max(len(left), len(right)))]
    print(f"prompt: {DEMO_PROMPT}\n", file=out)
    for a, b in rows:
        print(f"{a:<{width}} | {b}".rstrip(), file=out)
    print(file=out)
    print("jsonschema says:", file=out)
    for label, error in (("  with banister", result.constrained_error), ("  without", result.unconstrained_error)):
        print(f"{label}: {'valid' if error is None else error}", file=out)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(line, width, replace_whitespace=False, drop_whitespace=False) or [""])
    return lines
