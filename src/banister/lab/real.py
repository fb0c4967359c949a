"""Experiments on a real vocabulary (GPT-2's, shipped in an installed package): tokenizations and mask cost."""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from banister import Compiler, Matcher, Vocabulary, allocate_token_bitmask
from banister.automaton import RegexAutomaton
from banister.lab.experiments import AGE_REFERENCE, toy_model
from banister.lab.result import Result, new_figure
from banister.vocab.named import load_named

TOKENIZATION_TEXTS = (
    AGE_REFERENCE,
    '{"name": "Ada", "age": 42}',
    '{"name": "Ada Lovelace", "age": 36, "city": "London"}',
)
COST_PATTERN = r'\{"name": "[A-Za-z ]{1,20}", "age": [0-9]{1,3}\}'
COST_ANSWER = '{"name": "Ada Lovelace", "age": 36}'


def count_tokenizations(text: str, tokens: Iterable[bytes]) -> int:
    """How many ways ``tokens`` can spell ``text`` exactly (a DP over byte offsets)."""
    pieces = {t for t in tokens if t}
    longest = max(map(len, pieces), default=0)
    data = text.encode()
    ways = [0] * (len(data) + 1)
    ways[len(data)] = 1
    for i in range(len(data) - 1, -1, -1):
        ways[i] = sum(ways[i + k] for k in range(1, min(longest, len(data) - i) + 1) if data[i : i + k] in pieces)
    return ways[0]


def _token_set(vocab: Vocabulary) -> set[bytes]:
    eos = set(vocab.eos_token_ids)
    return {vocab.token_bytes(t) for t in range(vocab.vocab_size) if t not in eos}


def tokenizations(texts: tuple[str, ...] = TOKENIZATION_TEXTS) -> Result:
    """Spellings of each answer in the toy vocabulary and in GPT-2's, beside the tokeniser's own one."""
    toy_vocab = toy_model().tokenizer.vocabulary
    gpt2 = load_named("gpt2")
    toy_tokens, gpt2_tokens = _token_set(toy_vocab), _token_set(gpt2.vocab)
    counts = {t: (count_tokenizations(t, toy_tokens), count_tokenizations(t, gpt2_tokens)) for t in texts}
    canonical = {t: len(gpt2.encode(t)) for t in texts}
    fig = new_figure(7.0, 3.4)
    ax = fig.add_subplot()
    x = np.arange(len(texts))
    ax.bar(x - 0.2, [np.log10(c[0]) for c in counts.values()], 0.4, label="toy vocabulary")
    ax.bar(x + 0.2, [np.log10(c[1]) for c in counts.values()], 0.4, label="GPT-2 vocabulary")
    ax.set_xticks(x, [f"answer {i + 1} ({len(t)} chars)" for i, t in enumerate(texts)])
    ax.set(ylabel="log10(number of spellings)")
    ax.legend()
    return Result(
        "tokenizations",
        "Many spellings, one answer",
        "The mask allows every spelling of a valid answer, but a trained model has mostly seen one: its "
        "tokeniser's. Forced onto an unusual spelling, it is off its training distribution.",
        {"counts": counts, "gpt2_canonical_tokens": canonical},
        ("answer", "toy spellings", "GPT-2 spellings", "GPT-2 tokeniser's tokens"),
        [(t, f"{c[0]:,}", f"{c[1]:,}", canonical[t]) for t, c in counts.items()],
        fig,
    )


def mask_cost_formula(
    answers: np.ndarray, steps: int, vocab_size: int, states: int, mean_token_bytes: float
) -> tuple[np.ndarray, np.ndarray]:
    """Byte checks for ``answers`` answers of ``steps`` tokens: ``(walk every token every step, table once)``.

    Naive: ``answers * steps * V * b``. Table: ``S * V * b`` once, then ``V / 32`` words copied per step.
    """
    naive = answers * steps * vocab_size * mean_token_bytes
    table = states * vocab_size * mean_token_bytes + answers * steps * vocab_size / 32
    return naive, table


