"""The validity experiment on the real default model (SmolLM2-135M-Instruct), not the toy one."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from banister.engine import Engine
from banister.engine.demo import DEMO_SCHEMA
from banister.lab.experiments import CATEGORIES, classify, outcome_bars, schema_check
from banister.lab.result import Result, new_figure
from banister.lab.sampling import Answer
from banister.sampling import SamplingParams

#: Schema name -> (schema, tasks): a record, a tool call and a nested order, as users write them.
MODEL_TASKS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "person": (
        DEMO_SCHEMA,
        ("Describe a fictional data engineer.", "Describe a fictional frontend developer called Mia."),
    ),
    "tool call": (
        {
            "type": "object",
            "properties": {
                "name": {"const": "get_weather"},
                "arguments": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "minLength": 1, "maxLength": 40},
                        "unit": {"enum": ["celsius", "fahrenheit"]},
                    },
                    "required": ["city", "unit"],
                    "additionalProperties": False,
                },
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        },
        ("Call get_weather for Paris in celsius.", "What's the weather in Boston? Use fahrenheit."),
    ),
    "nested order": (
        {
            "type": "object",
            "properties": {
                "customer": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 40}, "vip": {"type": "boolean"}},
                    "required": ["name", "vip"],
                    "additionalProperties": False,
                },
                "items": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "type": "object",
                        "properties": {
                            "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                            "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                        },
                        "required": ["sku", "quantity"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["customer", "items"],
            "additionalProperties": False,
        },
        ("Alice (a VIP) orders two ABC-123 and one XYZ-999.", "Bob orders 5 of item QRS-042."),
    ),
}


def _chat(schema: dict[str, Any], task: str) -> list[dict[str, str]]:
    text = f"{task}\nAnswer with one JSON object, and nothing else, that matches this JSON Schema:\n{json.dumps(schema)}"
    return [{"role": "user", "content": text}]


def default_model_validity(
    engine: Engine | None = None, *, samples: int = 4, max_tokens: int = 160, temperature: float = 0.7, seed: int = 0
) -> Result:
    """Sampled answers of the default model per schema and task, with the schema enforced and without.

    Each of ``samples`` seeds draws one answer per task in both modes (the same seed in both); answers
    are sorted into valid, chatter, broken inside and cut off, as on the toy model. ``engine``
    defaults to ``Engine.from_pretrained("default")`` (loads the model: seconds when cached).
    """
    engine = engine or Engine.from_pretrained("default")
    jobs = [(name, schema, task, s) for name, (schema, tasks) in MODEL_TASKS.items() for task in tasks
            for s in range(samples)]  # fmt: skip
    prompts = [_chat(schema, task) for _, schema, task, _ in jobs]
    counts: dict[tuple[str, str], Counter[str]] = {}
    examples: dict[tuple[str, str], dict[str, str]] = {}
    for mode in ("unconstrained", "constrained"):
        params = [
            SamplingParams(temperature=temperature, seed=seed + s, max_tokens=max_tokens,
                           json_schema=schema if mode == "constrained" else None)
            for _, schema, _, s in jobs
        ]  # fmt: skip
        for (name, schema, _, _), out in zip(jobs, engine.generate(prompts, params), strict=True):
            completion = out.outputs[0]
            answer = Answer(completion.text, completion.finish_reason != "length" and not completion.incomplete)
            kind = classify(answer, schema_check(schema))
            counts.setdefault((name, mode), Counter())[kind] += 1
            examples.setdefault((name, mode), {}).setdefault(kind, completion.text)
    n = len(jobs) // len(MODEL_TASKS)
    return Result(
        "default_model_validity",
        "The same comparison on a real model",
        "SmolLM2-135M-Instruct, asked for JSON matching a schema shown in the prompt, sampled at temperature "
        f"{temperature}: unconstrained it often answers in prose or breaks the schema; with the schema enforced "
        "every finished answer is valid, and only the token budget can cut one off.",
        {"n": n, "counts": {k: dict(v) for k, v in counts.items()}, "examples": examples},
        ("schema", "mode", *CATEGORIES),
        [(name, mode, *(c[cat] for cat in CATEGORIES)) for (name, mode), c in counts.items()],
        outcome_bars(counts, n, f"share of {n} answers per schema (SmolLM2-135M-Instruct)"),
    )
