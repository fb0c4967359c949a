"""The engine on the toy model: batching, continuous batching, guided decoding, options, outputs."""

import itertools
import json

import jsonschema
import pytest

from banister import Compiler, Matcher
from banister.engine import Engine, EngineError, RequestOptions, ToyModel, ToyTokenizer
from banister.engine.guide import VocabIndex, closing_bytes
from banister.errors import RegexError, SchemaError
from banister.sampling import SamplingParams

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 200}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
PROMPTS = [f"user: give me person {i}\n" for i in range(8)]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def toy_engine(**kwargs) -> Engine:
    model = ToyModel(noise=kwargs.pop("noise", 1.0), seed=kwargs.pop("toy_seed", 0))
    return Engine(model, model.tokenizer, **kwargs)


def mixed_params(i: int) -> SamplingParams:
    kinds = [
        {"json_schema": PERSON},
        {},
        {"regex": r'\{"name": "[A-Za-z]+", "age": [0-9]+\}'},
        {"choice": ["yes", "no", '{"name": "Ada", "age": 42}']},
    ]
    return SamplingParams(temperature=0.0, max_tokens=30 + i, **kinds[i % len(kinds)])


def tokens_of(outputs):
    return [[o.token_ids for o in out.outputs] for out in outputs]


def test_greedy_alone_equals_greedy_in_a_batch_of_8():
    alone = [toy_engine().generate([p], mixed_params(i))[0] for i, p in enumerate(PROMPTS)]
    batch = toy_engine().generate(PROMPTS, [mixed_params(i) for i in range(8)])
    assert tokens_of(alone) == tokens_of(batch)
    assert [o.text for o in alone] == [o.text for o in batch]


def test_requests_join_and_leave_between_steps():
    engine = toy_engine(max_batch_size=3)
    expected = {i: toy_engine().generate([p], mixed_params(i))[0].outputs[0].token_ids for i, p in enumerate(PROMPTS)}
    engine.add_request(0, PROMPTS[0], mixed_params(0))
    engine.add_request(1, PROMPTS[1], mixed_params(1))
    results, step = {}, 0
    while engine.has_unfinished_requests():
        if step == 2:
            for i in range(2, 8):  # more than the batch holds: they queue and join as others leave
                engine.add_request(i, PROMPTS[i], mixed_params(i))
        for out in engine.step():
            assert engine.num_running <= 3
            if out.finished:
                results[out.request_id] = out.outputs[0].token_ids
        step += 1
    assert results == expected


def test_abort_between_steps():
    engine = toy_engine()
    engine.add_request("a", PROMPTS[0], SamplingParams(temperature=0.0, max_tokens=50))
    engine.add_request("b", PROMPTS[1], SamplingParams(temperature=0.0, max_tokens=5))
    engine.step()
    engine.abort("a")
    outs = {o.request_id: o for o in engine.step()}
    assert outs["a"].finished and outs["a"].outputs[0].finish_reason == "abort"
    assert outs["a"].outputs[0].incomplete
    while engine.has_unfinished_requests():
        engine.step()
    assert engine.model.num_sequences == 0  # every sequence released


def test_seeded_sampling_is_reproducible():
    def run(seed, n=1):
        params = SamplingParams(temperature=1.5, seed=seed, n=n, max_tokens=25, json_schema=PERSON)
        return toy_engine(noise=3.0).generate(PROMPTS[:2], params)

    first, again, other = run(7), run(7), run(8)
    assert tokens_of(first) == tokens_of(again)
    assert tokens_of(first) != tokens_of(other)
    three = run(7, n=3)
    assert [out.outputs[0].token_ids for out in three] == [out.outputs[0].token_ids for out in first]
    assert len({o.token_ids for o in three[0].outputs}) > 1


def test_seeded_sampling_is_the_same_alone_and_in_a_batch():
    params = [SamplingParams(temperature=1.0, seed=i, max_tokens=20) for i in range(4)]
    alone = [toy_engine(noise=3.0).generate([p], params[i])[0] for i, p in enumerate(PROMPTS[:4])]
    batch = toy_engine(noise=3.0).generate(PROMPTS[:4], params)
    assert tokens_of(alone) == tokens_of(batch)


