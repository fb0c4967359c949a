"""The ASGI app: OpenAI's /v1/models, /v1/completions and /v1/chat/completions over one engine.

:func:`create_app` wires the pieces: an :class:`~banister.server.runner.EngineRunner` drives the
engine on its own thread; each request is read (size-limited), validated and translated
(:mod:`banister.server.protocol`), submitted, and answered as one JSON object or as server-sent
events. A request ends early when its client disconnects or its time runs out: it is aborted
in the engine, which frees its place in the batch at the next step. /health answers without a
key; /metrics is Prometheus text.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import (
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from banister.engine.engine import Engine
from banister.engine.model import EngineError
from banister.engine.types import CompletionOutput, RequestOutput
from banister.errors import BanisterError, LimitError, SchemaError
from banister.server import protocol as p
from banister.server.runner import EngineRunner, Job, QueueFullError
from banister.server.settings import ServerSettings
from banister.server.tools import (
    ToolCall,
    ToolCallError,
    parse_call,
    split_tool_calls,
    template_takes_tools,
    visible_text,
)

log = logging.getLogger("banister.server")


class Metrics:
    """Counters behind /metrics (the engine's own come from :class:`~banister.engine.EngineStats`)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def count_usage(self, outputs: list[RequestOutput]) -> None:
        """Add the token counts of finished requests."""
        self.prompt_tokens += sum(o.usage.prompt_tokens for o in outputs)
        self.completion_tokens += sum(o.usage.completion_tokens for o in outputs)

    def render(self, engine: Engine, runner: EngineRunner) -> str:
        """Prometheus text exposition format, version 0.0.4."""
        stats = engine.stats
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
            lines.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])
            lines.extend(f"{name}{labels} {value}" for labels, value in samples)

        metric("banister_requests_total", "counter", "HTTP requests answered, by path and status.",
               [(f'{{path="{path}",status="{status}"}}', n) for (path, status), n in sorted(self.requests.items())])
        metric("banister_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
               [("", self.prompt_tokens)])
        metric("banister_completion_tokens_total", "counter", "Generated tokens of finished requests.",
               [("", self.completion_tokens)])
        metric("banister_requests_running", "gauge", "Sequences in the engine's batch.", [("", engine.num_running)])
        metric("banister_queue_depth", "gauge", "Requests waiting for a place in the batch.",
               [("", engine.num_waiting + runner.submitted)])
        metric("banister_requests_in_flight", "gauge", "Engine requests accepted and not finished.",
               [("", runner.in_flight)])
        metric("banister_engine_steps_total", "counter", "Engine steps.", [("", stats.steps)])
        metric("banister_generated_tokens_total", "counter", "Tokens sampled or forced by the engine.",
               [('{kind="sampled"}', stats.sampled_tokens), ('{kind="forced"}', stats.forced_tokens)])
        for name, value, what in (
            ("compile", stats.compile_seconds, "compiling grammars"),
            ("mask", stats.mask_seconds, "filling token bitmasks"),
            ("forward", stats.forward_seconds, "in the model's forward pass"),
            ("sample", stats.sample_seconds, "sampling"),
        ):
            metric(f"banister_{name}_seconds_total", "counter", f"Seconds spent {what}.", [("", round(value, 6))])
        return "\n".join(lines) + "\n"


# The paths /metrics counts by name (any other is "other", so a scan can't blow up the label set).
_PATHS = frozenset({"/v1/models", "/v1/chat/completions", "/v1/completions", "/health", "/metrics"})


class _Guard:
    """Pure ASGI middleware: the bearer key on every path but /health, and the request counter.

    (Pure ASGI rather than a ``BaseHTTPMiddleware`` so that streaming and disconnects pass through.)
    """

    def __init__(self, app: ASGIApp, api_key: str | None, metrics: Metrics) -> None:
        self.app = app
        self.expected = None if api_key is None else f"Bearer {api_key}".encode()
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        status = 500

        async def counting_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if self.expected is not None and path != "/health" and not self._authorized(scope):
                error = p.APIError(401, "Incorrect API key provided: send 'Authorization: Bearer <key>'",
                                   code="invalid_api_key")
                await JSONResponse(error.body(), status_code=401)(scope, receive, counting_send)
            else:
                await self.app(scope, receive, counting_send)
        finally:
            label = "/v1/models" if path.startswith("/v1/models/") else path
            self.metrics.requests[(label if label in _PATHS else "other", status)] += 1

    def _authorized(self, scope: Scope) -> bool:
        given = dict(scope["headers"]).get(b"authorization", b"")
        return self.expected is not None and hmac.compare_digest(given, self.expected)


