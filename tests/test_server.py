"""The OpenAI-compatible server on the toy model, through a real socket and the official openai client.

The toy model (banister.engine.toy) copies a reference answer with noise, so these tests are fast
and exercise the server itself: wire format, structured outputs, tools, streaming, limits, errors,
keys, the queue, disconnects and metrics. tests/test_server_real.py runs the must-show cases on
the real default model.
"""

import asyncio
import gc
import json
import re
import sys
import threading
import time
import weakref
from contextlib import contextmanager

import httpx
import jsonschema
import openai
import pytest
from test_collector import Cycle, settled

from banister import Matcher
from banister.engine import Engine, RequestOptions, ToyModel, ToyTokenizer
from banister.sampling import SamplingParams
from banister.server.app import create_app
from banister.server.runner import EngineRequest, EngineRunner
from banister.server.settings import ServerSettings
from banister.server.testing import serve_in_thread
from banister.server.tools import (
    Function,
    auto_grammar,
    split_tool_calls,
    template_takes_tools,
    tool_prompt,
    visible_text,
)

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["C", "F"]}},
    "required": ["city", "unit"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                      "parameters": WEATHER, "strict": True}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
CHAT = [{"role": "user", "content": "Give me a person."}]
BAD_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "string", "pattern": "(?<=a)b"}}}}}]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def toy_engine(model: ToyModel | None = None, **kwargs) -> Engine:
    model = model or ToyModel()
    return Engine(model, model.tokenizer, **kwargs)


class SlowToy(ToyModel):
    """The toy model with a pause in every forward pass: requests stay in flight long enough to test
    queues, timeouts and disconnects."""

    def forward(self, feeds):
        time.sleep(0.02)
        return super().forward(feeds)


@pytest.fixture(scope="module")
def server():
    engine = toy_engine()
    with serve_in_thread(create_app(engine, ServerSettings(model_name="toy", max_schema_bytes=4000))) as url:
        yield url, engine


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server[0] + "/v1", api_key="unused", max_retries=0)


def ask(client, **kwargs):
    kwargs.setdefault("model", "toy")
    kwargs.setdefault("messages", CHAT)
    kwargs.setdefault("max_tokens", 60)
    return client.chat.completions.create(**kwargs)


# -- models, health, metrics ---------------------------------------------------------------------------------


def test_models_and_health(server, client):
    assert [m.id for m in client.models.list()] == ["toy"]
    assert client.models.retrieve("toy").id == "toy"
    assert httpx.get(server[0] + "/health").json() == {"status": "ok"}
    with pytest.raises(openai.NotFoundError, match="serves 'toy'"):
        ask(client, model="gpt-4o")


def test_metrics_are_prometheus_text(server, client):
    ask(client, seed=1)
    text = httpx.get(server[0] + "/metrics").text
    sample = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+-]+$')
    values = {}
    for line in text.splitlines():
        if line.startswith("# "):
            assert re.match(r"^# (HELP|TYPE) [a-z_]+ ", line), line
            continue
        assert sample.match(line), line
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    assert values['banister_requests_total{path="/v1/chat/completions",status="200"}'] >= 1
    assert values["banister_completion_tokens_total"] > 0
    for name in ("banister_queue_depth", "banister_compile_seconds_total", "banister_mask_seconds_total"):
        assert name in values


# -- structured outputs ----------------------------------------------------------------------------------


def test_json_schema_strict_validates(client):
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
    for seed in range(3):
        r = ask(client, response_format=fmt, seed=seed, temperature=1.0)
        value = json.loads(r.choices[0].message.content)
        jsonschema.validate(value, PERSON)
        assert set(value) == {"name", "age"}  # strict: no other keys
        assert r.choices[0].finish_reason == "stop"


def test_json_object_parses(client):
    r = ask(client, response_format={"type": "json_object"}, seed=3)
    json.loads(r.choices[0].message.content)