def mask_cost(naive_steps: int | None = None, repeats: int = 50) -> Result:
    """The formula, then the same on GPT-2's vocabulary: checking every token per step versus reading a table."""
    gpt2 = load_named("gpt2")
    vocab = gpt2.vocab
    tokens = [vocab.token_bytes(t) for t in range(vocab.vocab_size)]
    mean_bytes = float(np.mean([len(t) for t in tokens]))
    answer_ids = gpt2.encode(COST_ANSWER)
    t0 = time.perf_counter()
    compiled = Compiler(vocab, cache_size=0).regex(COST_PATTERN)
    compile_s = time.perf_counter() - t0
    automaton = compiled.automaton
    if not isinstance(automaton, RegexAutomaton):
        raise TypeError("mask_cost needs a regex automaton")
    states = automaton.dfa.n_states
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)

    def fill_all() -> float:
        matcher = Matcher(compiled)
        start = time.perf_counter()
        for token in answer_ids:
            matcher.fill_next_token_bitmask(bitmask)
            matcher.accept_token(token)
        return (time.perf_counter() - start) / len(answer_ids)

    first_fill_s = fill_all()  # builds the rows of the visited states
    cached_fill_s = min(fill_all() for _ in range(repeats))
    naive_n = len(answer_ids) if naive_steps is None else min(naive_steps, len(answer_ids))
    matcher = Matcher(compiled)
    agree = True
    start = time.perf_counter()
    for token in answer_ids[:naive_n]:
        allowed = np.array([bool(t) and matcher.status(t) != "dead" for t in tokens])
        matcher.fill_next_token_bitmask(bitmask)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: vocab.vocab_size].astype(bool)
        bits[list(vocab.eos_token_ids)] = False
        agree &= bool(np.array_equal(allowed, bits))
        matcher.accept_token(token)
    naive_s = (time.perf_counter() - start) / naive_n
    answers = np.arange(1, 1001)
    naive, table = mask_cost_formula(answers, len(answer_ids), vocab.vocab_size, states, mean_bytes)
    fig = new_figure(8.0, 3.4)
    ax = fig.add_subplot(1, 2, 1)
    ax.loglog(answers, naive, label="walk every token every step")
    ax.loglog(answers, table, label="table built once")
    ax.set(xlabel="answers generated", ylabel="byte checks (formula)", title=f"V={vocab.vocab_size}, S={states}")
    ax.legend(fontsize="small")
    ax = fig.add_subplot(1, 2, 2)
    bars = {"naive per step": naive_s, "first fill per step": first_fill_s, "table read per step": cached_fill_s}
    ax.bar(list(bars), [v * 1e6 for v in bars.values()])
    ax.set_yscale("log")
    ax.set(ylabel="microseconds", title="measured on GPT-2 with banister")
    return Result(
        "mask_cost",
        "What the mask costs",
        "Checking every token at every step costs the same for every answer; the table pays once per state "
        "and then each step copies one row. Naive here is a Python walk of every token (Matcher.status); "
        "banister's first fill walks the vocabulary trie once per state.",
        {
            "vocab_size": vocab.vocab_size,
            "states": states,
            "compile_s": compile_s,
            "naive_step_s": naive_s,
            "first_fill_step_s": first_fill_s,
            "cached_fill_step_s": cached_fill_s,
            "naive_agrees_with_table": agree,
            "steps": len(answer_ids),
        },
        ("quantity", "value"),
        [
            ("vocabulary / DFA states / answer tokens", f"{vocab.vocab_size} / {states} / {len(answer_ids)}"),
            ("compile", f"{compile_s * 1e3:.1f} ms"),
            (f"naive walk per step ({naive_n} steps)", f"{naive_s * 1e3:.1f} ms"),
            ("first fill per step (builds rows)", f"{first_fill_s * 1e6:.0f} µs"),
            ("table read per step", f"{cached_fill_s * 1e6:.1f} µs"),
            ("naive mask equals banister's", str(agree)),
        ],
        fig,
    )
