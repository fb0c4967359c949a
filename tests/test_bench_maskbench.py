"""The MaskBench protocol on a fixed sample, through the real Matcher and the Llama-3 vocabulary.

Each instance's verdict (walked token by token through the masks) must equal the slow Earley oracle's
on the same grammar, and no instance that `jsonschema` calls invalid may be accepted.
"""

import json
import random

import jsonschema
import pytest

from banister.bench.maskbench import EngineTally, read_records, run_record
from banister.bench.peers import BanisterEngine
from banister.errors import BanisterError
from banister.grammar.json_schema import json_schema_to_grammar
from banister.grammar.reference import matches
from banister.vocab.named import load_named
from shared_data import MASKBENCH_DEV

SAMPLE = 25


@pytest.fixture(scope="module")
def sample():
    if not MASKBENCH_DEV.exists():
        pytest.skip("MaskBench data not present")
    records = list(read_records(str(MASKBENCH_DEV)))
    return random.Random(7).sample(records, SAMPLE)


def test_protocol_agrees_with_the_oracle_and_accepts_nothing_invalid(sample):
    named = load_named("llama3")
    engine = BanisterEngine(named.vocab, named.encode)
    tally = EngineTally("banister")
    checked = 0
    for record in sample:
        before = (tally.valid_rejected, tally.invalid_accepted)
        run_record(engine, record, named.encode, named.vocab, tally)
        try:
            grammar = json_schema_to_grammar(record["schema"])
        except BanisterError:
            continue  # counted by run_record as a compile error
        expected_wrong = 0
        for test in record["tests"]:
            text = json.dumps(test["data"], ensure_ascii=False)
            accepted = matches(grammar, text)
            expected_wrong += accepted != test["valid"]
            if accepted and not test["valid"]:
                jsonschema.validate(test["data"], record["schema"])  # the label would be wrong: fail loudly
            checked += 1
        after = (tally.valid_rejected, tally.invalid_accepted)
        assert sum(after) - sum(before) == expected_wrong, record["id"]
    assert tally.invalid_accepted == 0, tally.failures
    assert checked > 0 and tally.schemas == SAMPLE
    print(f"\nMaskBench sample: {tally.passing}/{tally.schemas} passing, {tally.compile_errors} compile errors, "
          f"{tally.valid_rejected} valid rejected, {tally.invalid_accepted} invalid accepted")
