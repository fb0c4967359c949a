"""A bounded load test of `banister serve` on loopback: concurrent clients, no failed or lost request.

    .venv/bin/python benchmarks/bench_server.py [--model toy|default|PATH] [--clients 32] [--requests 256]
        [--schemas MASKBENCH.jsonl.gz] [--gc-threshold N] [--gc-thaw-every N]

The server runs in a child process (this script with ``--serve``) on 127.0.0.1 and a free port, so
the clients don't share its interpreter; the clients are ``openai.AsyncOpenAI`` tasks, each sending
its share of the requests one after another. The requests rotate through four kinds: a strict
JSON Schema answer, JSON mode, a required tool call and free text. Every structured answer is
checked (``json.loads`` and ``jsonschema``; tool arguments against the tool's parameters). One
request of each kind warms up first (grammars compiled and cached), outside the timing. With
``--schemas``, the JSON Schema requests take the schemas of MaskBench records (shuffled) instead
of one, so each is compiled on its request's path, as users' schemas are (one the server refuses, a
400, is counted apart). The server settles its heap as ``banister serve`` does. It
prints latency percentiles (p50, p90, p99, max), requests and generated tokens per second, the
server's resident memory (after the warm-up, at the end, at the peak) and its time spent compiling,
masking, in forward passes and sampling, and exits non-zero if any request failed, came back invalid or was lost.

``--model toy`` (default) measures the server and the engine loop over the lesson's toy model
(milliseconds per step); ``--model default`` runs SmolLM2-135M on the CPU (use fewer requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import httpx
import jsonschema
import openai

from banister.bench.maskbench import read_records
from banister.collector import add_gc_options, settle_heap

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["C", "F"]}},
    "required": ["city", "unit"],
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER, "strict": True}}]
MODEL_ID = "bench"


def serve(model: str, port: int, max_batch_size: int, gc_threshold: int, gc_thaw_every: int) -> None:
    """The child process: the server over ``model`` on 127.0.0.1:``port`` until killed, its heap
    settled as ``banister serve`` settles it."""
    import torch
    import uvicorn

    from banister.engine import Engine, ToyModel
    from banister.server.app import create_app
    from banister.server.settings import ServerSettings

    torch.set_num_threads(1)
    if model == "toy":
        toy = ToyModel()
        engine = Engine(toy, toy.tokenizer, max_batch_size=max_batch_size)
    else:
        engine = Engine.from_pretrained(model, max_batch_size=max_batch_size)
    settle_heap(gc_threshold, gc_thaw_every)
    app = create_app(engine, ServerSettings(model_name=MODEL_ID, max_queue=256))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def request_kind(i: int, max_tokens: int, schemas: list[dict] | None = None) -> tuple[str, dict]:
    """The i-th request: (kind, keyword arguments of chat.completions.create); its JSON Schema request
    takes the next of ``schemas`` (one each), or PERSON."""
    base = {"model": MODEL_ID, "messages": [{"role": "user", "content": f"Request {i}: a person, please."}],
            "max_tokens": max_tokens, "seed": i, "temperature": 0.7}
    schema = schemas[i // 4 % len(schemas)] if schemas else PERSON
    kinds = [
        ("json_schema", {"response_format": {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": schema, "strict": schema is PERSON}}}),
        ("json_object", {"response_format": {"type": "json_object"}}),
        ("tool_call", {"tools": TOOLS, "tool_choice": "required"}),
        ("text", {}),
    ]
    kind, extra = kinds[i % len(kinds)]
    return kind, base | extra


def check(kind: str, response: openai.types.chat.ChatCompletion, schema: dict) -> None:
    """Raise if a finished structured answer is not valid (free text and cut answers pass)."""
    choice = response.choices[0]
    if choice.finish_reason == "length":
        return
    if kind == "json_schema":
        jsonschema.validate(json.loads(choice.message.content), schema)
    elif kind == "json_object":
        json.loads(choice.message.content)
    elif kind == "tool_call":
        jsonschema.validate(json.loads(choice.message.tool_calls[0].function.arguments), WEATHER)


async def load(base_url: str, clients: int, requests: int, max_tokens: int, schemas: list[dict] | None,
               memory: Callable[[], dict[str, float]]) -> dict:
    """Run the requests over ``clients`` concurrent clients; latencies, token counts, failures, the
    schemas refused, and the server's ``memory()`` after the warm-up."""
    client = openai.AsyncOpenAI(base_url=base_url + "/v1", api_key="unused", max_retries=0, timeout=600,
                                http_client=openai.DefaultAsyncHttpxClient(
                                    limits=httpx.Limits(max_connections=clients)))
    latencies: list[float] = []
    tokens = 0
    failures: list[str] = []
    answered = refused = 0

    async def worker(first: int) -> None:
        nonlocal tokens, answered, refused
        for i in range(first, requests, clients):
            kind, kwargs = request_kind(i, max_tokens, schemas)
            start = time.perf_counter()
            try:
                response = await client.chat.completions.create(**kwargs)
                check(kind, response, kwargs.get("response_format", {}).get("json_schema", {}).get("schema"))
            except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                if schemas and kind == "json_schema" and isinstance(exc, openai.BadRequestError):
                    refused += 1  # a MaskBench schema the server does not support: its answer is a 400
                    continue
                failures.append(f"request {i} ({kind}): {type(exc).__name__}: {exc}")
                continue
            latencies.append(time.perf_counter() - start)
            tokens += response.usage.completion_tokens
            answered += 1

    for i in range(4):  # warm up: compile each kind's grammar once (then cached), outside the timing
        await client.chat.completions.create(**request_kind(i, max_tokens)[1])
    warm = memory()
    start = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in range(clients)))
    seconds = time.perf_counter() - start
    await client.close()
    return {"latencies": latencies, "tokens": tokens, "failures": failures, "answered": answered,
            "refused": refused, "seconds": seconds, "warm_memory": warm}


