"""banister.retry: validate with jsonschema, send the error back, bounded attempts."""

import pytest

from banister.retry import retry, validate_answer

SCHEMA = {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}


def test_validate_answer():
    assert validate_answer('{"age": 3}', SCHEMA) == ({"age": 3}, None)
    assert "not valid JSON" in validate_answer("Sure! {", SCHEMA)[1]
    assert "'age' is a required property" in validate_answer("{}", SCHEMA)[1]
    assert "schema violation at age" in validate_answer('{"age": "x"}', SCHEMA)[1]


def test_retry_sends_the_error_back_and_stops_when_valid():
    prompts = []
    answers = iter(['Sure! {"age": 3}', '{"age": "three"}', '{"age": 3}', '{"age": 4}'])

    def generate(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    result = retry(generate, SCHEMA, "age?", max_attempts=5)
    assert result.ok and result.value == {"age": 3} and result.num_attempts == 3
    assert prompts[0] == "age?"
    assert "not valid JSON" in prompts[1] and 'Sure! {"age": 3}' in prompts[1]
    assert "is not of type 'integer'" in prompts[2]


def test_retry_is_bounded():
    calls = []
    result = retry(lambda p: calls.append(p) or "nope", SCHEMA, "age?", max_attempts=2)
    assert not result.ok and result.value is None and len(calls) == 2
    assert all(a.error for a in result.attempts)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_retry_checks_max_attempts(bad):
    with pytest.raises(ValueError):
        retry(lambda p: "{}", SCHEMA, "x", max_attempts=bad)
