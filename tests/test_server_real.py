"""The server's must-show cases on the real default model (SmolLM2-135M-Instruct), via the openai client.

The model loads once for the module (a few seconds once its fp32 copy is cached); answers are
kept short so the module stays well under a minute on a shared 2-core machine.
"""

import json
import socket
import subprocess
import sys
import time

import httpx
import jsonschema
import openai
import pytest
import torch

from banister.engine import Engine, EngineError
from banister.engine.loading import default_model_path
from banister.server.app import create_app
from banister.server.settings import ServerSettings
from banister.server.testing import serve_in_thread

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 24},
    },
    "required": ["name", "age", "city"],
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": WEATHER, "strict": True}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a timezone",
                                      "parameters": {"type": "object",
                                                     "properties": {"timezone": {"type": "string", "maxLength": 30}},
                                                     "required": ["timezone"]}, "strict": True}},
]
PARAMETERS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
WEATHER_QUESTION = [{"role": "user", "content": "What is the weather like in Paris today?"}]


@pytest.fixture(scope="module")
def default_model():
    """Skips the module's tests where the default model's package is not installed."""
    try:
        default_model_path()
    except EngineError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def client(default_model):
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # shared 2-core machines: one thread is faster than two fighting
    engine = Engine.from_pretrained("default")
    with serve_in_thread(create_app(engine, ServerSettings(model_name="smollm2"))) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    torch.set_num_threads(before)


def test_json_schema_strict_content_validates(client):
    r = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": "Describe a fictional person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}},
        temperature=0,
        max_tokens=80,
    )
    value = json.loads(r.choices[0].message.content)
    jsonschema.validate(value, PERSON)
    assert set(value) == {"name", "age", "city"}


def test_required_tool_call_arguments_validate(client):
    r = client.chat.completions.create(model="smollm2", messages=WEATHER_QUESTION, tools=TOOLS,
                                       tool_choice="required", temperature=0, max_tokens=60)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])


def test_named_function_and_none(client):
    named = client.chat.completions.create(
        model="smollm2", messages=WEATHER_QUESTION, tools=TOOLS, temperature=0, max_tokens=60,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    [call] = named.choices[0].message.tool_calls
    assert call.function.name == "get_time"
    jsonschema.validate(json.loads(call.function.arguments), PARAMETERS["get_time"])
    plain = client.chat.completions.create(model="smollm2", messages=WEATHER_QUESTION, tools=TOOLS,
                                           tool_choice="none", temperature=0, max_tokens=20)
    assert plain.choices[0].message.tool_calls is None and plain.choices[0].message.content


def test_auto_answers_in_text_or_a_valid_call(client):
    r = client.chat.completions.create(model="smollm2", messages=WEATHER_QUESTION, tools=TOOLS,
                                       tool_choice="auto", seed=0, temperature=0.8, max_tokens=30)
    message = r.choices[0].message
    for call in message.tool_calls or []:
        jsonschema.validate(json.loads(call.function.arguments), PARAMETERS[call.function.name])
    assert message.tool_calls or message.content


def test_stream_equals_whole_answer_for_the_same_seed(client):
    kwargs = {"model": "smollm2", "messages": [{"role": "user", "content": "Write a haiku about rivers."}],
              "seed": 42, "temperature": 0.8, "top_p": 0.95, "max_tokens": 24}
    whole = client.chat.completions.create(**kwargs)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens > 0


def test_bad_schema_message_reaches_the_client(client):
    schema = {"type": "object", "properties": {"when": {"type": "string", "pattern": "\\bnoon"}}}
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="smollm2", messages=WEATHER_QUESTION,
                                       response_format={"type": "json_schema",
                                                        "json_schema": {"name": "x", "schema": schema}})
    assert "\\b" in info.value.body["message"] and "#/properties/when/pattern" in info.value.body["message"]


def test_banister_serve_command(default_model):
    """`banister serve` itself: binds loopback, loads the model, and guards every endpoint but /health."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "banister.cli", "serve", "--port", str(port), "--api-key", "k", "--threads", "1"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stderr.read().decode()
            assert time.monotonic() < deadline, "banister serve did not start"
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.25)
        assert httpx.get(url + "/v1/models").status_code == 401
        models = httpx.get(url + "/v1/models", headers={"Authorization": "Bearer k"}).json()
        assert [m["id"] for m in models["data"]] == ["default"]
    finally:
        server.terminate()
        server.wait(30)