def process_memory(pid: int) -> dict[str, float]:
    """A process's resident memory now and at its peak so far, in MiB (Linux; empty elsewhere)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError:
        return {}
    return {name: int(fields[key].split()[0]) / 1024 for name, key in (("now", "VmRSS"), ("peak", "VmHWM"))}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="toy", help="toy (default), default (SmolLM2-135M) or a model path")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    parser.add_argument("--requests", type=int, default=256, help="requests in all (default 256)")
    parser.add_argument("--max-tokens", type=int, default=48, help="max_tokens of each request (default 48)")
    parser.add_argument("--max-batch-size", type=int, default=16, help="the engine's batch (default 16)")
    parser.add_argument("--schemas", metavar="FILE", help="MaskBench records (JSONL, gzip or plain): the JSON "
                        "Schema requests take their schemas in a shuffled order (seed 0), each compiled on its "
                        "request's path")
    add_gc_options(parser, how=" in the server")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.model, args.serve, args.max_batch_size, args.gc_threshold, args.gc_thaw_every)
        return 0
    schemas = [r["schema"] for r in read_records(args.schemas)] if args.schemas else None
    if schemas:
        random.Random(0).shuffle(schemas)  # the file runs split by split
    port = free_port()
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--model", args.model,
                              "--max-batch-size", str(args.max_batch_size), "--gc-threshold", str(args.gc_threshold),
                              "--gc-thaw-every", str(args.gc_thaw_every)], env=os.environ.copy())
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(base_url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                print("the server did not start", file=sys.stderr)
                return 1
            time.sleep(0.2)
        result = asyncio.run(load(base_url, args.clients, args.requests, args.max_tokens, schemas,
                                  lambda: process_memory(child.pid)))
        end_memory = process_memory(child.pid)
        metrics = httpx.get(base_url + "/metrics", timeout=30).text
    finally:
        child.terminate()
        child.wait(30)
    lat = sorted(result["latencies"])
    lost = args.requests - result["answered"] - result["refused"] - len(result["failures"])
    print(f"model {args.model}, {args.clients} clients, {args.requests} requests, max_tokens {args.max_tokens}, "
          f"batch {args.max_batch_size}")
    print(f"answered {result['answered']}, failed {len(result['failures'])}, lost {lost}"
          + (f", schemas refused {result['refused']}" if schemas else ""))
    if lat:
        q = statistics.quantiles(lat, n=100, method="inclusive")
        print(f"latency s: p50 {q[49]:.3f}  p90 {q[89]:.3f}  p99 {q[98]:.3f}  max {lat[-1]:.3f}")
    print(f"throughput: {result['answered'] / result['seconds']:.1f} requests/s, "
          f"{result['tokens'] / result['seconds']:.0f} generated tokens/s over {result['seconds']:.1f} s")
    if result["warm_memory"] and end_memory:
        print(f"server memory MiB: {result['warm_memory']['now']:.0f} after the warm-up, "
              f"{end_memory['now']:.0f} at the end, {end_memory['peak']:.0f} at the peak")
    spent = dict(re.findall(r"^banister_(\w+)_seconds_total (\S+)$", metrics, re.MULTILINE))
    print("time spent s (warm-up included): " + "  ".join(f"{name} {float(value):.2f}" for name, value in spent.items()))
    for failure in result["failures"][:10]:
        print("  " + failure)
    return 0 if not result["failures"] and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
