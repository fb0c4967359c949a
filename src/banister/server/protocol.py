"""The OpenAI wire format: request models, their translation into engine requests, and responses.

Requests are validated with pydantic (unknown fields are refused, so a setting is never silently
ignored) and then translated: :func:`chat_plan` and :func:`completion_plan` turn a request into
:class:`~banister.server.runner.EngineRequest` objects plus what the response needs (tool mode,
the functions offered). Every problem raises :class:`APIError`, which the app answers in OpenAI's
error shape ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from banister.engine.types import FinishReason, RequestOptions, RequestOutput
from banister.sampling import SamplingParams, SamplingParamsError, TokenLogprobs
from banister.server.runner import EngineRequest
from banister.server.settings import ServerSettings
from banister.server.tools import (
    CALL_BEGIN,
    CALL_END,
    NO_PARAMETERS,
    Function,
    auto_grammar,
    call_schema,
    tool_prompt,
)
from banister.vocab import Vocabulary


class APIError(Exception):
    """An error answered in OpenAI's shape, with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


# -- request models ------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class FunctionCallIn(BaseModel):
    name: str
    arguments: str


class ToolCallIn(BaseModel):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCallIn


class ChatMessage(BaseModel):
    """One message; fields the server does not use (``refusal``, ``annotations``...) are ignored."""

    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None