def create_app(engine: Engine, settings: ServerSettings | None = None) -> FastAPI:
    """The server app over ``engine``; the engine thread starts and stops with the app's lifespan."""
    settings = settings or ServerSettings()
    runner = EngineRunner(engine, settings.max_queue, settings.compile_threads)
    metrics = Metrics()
    vocab = engine.vocabulary
    template_tools = template_takes_tools(engine.tokenizer)
    started = p.now()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runner.start()
        try:
            yield
        finally:
            runner.stop()

    app = FastAPI(title="banister", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.runner = runner
    app.state.metrics = metrics
    app.add_middleware(_Guard, api_key=settings.api_key, metrics=metrics)

    @app.exception_handler(p.APIError)
    async def api_error(_: Request, exc: p.APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        error = p.APIError(exc.status_code, str(exc.detail), type="invalid_request_error")
        return JSONResponse(error.body(), status_code=exc.status_code)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def get_metrics() -> Response:
        return PlainTextResponse(metrics.render(engine, runner), media_type="text/plain; version=0.0.4")

    def model_card() -> dict[str, Any]:
        return {"id": settings.model_name, "object": "model", "created": started, "owned_by": "banister"}

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def get_model(model_id: str) -> dict[str, Any]:
        _check_model(model_id, settings)
        return model_card()

    async def handle(request: Request, model: type[p.ChatCompletionRequest | p.CompletionRequest]) -> Response:
        """Read, validate and translate a request, then answer it (whole or streamed)."""
        deadline = asyncio.get_running_loop().time() + settings.request_timeout
        req = p.parse_request(model, await _read_json(request, settings.max_body_bytes))
        _check_model(req.model, settings)
        include_usage = bool(req.stream and req.stream_options and req.stream_options.include_usage)
        view: _View
        if isinstance(req, p.ChatCompletionRequest):
            plan = p.chat_plan(req, settings, vocab, template_tools)
            view = _ChatView(plan, settings.model_name, vocab, req.n, include_usage)
        else:
            plan = p.completion_plan(req, settings, vocab)
            view = _CompletionView(plan, settings.model_name, vocab, req.n, include_usage)
        return await _answer(request, plan, deadline, req.stream, view)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await handle(request, p.ChatCompletionRequest)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await handle(request, p.CompletionRequest)

    async def _answer(request: Request, plan: p.Plan, deadline: float, stream: bool, view: _View) -> Response:
        """Submit the plan; a JSON response, or an SSE stream once the engine has accepted it."""
        try:
            job = runner.submit(plan.requests)
        except QueueFullError as exc:
            raise p.APIError(429, str(exc), type="rate_limit_error", code="rate_limit_exceeded") from None
        try:
            await _until(runner, job, request, deadline, job.accepted())
        except _ClientGone:
            return Response(status_code=499)
        except Exception as exc:
            runner.cancel(job)
            raise _as_api_error(exc, plan) from exc
        if stream:
            return StreamingResponse(_stream(job, deadline, view, plan), media_type="text/event-stream",
                                     headers={"Cache-Control": "no-cache"})
        finals: dict[int, RequestOutput] = {}

        async def collect() -> None:
            async for index, out in job.outputs():
                if out.finished:
                    finals[index] = out

        try:
            await _until(runner, job, request, deadline, collect())
        except _ClientGone:
            return Response(status_code=499)  # nobody reads it; the engine has aborted the request
        except Exception as exc:
            raise _as_api_error(exc, plan) from exc
        finally:
            runner.cancel(job)
        outputs = [finals[i] for i in range(len(plan.requests))]
        metrics.count_usage(outputs)
        return JSONResponse(view.response(outputs))

    async def _stream(job: Job, deadline: float, view: _View, plan: p.Plan) -> AsyncIterator[str]:
        """SSE chunks; the request is aborted when the client goes away (the generator is closed)."""
        finals: dict[int, RequestOutput] = {}
        try:
            async with asyncio.timeout_at(deadline):
                async for index, out in job.outputs():
                    for chunk in view.chunks(index, out):
                        yield p.sse(chunk)
                    if out.finished:
                        finals[index] = out
            outputs = [finals[i] for i in range(len(plan.requests))]
            metrics.count_usage(outputs)
            if view.include_usage:
                yield p.sse(view.usage_chunk(outputs))
        except TimeoutError:
            yield p.sse(_timeout_error().body())
        except Exception as exc:  # noqa: BLE001 - headers are sent: the error goes in the stream
            yield p.sse(_as_api_error(exc, plan).body())
        finally:
            runner.cancel(job)
        yield p.sse("[DONE]")

    return app


def _check_model(name: str, settings: ServerSettings) -> None:
    if name != settings.model_name:
        raise p.APIError(404, f"The model {name!r} does not exist; this server serves {settings.model_name!r}",
                         param="model", code="model_not_found")


async def _read_json(request: Request, limit: int) -> Any:
    """The body as JSON, refused with 413 past ``limit`` bytes (checked while reading, not after)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdecimal() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(len(body), limit)
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise p.APIError(400, f"the request body is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise p.APIError(400, "the request body must be a JSON object")
    return value


def _too_large(size: int, limit: int) -> p.APIError:
    return p.APIError(413, f"the request body is {size} bytes or more; the server's max_body_bytes limit is {limit}",
                      code="limit_exceeded")


class _ClientGone(Exception):
    """The client disconnected before the answer was ready."""


async def _until(runner: EngineRunner, job: Job, request: Request, deadline: float, work: Awaitable[None]) -> None:
    """Await ``work`` unless the client disconnects (:class:`_ClientGone`) or the deadline passes (504)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        left = deadline - asyncio.get_running_loop().time()
        done, _ = await asyncio.wait({task, watcher}, timeout=max(left, 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if task in done:
        task.result()
        return
    runner.cancel(job)
    if watcher in done:
        raise _ClientGone()
    raise _timeout_error()


def _timeout_error() -> p.APIError:
    return p.APIError(504, "the request timed out (the server's request_timeout setting)", type="timeout_error",
                      code="timeout")


async def _disconnected(request: Request) -> None:
    """Return when the client disconnects (the body has been read, so only that message is left)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _as_api_error(exc: Exception, plan: p.Plan) -> p.APIError:
    """The error the client sees for an exception from the engine or the request's handling."""
    if isinstance(exc, p.APIError):
        return exc
    if isinstance(exc, SchemaError):
        return p.APIError(400, str(exc), param=plan.structured_param, code="invalid_schema")
    if isinstance(exc, LimitError):
        return p.APIError(400, str(exc), param=plan.structured_param, code="limit_exceeded")
    if isinstance(exc, EngineError):
        return p.APIError(400, str(exc), param=plan.prompt_param, code="invalid_prompt")
    if isinstance(exc, (BanisterError, ValueError)):  # RegexError, GrammarError, SamplingParamsError
        return p.APIError(400, str(exc), param=plan.structured_param, code="invalid_value")
    log.error("request failed", exc_info=exc)
    return p.APIError(500, f"internal error: {type(exc).__name__}: {exc}", type="server_error")


# -- turning engine outputs into OpenAI objects --------------------------------------------------------------


class _View(ABC):
    """How one endpoint shows outputs: a whole response, or stream chunks (base of the two below).

    A choice's index is ``prompt index * n + sample index``.
    """

    object_name: str
    chunk_name: str

    def __init__(self, plan: p.Plan, model: str, vocab: Any, n: int, include_usage: bool) -> None:
        self.plan = plan
        self.model = model
        self.vocab = vocab
        self.n = n
        self.include_usage = include_usage
        self.id = p.new_id("chatcmpl" if self.object_name == "chat.completion" else "cmpl")
        self.created = p.now()
        self._sent: dict[int, tuple[int, int]] = {}  # choice index -> (characters sent, logprobs sent)
        self._finished: set[int] = set()

    def _envelope(self, name: str) -> dict[str, Any]:
        return {"id": self.id, "object": name, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def response(self, outputs: list[RequestOutput]) -> dict[str, Any]:
        choices = [self.choice(i * self.n + s.index, s) for i, out in enumerate(outputs) for s in out.outputs]
        return {**self._envelope(self.object_name), "choices": choices, "usage": p.usage(outputs)}

    def chunks(self, index: int, out: RequestOutput) -> list[dict[str, Any]]:
        """The chunks for what changed in one engine request's samples since the last call."""
        chunks = []
        for sample in out.outputs:
            choice_index = index * self.n + sample.index
            if choice_index in self._finished:
                continue  # a request's report repeats the samples that finished earlier
            if sample.finished:
                self._finished.add(choice_index)
            choice = self.chunk_choice(choice_index, sample)
            if choice is not None:
                chunk = {**self._envelope(self.chunk_name), "choices": [choice]}
                if self.include_usage:
                    chunk["usage"] = None
                chunks.append(chunk)
        return chunks

    def usage_chunk(self, outputs: list[RequestOutput]) -> dict[str, Any]:
        return {**self._envelope(self.chunk_name), "choices": [], "usage": p.usage(outputs)}

    def _advance(self, index: int, text: str, sample: CompletionOutput) -> tuple[str, list[Any], bool]:
        """(new text, new logprobs, first time) of a choice, given the text it may show now."""
        first = index not in self._sent
        chars, lps = self._sent.get(index, (0, 0))
        logprobs = list(sample.logprobs or ())
        new_text = text[chars:] if len(text) >= chars else ""
        self._sent[index] = (max(chars, len(text)), len(logprobs))
        return new_text, logprobs[lps:], first

    @abstractmethod
    def choice(self, index: int, sample: CompletionOutput) -> dict[str, Any]:
        """One finished choice of the whole response."""

    @abstractmethod
    def chunk_choice(self, index: int, sample: CompletionOutput) -> dict[str, Any] | None:
        """A stream chunk's choice with what is new in ``sample``, or None when nothing is."""


class _ChatView(_View):
    object_name = "chat.completion"
    chunk_name = "chat.completion.chunk"

    def _message(self, sample: CompletionOutput) -> tuple[str | None, list[ToolCall], str | None]:
        """(content, tool calls, finish reason) of a finished sample, read as its tool mode says."""
        text, reason = sample.text, p.finish_reason(sample.finish_reason)
        mode = self.plan.tool_mode
        if mode in ("required", "named") and not sample.incomplete:
            try:
                call = parse_call(text, self.plan.functions)
            except ToolCallError:
                return text, [], reason
            # OpenAI answers a forced function with "stop", "required" with "tool_calls".
            return None, [call], "stop" if mode == "named" else "tool_calls"
        if mode == "auto":
            content, calls = split_tool_calls(text, self.plan.functions)
            if calls:
                return content if content.strip() else None, calls, "tool_calls"
        return text, [], reason

    def _logprobs(self, entries: list[Any]) -> dict[str, Any] | None:
        return {"content": p.chat_logprobs(self.vocab, entries)} if self.plan.logprobs else None

    def choice(self, index: int, sample: CompletionOutput) -> dict[str, Any]:
        content, calls, reason = self._message(sample)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [c.to_dict() for c in calls]
        return {"index": index, "message": message, "logprobs": self._logprobs(list(sample.logprobs or ())),
                "finish_reason": reason}

    def chunk_choice(self, index: int, sample: CompletionOutput) -> dict[str, Any] | None:
        mode = self.plan.tool_mode
        calls: list[ToolCall] = []
        reason = None
        if sample.finished:
            content, calls, reason = self._message(sample)
            shown = content or ""
        elif mode == "none":
            shown = sample.text
        elif mode == "auto":
            shown = visible_text(sample.text)
        else:
            shown = ""  # a forced call is sent whole when it is complete
        new_text, new_logprobs, first = self._advance(index, shown, sample)
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
        if new_text:
            delta["content"] = new_text
        if calls:
            delta["tool_calls"] = [{"index": i, **c.to_dict()} for i, c in enumerate(calls)]
        if not (first or new_text or new_logprobs or calls or reason):
            return None
        return {"index": index, "delta": delta, "logprobs": self._logprobs(new_logprobs) if new_logprobs else None,
                "finish_reason": reason}


class _CompletionView(_View):
    object_name = "text_completion"
    chunk_name = "text_completion"

    def _logprobs(self, entries: list[Any], offset: int) -> dict[str, Any] | None:
        return p.completion_logprobs(self.vocab, entries, offset) if self.plan.logprobs else None

    def choice(self, index: int, sample: CompletionOutput) -> dict[str, Any]:
        return {"index": index, "text": sample.text, "logprobs": self._logprobs(list(sample.logprobs or ()), 0),
                "finish_reason": p.finish_reason(sample.finish_reason)}

    def chunk_choice(self, index: int, sample: CompletionOutput) -> dict[str, Any] | None:
        offset = self._sent.get(index, (0, 0))[0]
        new_text, new_logprobs, _ = self._advance(index, sample.text, sample)
        if not (new_text or new_logprobs or sample.finished):
            return None
        return {"index": index, "text": new_text,
                "logprobs": self._logprobs(new_logprobs, offset) if new_logprobs else None,
                "finish_reason": p.finish_reason(sample.finish_reason)}

