"""The lab's experiments: the invariants each one must show, not its pictures."""

import json
import math

import numpy as np
import pytest

from banister import Compiler, Matcher, allocate_token_bitmask
from banister.lab import experiments as ex
from banister.lab import real
from banister.retry import validate_answer


def test_p_to_the_n():
    data = ex.validity_vs_length().data["p_n"]
    assert round(data[0.98, 10], 3) == 0.817
    assert round(data[0.98, 100], 3) == 0.133


def test_masked_step_zeroes_forbidden_tokens_and_keeps_odds():
    data = ex.masked_step().data
    before, after, allowed = data["before_all"], data["after_all"], data["allowed"]
    assert after.sum() == pytest.approx(1.0)
    assert after[np.setdiff1d(np.arange(len(after)), allowed)].sum() == 0
    assert after[allowed] == pytest.approx(before[allowed] / before[allowed].sum(), rel=1e-5)
    assert data["before"]["'Sure'"] > 0.1  # the model chatters without the mask


def test_constrained_runs_have_no_invalid_finished_answers():
    counts = ex.validity(20).data["counts"]
    for task in ("age pattern", "person schema"):
        constrained = counts[task, "constrained"]
        assert set(constrained) <= {"valid", "cut off"}
        assert sum(constrained.values()) == 20
        assert counts[task, "unconstrained"].get("valid", 0) < 20


def test_classify_sorts_failures():
    check = ex._age_valid
    assert ex.classify(ex.Answer('{"age": 42}', True), check) == "valid"
    assert ex.classify(ex.Answer('Sure! {"age": 42}', True), check) == "chatter"
    assert ex.classify(ex.Answer('{"age": x42}', True), check) == "broken inside"
    assert ex.classify(ex.Answer('{"age": 4', False), check) == "cut off"


def test_mask_table_agrees_with_matcher():
    result = ex.mask_table()
    vocab, table, states = result.data["vocab"], result.data["table"], result.data["states"]
    compiled = Compiler(vocab).regex(result.data["pattern"])
    matchers, frontier = {}, [Matcher(compiled)]
    while frontier:
        m = frontier.pop()
        if m.state in matchers:
            continue
        matchers[m.state] = m
        for t in range(vocab.vocab_size - 1):
            nxt = m.copy()
            if nxt.accept_token(t):
                frontier.append(nxt)
    assert set(matchers) == set(states)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    for i, state in enumerate(states):
        matchers[state].fill_next_token_bitmask(bitmask)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: vocab.vocab_size - 1].astype(bool)
        assert np.array_equal(bits, table[i])


def test_two_step_distortion_is_exact():
    conditional, masked = ex.two_step_distributions()
    assert round(conditional["Ay"], 3) == 0.091
    assert conditional["Ay"] == pytest.approx(0.009 / 0.099)
    assert masked["Ay"] == pytest.approx(0.9)
    assert sum(masked.values()) == pytest.approx(1.0)


def test_toy_distortion_favours_what_the_model_rarely_finishes():
    data = ex.distortion(60).data
    assert data["toy_own"]["Sure"] < data["toy_masked"]["Sure"]


def test_forced_choice():
    renorm, thrown = ex.forced_choice({"null": 0.8, "1": 0.15, "2": 0.05}, ["1", "2"])
    assert thrown == pytest.approx(0.8)
    assert renorm == pytest.approx({"1": 0.75, "2": 0.25})
    with pytest.raises(ValueError):
        ex.forced_choice({"null": 1.0}, ["1"])
    toy = ex.forced_choice_experiment(8).data["toy"]
    assert toy["integer age"].get("null", 0) == 0
    assert toy["nullable age"].get("invented number", 0) == 0


def test_retry_math():
    assert ex.expected_attempts(0.5) == 2
    assert ex.all_fail(0.665, 3) == pytest.approx(0.335**3)
    assert ex.all_fail(1.0, 3) == 0
    with pytest.raises(ValueError):
        ex.expected_attempts(0)
    measured = ex.retries(10).data["measured"]
    for m in measured.values():
        assert 1 <= m["mean_attempts"] <= 3
        assert m["success"] >= m["p_first"]


def test_json_mode_parses_but_only_the_schema_fits():
    counts = ex.json_mode_vs_schema(10).data["counts"]
    assert counts["JSON mode"]["parses"] == counts["JSON mode"]["finished"]
    assert counts["JSON mode"].get("fits schema", 0) == 0
    strict = counts["strict schema"]
    assert strict["fits schema"] == strict["finished"] == strict["has age"]


def test_constrained_person_answers_validate_with_jsonschema():
    model = ex.toy_model()
    grammar = Compiler(model.tokenizer.vocabulary).json_schema(ex.PERSON_SCHEMA)
    for answer in ex.generate_many(model, grammar, 10):
        if answer.finished:
            assert validate_answer(answer.text, ex.PERSON_SCHEMA)[1] is None, answer
            assert json.loads(answer.text)["name"]


def test_count_tokenizations():
    assert real.count_tokenizations("ab", [b"a", b"b", b"ab"]) == 2
    assert real.count_tokenizations("aaaa", [b"a", b"aa"]) == 5  # Fibonacci
    assert real.count_tokenizations("abc", [b"a", b"b"]) == 0
    counts = real.tokenizations().data["counts"]
    toy, gpt2 = counts['{"age": 42}']
    assert toy >= 2 and gpt2 >= 2


def test_mask_cost():
    naive, table = real.mask_cost_formula(np.array([1, 1000]), 10, 50_000, 40, 6.0)
    assert naive[0] == 10 * 50_000 * 6.0
    assert table[1] < naive[1]
    data = real.mask_cost(naive_steps=1, repeats=2).data
    assert data["naive_agrees_with_table"]
    assert math.isfinite(data["cached_fill_step_s"]) and data["cached_fill_step_s"] < data["naive_step_s"]


def test_default_model_constrained_answers_are_never_invalid():
    from banister.lab.model import MODEL_TASKS, default_model_validity

    result = default_model_validity(samples=1, max_tokens=64)
    counts = result.data["counts"]
    per_schema = sum(len(tasks) for _, tasks in MODEL_TASKS.values()) // len(MODEL_TASKS)
    for name in MODEL_TASKS:
        constrained = counts[name, "constrained"]
        assert sum(constrained.values()) == sum(counts[name, "unconstrained"].values()) == per_schema
        assert set(constrained) <= {"valid", "cut off"}, constrained
        for kind, text in result.data["examples"][name, "constrained"].items():
            assert (validate_answer(text, MODEL_TASKS[name][0])[1] is None) == (kind == "valid")
