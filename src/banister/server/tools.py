"""Tool calls: offering the tools in the prompt, constraining the call, and reading it back.

A call is written as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (the Hermes /
Qwen convention that many open models are trained on):

- the prompt offers the tools through the chat template's ``tools`` argument when the template
  uses it, else as a short instruction appended to the system message (:func:`tool_prompt`);
- ``tool_choice`` "required" or a named function: the whole output is one call object, constrained
  by :func:`call_schema` (the name is one of the allowed ones, the arguments valid under that
  function's parameters), and :func:`parse_call` reads it;
- ``tool_choice`` "auto": the model writes free text, and once it opens ``<tool_call>`` the call
  is constrained by a structural tag (:func:`auto_grammar`); :func:`split_tool_calls` separates
  the text from the calls.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from banister.compiler import CompiledGrammar, Compiler
from banister.grammar.structural import Tag

CALL_BEGIN = "<tool_call>"
CALL_END = "</tool_call>"

_CALL_SPAN = re.compile(re.escape(CALL_BEGIN) + r"(.*?)" + re.escape(CALL_END), re.DOTALL)

#: Parameters of a function that declares none: an empty object.
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Function:
    """One function the model may call (from the request's ``tools``)."""

    name: str
    description: str | None
    parameters: Mapping[str, Any]
    strict: bool


@dataclass(frozen=True)
class ToolCall:
    """A call read from the output: ``arguments`` is the JSON text of the arguments object."""

    id: str
    name: str
    arguments: str

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


class ToolCallError(ValueError):
    """The output is not a call of an offered function."""


def template_takes_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template reads a ``tools`` variable (else the tools go in the system message)."""
    template = getattr(getattr(tokenizer, "tokenizer", tokenizer), "chat_template", None)
    return isinstance(template, str) and "tools" in template


def tool_prompt(
    messages: Sequence[Mapping[str, Any]], functions: Sequence[Function], template_tools: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(messages, chat-template arguments) that offer ``functions`` to the model.

    With ``template_tools`` the tools go to the template as ``tools=[...]`` in the OpenAI shape;
    otherwise an instruction listing them is added to the system message (one is created first
    when the conversation has none).
    """
    offered = [
        {"name": f.name, **({"description": f.description} if f.description else {}), "parameters": dict(f.parameters)}
        for f in functions
    ]
    out = [dict(m) for m in messages]
    if template_tools:
        return out, {"tools": [{"type": "function", "function": f} for f in offered]}
    instruction = (
        "You can call these functions (JSON Schema of their arguments):\n"
        + "\n".join(json.dumps(f) for f in offered)
        + f'\nTo call one, write {CALL_BEGIN}{{"name": <function name>, "arguments": <arguments object>}}{CALL_END}'
    )
    if out and out[0].get("role") in ("system", "developer"):
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{instruction}".lstrip()
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out, {}


def call_schema(functions: Sequence[Function]) -> dict[str, Any]:
    """JSON Schema of one call ``{"name": ..., "arguments": ...}`` to any of ``functions``."""
    variants = [
        {
            "type": "object",
            "properties": {"name": {"const": f.name}, "arguments": dict(f.parameters)},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for f in functions
    ]
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def new_call_id() -> str:
    """A fresh ``call_...`` id."""
    return "call_" + secrets.token_hex(12)


def parse_call(text: str, functions: Sequence[Function]) -> ToolCall:
    """The call in ``text`` (one call object, as :func:`call_schema` constrains it)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolCallError(f"the tool call is not complete JSON ({exc.msg} at offset {exc.pos})") from None
    names = {f.name for f in functions}
    if not isinstance(value, dict) or value.get("name") not in names or not isinstance(value.get("arguments"), dict):
        raise ToolCallError(f"the tool call does not name one of {sorted(names)} with an arguments object")
    return ToolCall(new_call_id(), value["name"], json.dumps(value["arguments"], ensure_ascii=False))


def split_tool_calls(text: str, functions: Sequence[Function]) -> tuple[str, list[ToolCall]]:
    """(the text outside the calls, the calls) of a ``tool_choice="auto"`` answer.

    A span that is not a complete call (cut by the token budget) stays in the text.
    """
    calls: list[ToolCall] = []
    kept: list[str] = []
    at = 0
    for span in _CALL_SPAN.finditer(text):
        try:
            calls.append(parse_call(span.group(1), functions))
        except ToolCallError:
            continue
        kept.append(text[at : span.start()])
        at = span.end()
    kept.append(text[at:])
    return "".join(kept), calls


def visible_text(text: str) -> str:
    """The part of an unfinished ``auto`` answer that is surely not a tool call: everything before
    ``<tool_call>`` and before a tail that could still become it (what a stream may send)."""
    cut = text.find(CALL_BEGIN)
    if cut >= 0:
        return text[:cut]
    for size in range(min(len(CALL_BEGIN) - 1, len(text)), 0, -1):
        if CALL_BEGIN.startswith(text[-size:]):
            return text[:-size]
    return text


def auto_grammar(compiler: Compiler, functions: Sequence[Function]) -> CompiledGrammar:
    """Free text in which every ``<tool_call>`` continues as a valid call of one of ``functions``.

    One structural tag per function: ``<tool_call>{"name": "<name>", "arguments": `` + JSON valid
    under its parameters + ``}</tool_call>``, triggered by ``<tool_call>``. The arguments are
    compiled strict (objects closed) when any function asks for it.
    """
    tags = [
        Tag(begin=f'{CALL_BEGIN}{{"name": {json.dumps(f.name)}, "arguments": ', end="}" + CALL_END,
            schema=dict(f.parameters))
        for f in functions
    ]
    options = {"whitespace": "pretty", **({"strict": True} if any(f.strict for f in functions) else {})}
    return compiler.structural_tag(tags, triggers=[CALL_BEGIN], json_options=options)