@pytest.mark.parametrize(
    ("extra", "check"),
    [
        ({"guided_json": PERSON}, lambda t: jsonschema.validate(json.loads(t), PERSON)),
        ({"guided_regex": r"[A-Z][a-z]{2,5}"}, lambda t: re.fullmatch(r"[A-Z][a-z]{2,5}", t) or pytest.fail(t)),
        ({"guided_choice": ["yes", "no"]}, lambda t: t in ("yes", "no") or pytest.fail(t)),
        ({"guided_grammar": 'root ::= "A" [0-9]+'}, lambda t: re.fullmatch(r"A[0-9]+", t) or pytest.fail(t)),
        ({"structured_outputs": {"json": PERSON}}, lambda t: jsonschema.validate(json.loads(t), PERSON)),
        ({"structured_outputs": {"choice": ["red", "blue"]}}, lambda t: t in ("red", "blue") or pytest.fail(t)),
    ],
)
def test_vllm_structured_extras(client, extra, check):
    r = ask(client, extra_body=extra, seed=0, max_tokens=30)
    check(r.choices[0].message.content)


def test_bad_schema_is_a_400_naming_keyword_and_pointer(client):
    bad = {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?<=a)b"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "bad", "schema": bad}}
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, response_format=fmt)
    error = info.value.body
    assert "lookbehind" in error["message"] and "'pattern'" in error["message"] and "#/properties/x" in error["message"]
    assert error["param"] == "response_format.json_schema.schema"
    assert error["code"] == "invalid_schema"


def test_bad_schema_in_a_stream_is_still_a_400(client):
    with pytest.raises(openai.BadRequestError, match="unknown type"):
        ask(client, stream=True, extra_body={"guided_json": {"type": "strin"}})


@pytest.mark.parametrize(
    ("kwargs", "param", "text"),
    [
        ({"temperature": -1}, "temperature", "temperature: must be in"),
        ({"top_logprobs": 3}, "top_logprobs", "needs logprobs"),
        ({"logprobs": True, "top_logprobs": 50}, "top_logprobs", "top_logprobs: must be <= 20"),
        ({"max_tokens": 10**6}, "max_tokens", "max_tokens limit"),
        ({"max_completion_tokens": 0}, "max_completion_tokens", "max_completion_tokens: must be >= 1"),
        ({"logit_bias": {"999999": 5}}, "logit_bias", "not a token id"),
        ({"n": 100}, "n", "max_n limit"),
        ({"extra_body": {"guided_regex": "a", "guided_choice": ["a"]}}, "guided_choice", "at most one"),
        ({"extra_body": {"frobnicate": 1}}, "frobnicate", "Extra inputs are not permitted"),
        ({"tool_choice": "required"}, "tool_choice", "needs tools"),
        ({"extra_body": {"guided_regex": "a" * 5000}}, "guided_regex", "max_schema_bytes limit is 4000"),
        ({"tools": BAD_TOOLS, "tool_choice": "auto"}, "tools", "lookbehind"),
        ({"tools": BAD_TOOLS, "tool_choice": "required"}, "tools", "lookbehind"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice",
         "not among the tools"),
        ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format", "cannot be combined"),
    ],
)
def test_invalid_requests_are_400s_naming_the_field(client, kwargs, param, text):
    with pytest.raises(openai.BadRequestError) as info:
        ask(client, **kwargs)
    assert info.value.body["param"] == param
    assert text in info.value.body["message"]


def test_a_prompt_the_model_cannot_take_is_a_400(client):
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="toy", prompt="caf\u00e9", max_tokens=5)  # no toy token for the accent
    assert info.value.body["param"] == "prompt" and "no token" in info.value.body["message"]