@pytest.mark.parametrize("jump_forward", [False, True])
def test_constrained_outputs_validate_even_from_a_noisy_model(jump_forward):
    engine = toy_engine(noise=4.0, seed=0)
    params = [SamplingParams(temperature=1.0, seed=i, max_tokens=60, json_schema=PERSON) for i in range(12)]
    outputs = engine.generate(PROMPTS[:4] * 3, params, RequestOptions(jump_forward=jump_forward))
    finished = [o.outputs[0] for o in outputs if not o.outputs[0].incomplete]
    assert len(finished) >= 10
    for out in finished:
        jsonschema.validate(json.loads(out.text), PERSON)
        assert out.finish_reason in ("grammar", "eos")


def test_without_constraints_the_toy_chatters():
    out = toy_engine().generate(PROMPTS[:1], SamplingParams(temperature=0.0, max_tokens=60))[0].outputs[0]
    assert out.text.startswith("Sure! Here is the answer: ")
    assert out.finish_reason == "eos"
    constrained = toy_engine().generate(PROMPTS[:1], SamplingParams(temperature=0.0, json_schema=PERSON))[0]
    assert json.loads(constrained.text) == {"name": "Ada", "age": 42}


def test_finish_reasons_and_stop_strings():
    engine = toy_engine()
    params = [
        SamplingParams(temperature=0.0, max_tokens=3),
        SamplingParams(temperature=0.0, stop=["answer"], max_tokens=60),
        SamplingParams(temperature=0.0, stop=["answer"], include_stop_str_in_output=True, max_tokens=60),
        SamplingParams(temperature=0.0, choice=["yes", "no"]),
        SamplingParams(temperature=0.0, regex="[0-9]+", max_tokens=60),
    ]
    length, stop, stop_kept, choice, regex = (o.outputs[0] for o in engine.generate(PROMPTS[:5], params))
    assert (length.finish_reason, length.incomplete, len(length.token_ids)) == ("length", True, 3)
    assert (stop.finish_reason, stop.stop_reason, stop.text) == ("stop", "answer", "Sure! Here is the ")
    assert stop_kept.text == "Sure! Here is the answer"
    assert choice.finish_reason == "grammar" and choice.text in ("yes", "no")
    assert regex.finish_reason in ("eos", "length") and regex.text.isdigit()


def test_a_structure_cut_by_the_budget_is_incomplete_unless_closed():
    model = ToyModel(reference='{"name": "Ada Lovelace, Countess of Lovelace", "age": 36}', chatter="", noise=0.0)
    engine = Engine(model, model.tokenizer)
    params = SamplingParams(temperature=0.0, max_tokens=12, json_schema=PERSON)
    cut = engine.generate(PROMPTS[:1], params)[0].outputs[0]
    assert (cut.finish_reason, cut.incomplete, cut.budget_closed) == ("length", True, False)
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut.text)
    for budget in (10, 12, 16, 20):
        params = SamplingParams(temperature=0.0, max_tokens=budget, json_schema=PERSON)
        options = RequestOptions(close_within_budget=True)
        closed = engine.generate(PROMPTS[:1], params, options)[0].outputs[0]
        assert len(closed.token_ids) <= budget
        assert (closed.finish_reason, closed.incomplete, closed.budget_closed) == ("length", False, True)
        value = json.loads(closed.text)
        jsonschema.validate(value, PERSON)
        assert value["name"].startswith("Ada")
    roomy = SamplingParams(temperature=0.0, max_tokens=60, json_schema=PERSON)
    full = engine.generate(PROMPTS[:1], roomy, RequestOptions(close_within_budget=True))[0].outputs[0]
    assert (full.finish_reason, full.budget_closed) == ("grammar", False)


def test_jump_forward_saves_steps_and_keeps_the_answer_valid():
    schema_text = {**PERSON, "properties": {**PERSON["properties"], "city": {"enum": ["Paris", "London"]}},
                   "required": ["name", "age", "city"]}
    steps, texts = {}, {}
    for jump in (False, True):
        engine = toy_engine(jump_forward=jump)
        params = SamplingParams(temperature=0.0, max_tokens=60, json_schema=schema_text)
        out = engine.generate(PROMPTS[:1], params)[0]
        steps[jump], texts[jump] = engine.stats.steps, out.text
        jsonschema.validate(json.loads(out.text), schema_text)
        assert engine.vocabulary.decode(out.outputs[0].token_ids).decode() == out.text
        assert (out.usage.forced_tokens > 0) == jump
    assert steps[True] < steps[False]


