"""StopChecker: stop strings across tokens and multi-byte characters, stop tokens, EOS, min/max tokens."""

from hypothesis import given, settings
from hypothesis import strategies as st

from banister.sampling import SamplingParams, StopChecker
from banister.vocab import Vocabulary

EURO = "€".encode()  # e2 82 ac
PIECES = [b"<eos>", b"<sys>", b"a", b"b", b"c", b"ab", b"bc", b"x", b" ", EURO[:1], EURO[1:], "é".encode(), b"\xc3"]
EOS_ID, SPECIAL_ID = 0, 1
VOCAB = Vocabulary(PIECES, eos_token_ids=[EOS_ID], special_token_ids=[SPECIAL_ID])
ID = {p: i for i, p in enumerate(PIECES)}


def _feed(params: SamplingParams, pieces: list[bytes]) -> tuple[StopChecker, list[str]]:
    checker = StopChecker(params, VOCAB)
    deltas = []
    for piece in pieces:
        done = checker.append(ID[piece])
        deltas.append(checker.take_text())
        if done:
            break
    return checker, deltas


def test_stop_string_split_across_tokens():
    checker, deltas = _feed(SamplingParams(stop=["bc"], max_tokens=50), [b"x", b"a", b"b", b"c", b"x"])
    assert checker.finished and checker.finish_reason == "stop" and checker.stop_reason == "bc"
    assert checker.text == "xa" and "".join(deltas) == "xa"
    assert checker.token_ids == [ID[b"x"], ID[b"a"], ID[b"b"], ID[b"c"]]
    checker, _ = _feed(SamplingParams(stop=["bc"], include_stop_str_in_output=True), [b"x", b"ab", b"c"])
    assert checker.text == "xabc"


def test_text_that_may_still_become_a_stop_string_is_held_back():
    checker = StopChecker(SamplingParams(stop=["abc"], max_tokens=50), VOCAB)
    checker.append(ID[b"x"])
    checker.append(ID[b"ab"])
    assert checker.take_text() == "x"  # "ab" could still become "abc"
    checker.append(ID[b"x"])
    assert checker.take_text() == "abx"
    assert not checker.finished


def test_multibyte_character_split_across_tokens_is_never_split_in_the_stream():
    checker = StopChecker(SamplingParams(max_tokens=50), VOCAB)
    checker.append(ID[b"x"])
    checker.append(ID[EURO[:1]])
    assert checker.take_text() == "x"  # the lead byte of € waits for the rest
    checker.append(ID[EURO[1:]])
    assert checker.take_text() == "€"
    # A stop string made of a multi-byte character, itself split across tokens.
    checker, deltas = _feed(SamplingParams(stop=["€"]), [b"a", EURO[:1], EURO[1:], b"b"])
    assert checker.finished and checker.text == "a" and deltas == ["a", "", ""]
    checker, _ = _feed(SamplingParams(stop=["x€"], include_stop_str_in_output=True), [b"x", EURO[:1], EURO[1:]])
    assert checker.text == "x€"


def test_a_character_cut_off_at_the_end_is_shown_as_a_replacement():
    checker, deltas = _feed(SamplingParams(max_tokens=2), [b"a", b"\xc3"])
    assert checker.finish_reason == "length" and deltas == ["a", "\ufffd"]


def test_min_tokens_holds_back_stop_strings_eos_and_stop_tokens():
    params = SamplingParams(stop=["ab"], stop_token_ids=[ID[b"c"]], min_tokens=4, max_tokens=50)
    checker, _ = _feed(params, [b"ab", b"<eos>", b"c", b"b"])  # all before the fourth token
    assert not checker.finished
    assert checker.text == "abcb"  # EOS is special: no text
    checker.append(ID[b"a"])
    checker.append(ID[b"b"])  # "ab" completes after min_tokens
    assert checker.finished and checker.text == "abcb"
    # A stop string finished before min_tokens does not stop later on.
    checker, _ = _feed(SamplingParams(stop=["ab"], min_tokens=3, max_tokens=3), [b"a", b"b", b"x"])
    assert checker.finish_reason == "length" and checker.text == "abx"


def test_eos_stop_tokens_and_ignore_eos():
    checker, _ = _feed(SamplingParams(), [b"a", b"<eos>", b"b"])
    assert checker.finish_reason == "stop" and checker.stop_reason is None and checker.text == "a"
    checker, _ = _feed(SamplingParams(ignore_eos=True, max_tokens=3), [b"a", b"<eos>", b"b"])
    assert checker.finish_reason == "length" and checker.text == "ab"
    checker, _ = _feed(SamplingParams(stop_token_ids=[ID[b"x"]]), [b"a", b"x", b"b"])
    assert checker.stop_reason == ID[b"x"] and checker.text == "a"
    checker, _ = _feed(SamplingParams(stop_token_ids=[ID[b"x"]], include_stop_str_in_output=True), [b"a", b"x"])
    assert checker.text == "ax"


def test_special_tokens_and_max_tokens():
    checker, _ = _feed(SamplingParams(max_tokens=3), [b"a", b"<sys>", b"b", b"c"])
    assert checker.finish_reason == "length" and checker.text == "ab" and len(checker.token_ids) == 3
    checker, _ = _feed(SamplingParams(skip_special_tokens=False, max_tokens=2), [b"a", b"<sys>"])
    assert checker.text == "a<sys>"
    try:
        checker.append(ID[b"a"])
    except ValueError as exc:
        assert "finished" in str(exc)
    else:
        raise AssertionError("appending after the end must fail")


ALPHABET = ["a", "b", "c", "é", "€", "😀", " "]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=14).map("".join),
    st.lists(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=3).map("".join), max_size=3),
    st.booleans(),
    st.data(),
)
def test_any_split_of_any_text_stops_where_the_first_stop_string_ends(text, stops, include, data):
    raw = text.encode()
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(raw) - 1)), max_size=len(raw))) - {len(raw)})
    pieces = [raw[i:j] for i, j in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    vocab = Vocabulary([b"<eos>", *dict.fromkeys(pieces)], eos_token_ids=[0])
    ids = {p: i for i, p in enumerate(vocab.tokens)}
    checker = StopChecker(SamplingParams(stop=stops, include_stop_str_in_output=include, max_tokens=None), vocab)
    stream = []
    for piece in pieces:
        done = checker.append(ids[piece])
        stream.append(checker.take_text())
        if done:
            break
    stream.append(checker.take_text())
    # Reference: the occurrence that ends first (the longest among those ending together).
    hits = [(text.find(s) + len(s), -len(s)) for s in stops if s in text]
    if hits:
        end, neg = min(hits)
        expected = text[:end] if include else text[: end + neg]
        assert checker.finished and checker.stop_reason == text[end + neg : end]
    else:
        expected = text
        assert not checker.finished
    assert checker.text == expected
    if checker.finished:
        assert "".join(stream) == expected
    else:
        assert expected.startswith("".join(stream))
    assert all("\ufffd" not in s for s in stream)