def test_oversized_body_is_413(server):
    with serve_in_thread(create_app(server[1], ServerSettings(model_name="toy", max_body_bytes=1000))) as url:
        body = {"model": "toy", "messages": [{"role": "user", "content": "x" * 2000}]}
        r = httpx.post(url + "/v1/chat/completions", json=body)
    assert r.status_code == 413
    assert "max_body_bytes limit is 1000" in r.json()["error"]["message"]


# -- sampling parameters, streaming, logprobs ----------------------------------------------------------------


def test_stream_reassembles_to_the_same_text_and_reports_usage(client):
    kwargs = {"seed": 7, "temperature": 1.0, "max_tokens": 40, "stop": ["age"]}
    whole = ask(client, **kwargs)
    chunks = list(ask(client, stream=True, stream_options={"include_usage": True}, **kwargs))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 0


def test_n_samples_stream_by_index(client):
    whole = ask(client, n=3, seed=11, response_format={"type": "json_object"})
    chunks = list(ask(client, n=3, seed=11, response_format={"type": "json_object"}, stream=True))
    texts = {i: "" for i in range(3)}
    for c in chunks:
        for choice in c.choices:
            texts[choice.index] += choice.delta.content or ""
    assert [texts[i] for i in range(3)] == [c.message.content for c in whole.choices]
    assert sum(1 for c in chunks for ch in c.choices if ch.finish_reason) == 3


def test_logprobs_one_entry_per_token(client):
    r = ask(client, logprobs=True, top_logprobs=2, seed=1, max_tokens=12)
    entries = r.choices[0].logprobs.content
    assert len(entries) == r.usage.completion_tokens
    assert all(len(e.top_logprobs) == 2 and e.logprob <= 0 for e in entries)
    assert "".join(e.token for e in entries).startswith(r.choices[0].message.content)


def test_completions_endpoint(server, client):
    r = client.completions.create(model="toy", prompt=["user: a\n", "user: b\n"], max_tokens=30, n=2, seed=3,
                                  logprobs=1, extra_body={"guided_json": PERSON})
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    for c in r.choices:
        jsonschema.validate(json.loads(c.text), PERSON)
        assert len(c.logprobs.tokens) == len(c.logprobs.token_logprobs)
    streamed = client.completions.create(model="toy", prompt="user: a\n", max_tokens=30, seed=3, stream=True)
    whole = client.completions.create(model="toy", prompt="user: a\n", max_tokens=30, seed=3)
    assert "".join(c.choices[0].text for c in streamed) == whole.choices[0].text


# -- tools -------------------------------------------------------------------------------------------------


def arguments_of(choice, name="get_weather"):
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == name
    return json.loads(call.function.arguments)


def test_tool_choice_required_gives_a_valid_call(client):
    for seed in range(3):
        r = ask(client, tools=TOOLS, tool_choice="required", seed=seed, max_tokens=80)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        call = choice.message.tool_calls[0]
        params = WEATHER if call.function.name == "get_weather" else TOOLS[1]["function"]["parameters"]
        jsonschema.validate(json.loads(call.function.arguments), params)


def test_named_tool_choice_calls_that_function(client):
    named = {"type": "function", "function": {"name": "get_weather"}}
    r = ask(client, tools=TOOLS, tool_choice=named, seed=4, max_tokens=80)
    args = arguments_of(r.choices[0])
    jsonschema.validate(args, WEATHER)
    assert set(args) <= {"city", "unit"}  # the function is strict: no other keys
    assert r.choices[0].finish_reason == "stop"  # as OpenAI answers a forced function


def test_tool_choice_none_answers_in_text(client):
    r = ask(client, tools=TOOLS, tool_choice="none", seed=1)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].message.content