def test_jump_forward_retokenises_the_boundary():
    # The model writes `{` alone; the grammar then forces `"name": "`. Retokenised together, `{"`
    # replaces the `{` already written, as the tokenizer would have written it.
    model = ToyModel(reference='{ "name": "Ada", "age": 42}', chatter="", noise=0.0)
    engine = Engine(model, model.tokenizer)
    engine.add_request("r", PROMPTS[0], SamplingParams(temperature=0.0, max_tokens=40, regex=r'\{"name": "[A-Za-z]+"\}'))
    engine.step()
    tok = model.tokenizer
    out = engine.step()[0].outputs[0]
    assert [tok.vocabulary.tokens[t] for t in out.token_ids[:2]] == [b'{"', b"name"]


def test_token_healing_lets_the_model_pick_the_longer_token():
    model = ToyModel(chatter="", noise=0.0)
    engine = Engine(model, model.tokenizer)
    prompt = PROMPTS[0] + "{"  # `{` alone, where the model would write `{"`
    params = SamplingParams(temperature=0.0, max_tokens=30, regex=r'"name": "[A-Za-z]+", "age": [0-9]+\}')
    plain = engine.generate([prompt], params)[0].outputs[0]
    healed = engine.generate([prompt], params, RequestOptions(token_healing=True))[0]
    tok = model.tokenizer
    assert tok.vocabulary.tokens[healed.outputs[0].token_ids[0]] == b'{"'
    assert healed.text == '"name": "Ada", "age": 42}'
    assert len(healed.prompt_token_ids) == len(tok.encode(prompt)) - 1
    assert plain.text != healed.text or plain.token_ids != healed.outputs[0].token_ids


def test_logprobs_and_prompt_logprobs():
    params = SamplingParams(temperature=0.0, max_tokens=5, logprobs=2, prompt_logprobs=1, json_schema=PERSON)
    out = toy_engine().generate(PROMPTS[:1], params)[0]
    sample = out.outputs[0]
    assert len(sample.logprobs) == len(sample.token_ids) == 5
    assert all(lp.token_id == t and len(lp.top) == 2 for lp, t in zip(sample.logprobs, sample.token_ids))
    assert len(out.prompt_logprobs) == len(out.prompt_token_ids) - 1
    assert out.usage.prompt_tokens == len(out.prompt_token_ids)


def test_streaming_only_grows_and_ends_with_the_full_text():
    engine = toy_engine()
    params = SamplingParams(temperature=0.0, max_tokens=40, stop=["42"])
    texts = [out.text for out in engine.stream(PROMPTS[0], params)]
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))
    assert texts[-1] == toy_engine().generate([PROMPTS[0]], params)[0].text


def test_chat_prompts_and_token_prompts():
    engine = toy_engine()
    chat = [{"role": "user", "content": "give me a person"}]
    ids = engine.tokenizer.chat_prompt(chat)
    by_chat, by_ids = engine.generate([chat, ids], SamplingParams(temperature=0.0, json_schema=PERSON))
    assert by_chat.outputs[0].token_ids == by_ids.outputs[0].token_ids
    with pytest.raises(TypeError):
        engine.generate(ids)


def test_errors_are_typed_and_raised_at_add_request():
    engine = toy_engine()
    with pytest.raises(SchemaError):
        engine.add_request("bad", PROMPTS[0], SamplingParams(json_schema={"type": "object", "minProperties": "x"}))
    with pytest.raises(EngineError):
        engine.add_request("long", "x" * 5000, SamplingParams())
    with pytest.raises(EngineError):
        engine.add_request("non-ascii", "é", SamplingParams())
    engine.add_request("same", PROMPTS[0], SamplingParams())
    with pytest.raises(ValueError):
        engine.add_request("same", PROMPTS[0], SamplingParams())
    engine.abort("same")
    engine.step()
    bad = SamplingParams(regex="[0-9")
    with pytest.raises(RegexError):  # generate queues all of its prompts or none
        engine.generate(PROMPTS[:3], [SamplingParams(), SamplingParams(), bad])
    assert not engine.has_unfinished_requests()
    with pytest.raises(ValueError):
        Engine(ToyModel(), ToyTokenizer(), max_batch_size=0)


