"""SamplingParams: defaults, normalisation, validation that names the field; n > 1 fan-out."""

import dataclasses

import pytest

from banister.sampling import SampleGroup, SamplingParams, SamplingParamsError, SamplingState, expand_n, settings


def test_defaults_follow_vllm():
    p = SamplingParams()
    assert (p.n, p.temperature, p.top_p, p.top_k, p.min_p) == (1, 1.0, 1.0, 0, 0.0)
    assert (p.presence_penalty, p.frequency_penalty, p.repetition_penalty) == (0.0, 0.0, 1.0)
    assert (p.max_tokens, p.min_tokens, p.logprobs, p.prompt_logprobs, p.seed) == (16, 0, None, None, None)
    assert p.stop == () and p.stop_token_ids == () and p.logit_bias is None and p.allowed_token_ids is None
    assert p.skip_special_tokens and not p.ignore_eos and not p.include_stop_str_in_output
    assert p.regex is p.json_schema is p.choice is p.grammar is None and p.json_object is False
    assert not p.greedy and SamplingParams(temperature=0).greedy


def test_normalisation():
    assert SamplingParams(top_k=-1).top_k == 0
    assert SamplingParams(stop="END").stop == ("END",)
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b")
    assert SamplingParams(logit_bias={"12": 5, 3: -1.5}).logit_bias == {12: 5.0, 3: -1.5}
    assert SamplingParams(choice=["yes", "no"]).choice == ("yes", "no")
    assert SamplingParams(stop_token_ids=[7]).stop_token_ids == (7,)


BAD = [
    ("n", 0),
    ("n", 1.5),
    ("presence_penalty", 2.5),
    ("frequency_penalty", -2.01),
    ("repetition_penalty", 0.0),
    ("repetition_penalty", float("nan")),
    ("temperature", -0.1),
    ("temperature", float("inf")),
    ("top_p", 0.0),
    ("top_p", 1.01),
    ("top_k", -2),
    ("top_k", True),
    ("min_p", 1.5),
    ("seed", "7"),
    ("stop", [""]),
    ("stop", [3]),
    ("stop_token_ids", [-1]),
    ("stop_token_ids", "12"),
    ("include_stop_str_in_output", 1),
    ("ignore_eos", None),
    ("max_tokens", 0),
    ("min_tokens", -1),
    ("logprobs", -1),
    ("logprobs", 21),
    ("prompt_logprobs", 100),
    ("logit_bias", {5: 101}),
    ("logit_bias", {"x": 1}),
    ("logit_bias", [1, 2]),
    ("allowed_token_ids", []),
    ("allowed_token_ids", [0, -4]),
    ("skip_special_tokens", "yes"),
    ("regex", ""),
    ("json_schema", "{not json"),
    ("json_schema", "[1, 2]"),
    ("json_schema", 3),
    ("choice", []),
    ("choice", "yes"),
    ("grammar", 12),
    ("json_object", "true"),
]


@pytest.mark.parametrize(("field", "value"), BAD)
def test_bad_values_name_the_field(field, value):
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(**{field: value})
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")
    assert isinstance(info.value, ValueError)


def test_min_tokens_above_max_tokens_and_two_structured_fields():
    with pytest.raises(SamplingParamsError, match="min_tokens") as info:
        SamplingParams(max_tokens=4, min_tokens=5)
    assert info.value.field == "min_tokens"
    assert SamplingParams(max_tokens=None, min_tokens=500).min_tokens == 500
    with pytest.raises(SamplingParamsError) as info:
        SamplingParams(regex="a+", json_object=True)
    assert info.value.field == "json_object"
    SamplingParams(json_schema={"type": "object"})
    SamplingParams(json_schema='{"type": "string"}')


def test_logprobs_limit_is_a_setting(monkeypatch):
    SamplingParams(logprobs=20)
    monkeypatch.setattr(settings, "max_logprobs", 50)
    assert SamplingParams(logprobs=50, prompt_logprobs=50).logprobs == 50
    monkeypatch.setattr(settings, "max_logprobs", 5)
    with pytest.raises(SamplingParamsError, match=r"settings\.max_logprobs"):
        SamplingParams(logprobs=6)


def test_params_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SamplingParams().temperature = 0.5  # type: ignore[misc]


def test_token_ids_checked_against_the_vocabulary_when_joining_a_batch():
    state = SamplingState(10, [0])
    for field, params, prompt in [
        ("stop_token_ids", SamplingParams(stop_token_ids=[10]), ()),
        ("allowed_token_ids", SamplingParams(allowed_token_ids=[3, 12]), ()),
        ("logit_bias", SamplingParams(logit_bias={11: 1.0}), ()),
        ("prompt_token_ids", SamplingParams(), (1, 99)),
        ("n", SamplingParams(n=2), ()),
    ]:
        with pytest.raises(SamplingParamsError) as info:
            state.add_request("r", params, prompt)
        assert info.value.field == field
    assert len(state) == 0
    state.add_request("r", SamplingParams())
    with pytest.raises(ValueError, match="already"):
        state.add_request("r", SamplingParams())


def test_expand_n_seeds_children_seed_plus_i():
    children = expand_n(SamplingParams(n=3, seed=40, temperature=0.5, stop=["x"]))
    assert [c.seed for c in children] == [40, 41, 42]
    assert all(c.n == 1 and c.temperature == 0.5 and c.stop == ("x",) for c in children)
    assert [c.seed for c in expand_n(SamplingParams(n=2))] == [None, None]
    assert expand_n(SamplingParams(seed=9)) == [SamplingParams(seed=9)]


def test_sample_group_gathers_in_child_order():
    group: SampleGroup[str] = SampleGroup(SamplingParams(n=3, seed=1))
    assert len(group.children) == 3 and not group.finished
    group.add(2, "c")
    group.add(0, "a")
    with pytest.raises(ValueError, match=r"\[1\]"):
        group.results()
    with pytest.raises(ValueError):
        group.add(0, "again")
    with pytest.raises(ValueError):
        group.add(3, "d")
    group.add(1, "b")
    assert group.finished and group.results() == ["a", "b", "c"]