def test_tool_call_streams_whole_at_the_end(client):
    named = {"type": "function", "function": {"name": "get_weather"}}
    whole = ask(client, tools=TOOLS, tool_choice=named, seed=4, max_tokens=80)
    chunks = list(ask(client, tools=TOOLS, tool_choice=named, seed=4, max_tokens=80, stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [tc.function.arguments for tc in calls] == [whole.choices[0].message.tool_calls[0].function.arguments]


def test_tool_result_messages_are_accepted(client):
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"},
    ]
    r = ask(client, messages=messages, tools=TOOLS, tool_choice="none", seed=1)
    assert r.choices[0].message.content


@pytest.fixture(scope="module")
def caller():
    """A toy model that wants to call get_weather with arguments the schema forbids."""
    reference = 'Let me check. <tool_call>{"name": "get_weather", "arguments": {"town": 5}}</tool_call>'
    engine = toy_engine(ToyModel(reference, chatter="", noise=0.3))
    with serve_in_thread(create_app(engine, ServerSettings(model_name="toy"))) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_auto_tool_call_once_started_is_constrained(caller):
    for seed in range(3):
        r = ask(caller, tools=TOOLS, tool_choice="auto", seed=seed, max_tokens=120, temperature=0.5)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        jsonschema.validate(arguments_of(choice), WEATHER)
        assert choice.message.content.startswith("Let me check.")


def test_auto_stream_holds_back_the_call(caller):
    whole = ask(caller, tools=TOOLS, seed=1, max_tokens=120, temperature=0.5)
    chunks = list(ask(caller, tools=TOOLS, seed=1, max_tokens=120, temperature=0.5, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "<tool_call>" not in text and text == whole.choices[0].message.content
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [tc.function.arguments for tc in calls] == [whole.choices[0].message.tool_calls[0].function.arguments]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_split_and_visible_text():
    functions = [Function("f", None, {"type": "object"}, False)]
    text = 'a <tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call> b <tool_call>{"name": "f", "argu'
    content, calls = split_tool_calls(text, functions)
    assert [c.name for c in calls] == ["f"] and json.loads(calls[0].arguments) == {"x": 1}
    assert content == 'a  b <tool_call>{"name": "f", "argu'
    assert visible_text("hello <tool") == "hello " and visible_text("x <tool_call>{") == "x "
    assert visible_text("a < b") == "a < b"


def test_tools_go_to_a_template_that_takes_them_else_to_the_system_message():
    class Templated:
        chat_template = "{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}...{% endfor %}"

    functions = [Function("f", "does f", {"type": "object"}, False)]
    assert template_takes_tools(Templated()) and not template_takes_tools(ToyModel().tokenizer)
    messages, kwargs = tool_prompt(CHAT, functions, template_tools=True)
    assert messages == CHAT and kwargs["tools"][0] == {
        "type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object"}}}
    messages, kwargs = tool_prompt([{"role": "system", "content": "Be brief."}, *CHAT], functions, False)
    assert kwargs == {} and messages[0]["content"].startswith("Be brief.\n\nYou can call")
    assert '"name": "f"' in messages[0]["content"] and messages[1:] == CHAT


def test_auto_grammar_constrains_only_the_calls():
    engine = toy_engine()
    functions = [Function("get_weather", None, WEATHER, True)]
    grammar = auto_grammar(engine.compiler, functions)
    good = 'Sure. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}</tool_call> ok'
    assert Matcher(grammar).status(good) == "complete"
    assert Matcher(grammar).status('<tool_call>{"name": "get_weather", "arguments": {"town"') == "dead"
    # Repeated items are kept out of the calls as in response_format (the free text's quote aside).
    tags = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    tagged = {"type": "object", "properties": {"tags": tags}}
    grammar = auto_grammar(engine.compiler, [Function("tag", None, tagged, False)])
    call = '<tool_call>{"name": "tag", "arguments": {"tags": ["a", "%s"]}}</tool_call>'
    assert Matcher(grammar).status('He said "' + call % "b") == "complete"
    assert Matcher(grammar).status('He said "' + call % "a") == "dead"


# -- RequestOptions.grammar (the engine change the server needs) --------------------------------------------


def test_engine_takes_a_precompiled_grammar():
    engine = toy_engine()
    grammar = engine.compiler.regex(r"[A-Z][a-z]+")
    [out] = engine.generate(["user: hi\n"], SamplingParams(seed=0, max_tokens=20), RequestOptions(grammar=grammar))
    assert re.fullmatch(r"[A-Z][a-z]+", out.text)
    with pytest.raises(ValueError, match="both given"):
        engine.add_request("x", "user: hi\n", SamplingParams(regex="a"), RequestOptions(grammar=grammar))
    toy_engine().add_request("y", "user: hi\n", options=RequestOptions(grammar=grammar))  # equal vocabulary
    other = toy_engine(ToyModel(tokenizer=ToyTokenizer(pieces=("ab",))))
    with pytest.raises(ValueError, match="another vocabulary"):
        other.add_request("z", "user: hi\n", options=RequestOptions(grammar=grammar))


# -- keys, queue, timeouts, disconnects -----------------------------------------------------------------------


def test_api_key_is_required_except_on_health():
    engine = toy_engine()
    with serve_in_thread(create_app(engine, ServerSettings(model_name="toy", api_key="s3cret"))) as url:
        wrong = openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as info:
            ask(wrong, max_tokens=5)
        assert info.value.body["code"] == "invalid_api_key"
        assert httpx.get(url + "/metrics").status_code == 401
        assert httpx.get(url + "/health").status_code == 200
        right = openai.OpenAI(base_url=url + "/v1", api_key="s3cret", max_retries=0)
        assert ask(right, max_tokens=5, seed=0).choices[0].message.content


@pytest.fixture(scope="module")
def slow():
    """One batch slot, no queue, a slow model: the second concurrent request is refused."""
    engine = toy_engine(SlowToy(), max_batch_size=1)
    app = create_app(engine, ServerSettings(model_name="toy", max_queue=0, request_timeout=2.0))
    with serve_in_thread(app) as url:
        yield url, app.state.runner, engine


def wait_until(condition, timeout=5.0):
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "timed out waiting"
        time.sleep(0.02)


LONG = {"model": "toy", "messages": CHAT, "max_tokens": 2000, "extra_body": {"guided_regex": "[a-z]{2000}"}}


@contextmanager
def held_compile(pattern: str):
    """A started runner over the toy engine, and a grammar (``pattern``) whose compile waits for
    ``released`` to be set: (engine, runner, grammar, released)."""
    engine = toy_engine()
    runner = EngineRunner(engine, max_queue=4)
    released = threading.Event()

    def grammar(compiler):
        released.wait(60)
        return compiler.regex(pattern)

    runner.start()
    try:
        yield engine, runner, grammar, released
    finally:
        released.set()
        runner.stop()


def test_requests_decode_while_another_grammar_compiles():
    """Compiles run beside the engine thread: a request whose grammar takes long holds up no other."""

    async def last_output(job):
        async for _, out in job.outputs():
            last = out
        return last

    async def scenario(runner, held, released):
        params = SamplingParams(seed=0, max_tokens=20)
        slow = runner.submit([EngineRequest("user: hi\n", params, grammar=held)])
        quick = runner.submit([EngineRequest("user: hi\n", params, grammar=lambda c: c.regex("[0-9]{3}"))])
        quick_out = await asyncio.wait_for(last_output(quick), 30)
        assert quick_out.finished and re.fullmatch("[0-9]{3}", quick_out.text) and not released.is_set()
        released.set()
        slow_out = await asyncio.wait_for(last_output(slow), 30)
        assert slow_out.finished and re.fullmatch(r"[A-Z][a-z]+", slow_out.text)

    with held_compile(r"[A-Z][a-z]+") as (_, runner, held, released):
        asyncio.run(scenario(runner, held, released))


def test_a_request_cancelled_while_its_grammar_compiles_never_reaches_the_engine():
    async def scenario(engine, runner, held, released):
        job = runner.submit([EngineRequest("user: hi\n", SamplingParams(max_tokens=5), grammar=held)])
        wait_until(lambda: runner.submitted == 0)  # taken: compiling
        runner.cancel(job)
        wait_until(lambda: runner.in_flight == 0)  # forgotten at once
        released.set()
        wait_until(lambda: engine.stats.compile_seconds > 0)  # the compile came back and was handled...
        assert not engine.has_unfinished_requests() and engine.num_running == 0  # ...and was dropped

    with held_compile("[a-z]+") as context:
        asyncio.run(scenario(*context))


def test_the_engine_thread_collects_the_frozen_heap_when_idle():
    engine = toy_engine()
    runner = EngineRunner(engine, max_queue=1)
    with settled(thaw_every=2):
        cycle = Cycle()
        alive = weakref.ref(cycle)
        engine.compiler.json_schema(PERSON)  # frozen after, with the cycle: half the period
        del cycle
        gc.collect()
        assert alive() is not None
        runner.start()  # nothing to do: it thaws before it waits
        try:
            wait_until(lambda: alive() is None)
        finally:
            runner.stop()


def test_full_queue_is_429_and_a_closed_stream_frees_its_slot(slow):
    url, runner, engine = slow
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(stream=True, **LONG)
    next(iter(stream))
    wait_until(lambda: engine.num_running == 1)
    with pytest.raises(openai.RateLimitError) as info:
        ask(client, max_tokens=5)
    assert info.value.body["code"] == "rate_limit_exceeded"
    stream.close()
    wait_until(lambda: runner.in_flight == 0 and engine.num_running == 0)
    assert ask(client, max_tokens=5, seed=0).choices[0].message.content


def test_disconnect_without_streaming_frees_its_slot(slow):
    url, runner, engine = slow
    body = {k: v for k, v in LONG.items() if k != "extra_body"} | LONG["extra_body"]
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/v1/chat/completions", json=body, timeout=httpx.Timeout(5.0, read=0.5))
    wait_until(lambda: runner.in_flight == 0 and engine.num_running == 0)


def test_request_timeout_is_504(slow):
    url, runner, _ = slow
    body = {k: v for k, v in LONG.items() if k != "extra_body"} | LONG["extra_body"]
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
    assert r.status_code == 504 and "request_timeout" in r.json()["error"]["message"]
    wait_until(lambda: runner.in_flight == 0)


def test_stream_timeout_ends_with_an_error_event(slow):
    url, runner, _ = slow
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.APIError, match="timed out"):
        list(client.chat.completions.create(stream=True, **LONG))
    wait_until(lambda: runner.in_flight == 0)