def test_masks_overlapped_with_the_forward_pass_give_the_same_outputs():
    params = [mixed_params(i) for i in range(8)]
    plain = toy_engine().generate(PROMPTS, params)
    overlapped = toy_engine(overlap_masks=True).generate(PROMPTS, params)
    assert tokens_of(plain) == tokens_of(overlapped)


def test_the_toy_model_is_deterministic_and_prefers_longer_pieces():
    model = ToyModel(noise=0.0, chatter="")
    tok = model.tokenizer
    context = tok.encode(PROMPTS[0])
    logits = model.logits_for(context, len(context))
    best = tok.vocabulary.tokens[int(logits.argmax())]
    assert best == b'{"'  # the longest piece that starts the reference
    noisy = ToyModel(seed=3)
    assert (noisy.logits_for(context, 5) == ToyModel(seed=3).logits_for(context, 5)).all()
    assert not (noisy.logits_for(context, 5) == ToyModel(seed=4).logits_for(context, 5)).all()
    assert tok.encode('{"name": "Ada"}') == [tok.vocabulary.tokens.index(t) for t in (b'{"', b"name", b'": "', b"Ada", b'"}')]


@pytest.mark.parametrize(
    "schema, prefix",
    [
        (PERSON, '{"name": "Ad'),
        (PERSON, ""),
        ({"type": "array", "items": {"type": "string", "pattern": "^[0-9]{3}$"}, "minItems": 3}, '["12'),
        ({"type": "object"}, '{"a": [1, {"b": [tr'),
    ],
)
def test_closing_bytes_complete_the_structure(schema, prefix):
    vocab = ToyTokenizer().vocabulary
    compiled = Compiler(vocab).json_schema(schema)
    matcher = Matcher(compiled)
    assert matcher.accept_string(prefix)
    closing = closing_bytes(compiled, matcher.state)
    jsonschema.validate(json.loads(prefix + closing.decode()), schema)
    assert VocabIndex(vocab).greedy_tokens(closing) is not None


def test_n_samples_share_the_prompt_and_report_together():
    engine = toy_engine(noise=3.0, jump_forward=False)
    out = engine.generate(PROMPTS[:1], SamplingParams(n=4, temperature=1.0, seed=1, max_tokens=30, json_schema=PERSON))[0]
    assert [o.index for o in out.outputs] == [0, 1, 2, 3]
    assert out.usage.completion_tokens == sum(len(o.token_ids) for o in out.outputs)
    assert engine.stats.prefill_tokens == len(out.prompt_token_ids)  # one prefill, forked to the others


def run_command(monkeypatch, capsys, argv):
    import argparse

    from banister.engine import commands

    monkeypatch.setattr(commands, "load_engine", lambda model, stream=None, threads=None: toy_engine())
    parser = argparse.ArgumentParser()
    commands.add_commands(parser.add_subparsers())
    args = parser.parse_args(argv)
    status = args.run(args)
    return status, capsys.readouterr()


def test_the_generate_command(monkeypatch, capsys, tmp_path):
    schema_file = tmp_path / "person.json"
    schema_file.write_text(json.dumps(PERSON))
    status, out = run_command(monkeypatch, capsys, ["generate", "--schema", str(schema_file), "--temperature", "0", "hi"])
    assert status == 0 and json.loads(out.out) == {"name": "Ada", "age": 42}
    assert "finish: grammar" in out.err
    status, out = run_command(monkeypatch, capsys, ["generate", "--choice", "yes", "no", "--n", "2", "--seed", "1", "hi"])
    assert out.out.count("--- answer") == 2
    status, out = run_command(monkeypatch, capsys, ["generate", "--stream", "--raw", "--max-tokens", "5", "user: hi\n"])
    assert out.out.startswith("Sure") and "(incomplete)" in out.err
    with pytest.raises(EngineError):
        run_command(monkeypatch, capsys, ["generate", "--stream", "--n", "2", "hi"])