class FunctionDefinition(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDefinition(_Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class JsonSchemaFormat(_Strict):
    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputs(_Strict):
    """vLLM's ``structured_outputs``: at most one of these."""

    json_: dict[str, Any] | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None


class StreamOptions(_Strict):
    include_usage: bool = False


class _Common(_Strict):
    """Fields both endpoints share (OpenAI's, then vLLM's extras)."""

    model: str
    n: int = 1
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # vLLM extras
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None
    structured_outputs: StructuredOutputs | None = None
    # banister's own: the syntax of a grammar (never guessed from its text)
    grammar_syntax: Literal["gbnf", "lark"] = "gbnf"


class ChatCompletionRequest(_Common):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    response_format: ResponseFormat | None = None
    tools: list[ToolDefinition] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] = Field(min_length=1)
    logprobs: int | None = None
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None


def parse_request(model: type[_Common], body: Any) -> Any:
    """Validate a JSON body into ``model``; a 400 naming the first bad field otherwise."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise APIError(400, f"{param}: {first['msg']}" if param else first["msg"], param=param) from None


# -- translation ----------------------------------------------------------------------------------------


ToolMode = Literal["none", "auto", "required", "named"]


@dataclass(frozen=True)
class Plan:
    """The engine requests of one HTTP request, and how to turn their outputs into a response."""

    requests: list[EngineRequest]
    tool_mode: ToolMode = "none"
    functions: tuple[Function, ...] = ()
    logprobs: bool = False
    structured_param: str | None = None
    prompt_param: str = "messages"


@dataclass(frozen=True)
class _Structured:
    fields: dict[str, Any] = field(default_factory=dict)
    param: str | None = None
    json_options: dict[str, Any] = field(default_factory=dict)


def chat_plan(req: ChatCompletionRequest, settings: ServerSettings, vocab: Vocabulary, template_tools: bool) -> Plan:
    """The engine request of a chat completion (messages, sampling, structure, tools)."""
    if req.top_logprobs is not None and not req.logprobs:
        raise APIError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
    structured = _structured(req, response_format=req.response_format, settings=settings)
    mode, functions = _tool_mode(req)
    messages = _chat_messages(req.messages)
    template_kwargs: dict[str, Any] = {}
    grammar = None
    if mode != "none":
        if structured.fields:
            raise APIError(400, f"{structured.param} cannot be combined with tools (tool_choice {mode!r}); "
                           "use tool_choice 'none' for a structured answer", param=structured.param)
        _check_size(sum(_spec_bytes(f.parameters) for f in functions), "tools", settings)
        messages, template_kwargs = tool_prompt(messages, functions, template_tools)
        if mode == "auto":
            grammar = functools.partial(auto_grammar, functions=functions)
            structured = _Structured(param="tools")
        else:
            strict = {"strict": True} if any(f.strict for f in functions) else {}
            structured = _Structured({"json_schema": call_schema(functions)}, "tools", strict)
    budget_param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
    budget = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    top = (req.top_logprobs or 0) if req.logprobs else None
    params = _sampling(req, settings, vocab, structured, budget, budget_param, top, "top_logprobs")
    options = RequestOptions(grammar_syntax=req.grammar_syntax, json_options=structured.json_options)
    request = EngineRequest(messages, params, options, template_kwargs, grammar)
    return Plan([request], mode, functions, req.logprobs, structured.param)


def completion_plan(req: CompletionRequest, settings: ServerSettings, vocab: Vocabulary) -> Plan:
    """The engine requests of a completion: one per prompt (a list of strings), or one for token ids."""
    if req.echo:
        raise APIError(400, "echo is not supported", param="echo")
    if req.suffix is not None:
        raise APIError(400, "suffix is not supported", param="suffix")
    if req.best_of is not None and req.best_of != req.n:
        raise APIError(400, "best_of must equal n (best_of is not supported)", param="best_of")
    structured = _structured(req, response_format=None, settings=settings)
    params = _sampling(req, settings, vocab, structured, req.max_tokens, "max_tokens", req.logprobs, "logprobs")
    options = RequestOptions(grammar_syntax=req.grammar_syntax, json_options=structured.json_options)
    prompt = req.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        prompts: list[Any] = [prompt]
    else:
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
    requests = [EngineRequest(p, params, options) for p in prompts]
    return Plan(requests, logprobs=req.logprobs is not None, structured_param=structured.param, prompt_param="prompt")


def _chat_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """Plain ``{"role", "content"}`` messages for the chat template; earlier tool calls as text."""
    out = []
    for m in messages:
        content = m.content if isinstance(m.content, str) or m.content is None else "".join(p.text for p in m.content)
        content = content or ""
        for call in m.tool_calls or ():
            try:
                arguments = json.loads(call.function.arguments)
            except json.JSONDecodeError:
                raise APIError(400, "a tool call's arguments are not JSON", param="messages") from None
            content += CALL_BEGIN + json.dumps({"name": call.function.name, "arguments": arguments}) + CALL_END
        out.append({"role": "system" if m.role == "developer" else m.role, "content": content})
    return out


def _tool_mode(req: ChatCompletionRequest) -> tuple[ToolMode, tuple[Function, ...]]:
    """The tool mode and the functions the model may call in it."""
    choice = req.tool_choice
    if not req.tools:
        if choice not in (None, "none"):
            raise APIError(400, "tool_choice needs tools", param="tool_choice")
        return "none", ()
    functions = tuple(
        Function(t.function.name, t.function.description, t.function.parameters or NO_PARAMETERS,
                 bool(t.function.strict))
        for t in req.tools
    )
    names = [f.name for f in functions]
    if len(set(names)) != len(names):
        raise APIError(400, "tools: function names must be unique", param="tools")
    if isinstance(choice, NamedToolChoice):
        chosen = [f for f in functions if f.name == choice.function.name]
        if not chosen:
            raise APIError(400, f"tool_choice names {choice.function.name!r}, which is not among the tools {names}",
                           param="tool_choice")
        return "named", tuple(chosen)
    if choice == "none":
        return "none", ()
    return choice or "auto", functions


def _structured(req: _Common, response_format: ResponseFormat | None, settings: ServerSettings) -> _Structured:
    """The one structured-output field of a request (response_format, guided_*, structured_outputs),
    checked against ``max_schema_bytes``."""
    found: list[_Structured] = []
    if response_format is not None and response_format.type != "text":
        if response_format.type == "json_object":
            found.append(_Structured({"json_object": True}, "response_format"))
        else:
            spec = response_format.json_schema
            if spec is None or spec.schema_ is None:
                raise APIError(400, "response_format json_schema needs json_schema.schema",
                               param="response_format.json_schema")
            found.append(_Structured({"json_schema": spec.schema_}, "response_format.json_schema.schema",
                                     {"strict": True} if spec.strict else {}))
    guided = {"guided_json": "json_schema", "guided_regex": "regex", "guided_choice": "choice",
              "guided_grammar": "grammar"}
    for name, target in guided.items():
        value = getattr(req, name)
        if value is not None:
            found.append(_Structured({target: value}, name))
    so = req.structured_outputs
    if so is not None:
        for name, target in (("json_", "json_schema"), ("regex", "regex"), ("choice", "choice"), ("grammar", "grammar")):
            value = getattr(so, name)
            if value is not None:
                found.append(_Structured({target: value}, f"structured_outputs.{name.rstrip('_')}"))
        if so.json_object:
            found.append(_Structured({"json_object": True}, "structured_outputs.json_object"))
    if len(found) > 1:
        raise APIError(400, f"at most one structured output may be given, got {[s.param for s in found]}",
                       param=found[1].param)
    if not found:
        return _Structured()
    for value in found[0].fields.values():
        if value is not True:
            _check_size(_spec_bytes(value), found[0].param or "", settings)
    return found[0]


def _spec_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return sum(len(v.encode()) for v in value)
    return len(json.dumps(value, separators=(",", ":")).encode())


def _check_size(size: int, param: str, settings: ServerSettings) -> None:
    if size > settings.max_schema_bytes:
        raise APIError(400, f"{param} is {size} bytes; the server's max_schema_bytes limit is "
                       f"{settings.max_schema_bytes}", param=param, code="limit_exceeded")


def _sampling(
    req: _Common,
    settings: ServerSettings,
    vocab: Vocabulary,
    structured: _Structured,
    max_tokens: int | None,
    budget_param: str,
    logprobs: int | None,
    logprobs_param: str,
) -> SamplingParams:
    """The request's SamplingParams; a bad value is a 400 naming the request's own field."""
    if req.n > settings.max_n:
        raise APIError(400, f"n is {req.n}; the server's max_n limit is {settings.max_n}", param="n",
                       code="limit_exceeded")
    if max_tokens is not None and max_tokens > settings.max_tokens:
        raise APIError(400, f"{budget_param} is {max_tokens}; the server's max_tokens limit is {settings.max_tokens}",
                       param=budget_param, code="limit_exceeded")
    if req.logit_bias:
        bad = [k for k in req.logit_bias if not (k.isdecimal() and int(k) < vocab.vocab_size)]
        if bad:
            raise APIError(400, f"logit_bias: {bad[0]!r} is not a token id below {vocab.vocab_size}",
                           param="logit_bias")
    given: dict[str, Any] = {
        "n": req.n,
        "temperature": req.temperature,
        "top_p": req.top_p,
        "presence_penalty": req.presence_penalty,
        "frequency_penalty": req.frequency_penalty,
        "logit_bias": req.logit_bias,
        "seed": req.seed,
        "stop": req.stop,
        "top_k": req.top_k,
        "min_p": req.min_p,
        "repetition_penalty": req.repetition_penalty,
        "logprobs": logprobs,
    }
    kwargs = {k: v for k, v in given.items() if v is not None}
    kwargs["max_tokens"] = settings.max_tokens if max_tokens is None else max_tokens
    renamed = {"max_tokens": budget_param, "logprobs": logprobs_param}
    renamed.update({name: structured.param for name in structured.fields if structured.param})
    try:
        return SamplingParams(**kwargs, **structured.fields)
    except SamplingParamsError as exc:
        param = renamed.get(exc.field, exc.field)
        message = str(exc)
        if param != exc.field:
            message = f"{param}: {message[len(exc.field) + 2 :]}"
        raise APIError(400, message, param=param, code="invalid_value") from None


# -- responses ------------------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    """An OpenAI-style object id, e.g. ``chatcmpl-...``."""
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    """``created``: seconds since the epoch."""
    return int(time.time())


def finish_reason(reason: FinishReason | None) -> str | None:
    """OpenAI's finish reason: ``stop`` for a stop string, EOS or a finished grammar."""
    if reason in ("stop", "eos", "grammar"):
        return "stop"
    return reason


def usage(outputs: Sequence[RequestOutput]) -> dict[str, int]:
    """The ``usage`` object of one or more engine requests."""
    prompt = sum(o.usage.prompt_tokens for o in outputs)
    completion = sum(o.usage.completion_tokens for o in outputs)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _token_text(vocab: Vocabulary, token_id: int) -> tuple[str, list[int]]:
    data = vocab.token_bytes(token_id)
    return data.decode("utf-8", errors="replace"), list(data)


def chat_logprobs(vocab: Vocabulary, entries: Sequence[TokenLogprobs]) -> list[dict[str, Any]]:
    """Chat ``logprobs.content`` entries: token, logprob, bytes and top_logprobs per token."""
    out = []
    for e in entries:
        text, data = _token_text(vocab, e.token_id)
        top = []
        for token_id, logprob in e.top:
            alt_text, alt_data = _token_text(vocab, token_id)
            top.append({"token": alt_text, "logprob": logprob, "bytes": alt_data})
        out.append({"token": text, "logprob": e.logprob, "bytes": data, "top_logprobs": top})
    return out


def completion_logprobs(vocab: Vocabulary, entries: Sequence[TokenLogprobs], offset: int = 0) -> dict[str, Any]:
    """The legacy completions ``logprobs`` object (tokens, token_logprobs, top_logprobs, text_offset)."""
    tokens, values, tops, offsets = [], [], [], []
    for e in entries:
        text, _ = _token_text(vocab, e.token_id)
        tokens.append(text)
        values.append(e.logprob)
        tops.append({_token_text(vocab, t)[0]: lp for t, lp in e.top})
        offsets.append(offset)
        offset += len(text)
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets}


def error_event(error: APIError) -> str:
    """An SSE event carrying an error (the OpenAI client raises it)."""
    return sse(error.body())


def sse(data: Mapping[str, Any] | str) -> str:
    """One server-sent event: ``data: <json>`` and a blank line."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"