# -- the command line -------------------------------------------------------------------------------------


def test_serve_without_the_extra_names_it(monkeypatch, capsys):
    from banister.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert main(["serve"]) == 2
    assert "pip install 'banister[server]'" in capsys.readouterr().err


def test_serve_settings_from_flags():
    from banister.cli import build_parser
    from banister.server.commands import settings_from_args

    args = build_parser().parse_args(["serve", "--api-key", "k", "--max-queue", "3", "--max-tokens", "99",
                                      "--compile-threads", "4"])
    settings = settings_from_args(args)
    assert (settings.api_key, settings.max_queue, settings.max_tokens, settings.model_name) == ("k", 3, 99, "default")
    assert settings.compile_threads == 4 and settings_from_args(build_parser().parse_args(["serve"])).compile_threads == 2
    assert args.host == "127.0.0.1"
    with pytest.raises(ValueError, match="compile_threads must be a positive integer"):
        ServerSettings(compile_threads=0)


def test_concurrent_requests_all_complete(server):
    url = server[0]
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    results, errors = [], []

    def one(i):
        try:
            r = ask(client, seed=i, response_format={"type": "json_schema",
                                                    "json_schema": {"name": "p", "schema": PERSON}})
            results.append(json.loads(r.choices[0].message.content))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 12
