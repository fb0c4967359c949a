"""The lab's experiments on the toy model and on exact small models: each returns a :class:`Result`.

Mask cost and tokenizations on a real vocabulary live in :mod:`banister.lab.real`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from banister import Compiler, Matcher, Vocabulary, allocate_token_bitmask, apply_token_bitmask_inplace
from banister.engine.toy import ToyModel
from banister.lab.result import Result, new_figure
from banister.lab.sampling import Answer, first_step_logits, generate, generate_many
from banister.retry import retry, validate_answer

AGE_PATTERN = r'\{"age": [0-9]+\}'
AGE_REFERENCE = '{"age": 42}'
PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
NULLABLE_PERSON_SCHEMA: dict[str, Any] = {
    **PERSON_SCHEMA,
    "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"], "minimum": 0, "maximum": 150}},
}
AGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"age": {"type": "integer"}},
    "required": ["age"],
    "additionalProperties": False,
}
#: How much more the lab's toy models score the chatter path (the toy's default, 1.0, chatters nearly always).
CHATTER_BIAS = -2.5
CATEGORIES = ("valid", "chatter", "broken inside", "cut off")
_COLORS = {"valid": "#4c9a2a", "chatter": "#e0a030", "broken inside": "#c0392b", "cut off": "#7f8c8d"}


def toy_model(reference: str = '{"name": "Ada", "age": 42}', seed: int = 0) -> ToyModel:
    """The lab's toy model: copies ``reference``, opening with chatter about a third of the time."""
    return ToyModel(reference, seed=seed, chatter_bias=CHATTER_BIAS)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x[np.isfinite(x)].max())
    z[~np.isfinite(x)] = 0.0
    return z / z.sum()


# -- 1. validity versus length -----------------------------------------------------------------------


def validity_vs_length(accuracies: Sequence[float] = (0.9, 0.95, 0.98, 0.99, 0.999), max_length: int = 200) -> Result:
    """The chance that ``n`` tokens are all right when each is right with probability ``p``: ``p ** n``."""
    lengths = np.arange(1, max_length + 1)
    curves = {p: p**lengths for p in accuracies}
    marks = (10, 50, 100)
    fig = new_figure()
    ax = fig.add_subplot()
    for p, ys in curves.items():
        ax.plot(lengths, ys, label=f"p = {p}")
    for n in (10, 100):
        ax.plot([n], [0.98**n], "ko")
        ax.annotate(f"{0.98**n:.3f}", (n, 0.98**n), textcoords="offset points", xytext=(5, 5))
    ax.set(xlabel="answer length (tokens)", ylabel="P(all tokens right) = p^n", ylim=(0, 1.02))
    ax.legend()
    return Result(
        "validity_vs_length",
        "Validity falls with length: p^n",
        "A model right on 98% of tokens writes a valid 10-token answer 81.7% of the time and a 100-token one 13.3%.",
        {"p_n": {(p, n): p**n for p in accuracies for n in marks}},
        ("p", *(f"n = {n}" for n in marks)),
        [(p, *(f"{p**n:.3f}" for n in marks)) for p in accuracies],
        fig,
    )


# -- 2. one masked step --------------------------------------------------------------------------------


def masked_step(model: ToyModel | None = None, pattern: str = AGE_PATTERN, top: int = 8) -> Result:
    """The toy model's first-token probabilities before and after the mask of ``pattern``."""
    model = model or toy_model(AGE_REFERENCE)
    vocab = model.tokenizer.vocabulary
    logits = first_step_logits(model)
    before = _softmax(logits)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    Matcher(Compiler(vocab).regex(pattern)).fill_next_token_bitmask(bitmask)
    masked = logits.copy()[None]
    apply_token_bitmask_inplace(masked, bitmask)
    after = _softmax(masked[0])
    shown = sorted(set(np.argsort(-before)[:top]) | set(np.flatnonzero(after > 0)), key=lambda t: -before[t])
    labels = [repr(vocab.token_bytes(int(t)).decode(errors="replace")) for t in shown]
    allowed = np.flatnonzero(after > 0)
    fig = new_figure(7.0, 3.6)
    ax = fig.add_subplot()
    x = np.arange(len(shown))
    ax.bar(x - 0.2, before[shown], 0.4, label="model alone")
    ax.bar(x + 0.2, after[shown], 0.4, label="after the mask")
    ax.set_xticks(x, labels, rotation=45, ha="right")
    ax.set(ylabel="P(first token)", title=f"first token, pattern {pattern}")
    ax.legend()
    return Result(
        "masked_step",
        "One masked step",
        "The mask sets every token that cannot start a valid answer to zero and renormalises the rest; "
        "the allowed tokens keep their odds against each other.",
        {
            "before": {labels[i]: float(before[t]) for i, t in enumerate(shown)},
            "after": {labels[i]: float(after[t]) for i, t in enumerate(shown)},
            "allowed_mass_before": float(before[allowed].sum()),
            "allowed": [int(t) for t in allowed],
            "before_all": before,
            "after_all": after,
        },
        ("token", "before", "after"),
        [(labels[i], f"{before[t]:.3f}", f"{after[t]:.3f}") for i, t in enumerate(shown)],
        fig,
    )


# -- 3. validity with and without constraints --------------------------------------------------------------


def outcome_bars(counts: Mapping[tuple[str, str], Counter[str]], n: int, xlabel: str) -> Figure:
    """Stacked bars, one per (task, mode): the share of ``n`` answers in each of :data:`CATEGORIES`."""
    fig = new_figure(7.0, 3.6)
    ax = fig.add_subplot()
    left = np.zeros(len(counts))
    for cat in CATEGORIES:
        widths = np.array([c[cat] / n for c in counts.values()])
        ax.barh([f"{t}\n{m}" for t, m in counts], widths, left=left, color=_COLORS[cat], label=cat)
        left += widths
    ax.set(xlabel=xlabel, xlim=(0, 1))
    ax.invert_yaxis()
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return fig


def classify(answer: Answer, is_valid: Callable[[str], bool]) -> str:
    """One of :data:`CATEGORIES`: valid, chatter before the answer, broken inside, or cut off by the budget."""
    if answer.finished and is_valid(answer.text):
        return "valid"
    if not answer.text.lstrip().startswith("{"):
        return "chatter"
    return "broken inside" if answer.finished else "cut off"


def _age_valid(text: str) -> bool:
    return re.fullmatch(AGE_PATTERN, text) is not None


def schema_check(schema: Mapping[str, Any]) -> Callable[[str], bool]:
    return lambda text: validate_answer(text, schema)[1] is None


def validity(n: int = 200, max_tokens: int = 32) -> Result:
    """``n`` toy answers per task (age pattern, person schema), with and without the mask, sorted by outcome."""
    age_model, person_model = toy_model(AGE_REFERENCE), toy_model()
    age_compiler, person_compiler = (
        Compiler(age_model.tokenizer.vocabulary),
        Compiler(person_model.tokenizer.vocabulary),
    )
    tasks = {
        "age pattern": (age_model, age_compiler.regex(AGE_PATTERN), _age_valid),
        "person schema": (person_model, person_compiler.json_schema(PERSON_SCHEMA), schema_check(PERSON_SCHEMA)),
    }
    counts: dict[tuple[str, str], Counter[str]] = {}
    examples: dict[tuple[str, str], dict[str, str]] = {}
    for task, (model, grammar, check) in tasks.items():
        for mode, g in (("unconstrained", None), ("constrained", grammar)):
            answers = generate_many(model, g, n, seed=len(counts) * n, max_tokens=max_tokens)
            kinds = [classify(a, check) for a in answers]
            counts[task, mode] = Counter(kinds)
            examples[task, mode] = {k: a.text for k, a in zip(kinds, answers, strict=True)}
    return Result(
        "validity",
        "Asking nicely versus constraining",
        "Unconstrained, the toy model opens with chatter or breaks the answer; constrained, every finished "
        "answer is valid and the only possible failure is running out of tokens.",
        {"n": n, "counts": {k: dict(v) for k, v in counts.items()}, "examples": examples},
        ("task", "mode", *CATEGORIES),
        [(t, m, *(c[cat] for cat in CATEGORIES)) for (t, m), c in counts.items()],
        outcome_bars(counts, n, f"share of {n} answers"),
    )


# -- 4. the mask table ---------------------------------------------------------------------------------------


SMALL_VOCAB = ('{', '}', '"', '{"', '"}', 'age', '": ', ': ', ' ', '4', '2', '42', '7', 'x', 'Sure')  # fmt: skip


def mask_table(pattern: str = AGE_PATTERN, tokens: Sequence[str] = SMALL_VOCAB) -> Result:
    """The table a compiled pattern reads from: for every DFA state, which tokens keep the match alive."""
    vocab = Vocabulary([t.encode() for t in tokens] + [b"</s>"], eos_token_ids=[len(tokens)])
    automaton = Compiler(vocab).regex(pattern).automaton
    states = _reachable_states(automaton, vocab)
    table = np.array(
        [[automaton.advance(s, vocab.token_bytes(t)) is not None for t in range(len(tokens))] for s in states]
    )
    fig = new_figure(7.0, 0.35 * len(states) + 1.5)
    ax = fig.add_subplot()
    ax.imshow(table, cmap="Greens", aspect="auto", vmin=0, vmax=1.4)
    ax.set_xticks(range(len(tokens)), [repr(t) for t in tokens], rotation=60, ha="right", fontsize="small")
    accepting = ["*" if automaton.is_accepting(s) else "" for s in states]
    ax.set_yticks(range(len(states)), [f"s{i}{a}" for i, a in enumerate(accepting)])
    ax.set(title=f"mask table of {pattern} (green: allowed; * accepting)")
    return Result(
        "mask_table",
        "The mask table",
        f"{len(states)} states by {len(tokens)} tokens, built once at compile time; each step reads one row.",
        {"pattern": pattern, "tokens": list(tokens), "states": states, "table": table, "vocab": vocab},
        ("state", "allowed tokens"),
        [
            (f"s{i}{accepting[i]}", " ".join(repr(t) for t, ok in zip(tokens, row, strict=True) if ok) or "(none)")
            for i, row in enumerate(table)
        ],
        fig,
    )


def _reachable_states(automaton: Any, vocab: Vocabulary) -> list[Any]:
    """States reachable from the start by whole tokens, in breadth-first order."""
    order, seen = [automaton.initial], {automaton.initial}
    for state in order:
        for t in range(vocab.vocab_size):
            if t in vocab.eos_token_ids:
                continue
            nxt = automaton.advance(state, vocab.token_bytes(t))
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                order.append(nxt)
    return order


# -- 5. distortion ------------------------------------------------------------------------------------------------

#: A two-step model: first token A or B, then x or y. Only answers ending in y are valid.
TWO_STEP_FIRST = {"A": 0.9, "B": 0.1}
TWO_STEP_SECOND = {"A": {"x": 0.99, "y": 0.01}, "B": {"x": 0.1, "y": 0.9}}


def two_step_distributions(
    first: Mapping[str, float] = TWO_STEP_FIRST,
    second: Mapping[str, Mapping[str, float]] = TWO_STEP_SECOND,
    valid_end: str = "y",
) -> tuple[dict[str, float], dict[str, float]]:
    """Exact ``(model's odds among valid answers, token-by-token masking)`` for a two-step model."""
    joint = {a + valid_end: first[a] * second[a][valid_end] for a in first}
    total = sum(joint.values())
    conditional = {k: v / total for k, v in joint.items()}
    # step 1: every first token can still end validly, so nothing is masked; step 2: only valid_end survives
    masked = {a + valid_end: first[a] * second[a][valid_end] / second[a][valid_end] for a in first}
    return conditional, masked


def distortion(n: int = 200) -> Result:
    """Masking versus the model's own odds among valid answers: exact on a two-step model, measured on the toy."""
    conditional, masked = two_step_distributions()
    model = toy_model(AGE_REFERENCE)
    choice = Compiler(model.tokenizer.vocabulary).choice(["Sure", AGE_REFERENCE])
    free = [a.text for a in generate_many(model, None, n) if a.finished]
    valid_free = [t for t in free if t in ("Sure", AGE_REFERENCE)]
    constrained = [a.text for a in generate_many(model, choice, n, seed=10_000) if a.finished]
    toy_own = {t: valid_free.count(t) / max(len(valid_free), 1) for t in ("Sure", AGE_REFERENCE)}
    toy_masked = {t: constrained.count(t) / max(len(constrained), 1) for t in ("Sure", AGE_REFERENCE)}
    fig = new_figure(8.0, 3.4)
    for i, (title, own, mask) in enumerate(
        (("two-step model (exact)", conditional, masked), ("toy model: 'Sure' or the answer", toy_own, toy_masked))
    ):
        ax = fig.add_subplot(1, 2, i + 1)
        x = np.arange(len(own))
        ax.bar(x - 0.2, list(own.values()), 0.4, label="model's odds among valid")
        ax.bar(x + 0.2, [mask[k] for k in own], 0.4, label="token-by-token mask")
        ax.set_xticks(x, list(own))
        ax.set(title=title, ylim=(0, 1.05))
        if i == 0:
            ax.legend(fontsize="small")
    rows = [("two-step", k, f"{conditional[k]:.3f}", f"{masked[k]:.3f}") for k in conditional]
    rows += [("toy", k, f"{toy_own[k]:.3f}", f"{toy_masked[k]:.3f}") for k in toy_own]
    return Result(
        "distortion",
        "Distortion: the mask decides one token at a time",
        "Two-step model: A 0.9 / B 0.1, then A→y 0.01, B→y 0.9; only '…y' is valid. Among valid answers the model "
        "prefers By (0.09 against 0.009, so Ay gets 0.009/0.099 = 0.091), but masking lets A through at step 1 "
        "(both can still end in y) and then forces y: Ay comes out 0.9 of the time. The toy model does the same "
        "with the choice 'Sure' or the answer: it almost never stops after 'Sure' on its own, yet under the mask "
        "its taste for chatter at step 1 decides.",
        {
            "two_step_conditional": conditional,
            "two_step_masked": masked,
            "toy_own": toy_own,
            "toy_masked": toy_masked,
            "toy_valid_unconstrained": len(valid_free),
        },
        ("model", "answer", "own odds among valid", "masked"),
        rows,
        fig,
    )


# -- 6. forced choice ------------------------------------------------------------------------------------------

#: The model's honest belief for an age the text never states.
AGE_BELIEF = {"null": 0.75, "30": 0.15, "45": 0.1}


def forced_choice(belief: Mapping[str, float], allowed: Sequence[str]) -> tuple[dict[str, float], float]:
    """Renormalise ``belief`` over ``allowed``: ``(new belief, share thrown away)``."""
    kept = sum(belief[a] for a in allowed if a in belief)
    if kept <= 0:
        raise ValueError("the mask leaves no belief at all")
    return {a: belief.get(a, 0.0) / kept for a in allowed}, 1.0 - kept


def forced_choice_experiment(n: int = 100) -> Result:
    """An integer field forces an invented age; a nullable one lets the model say null (exact, then the toy)."""
    renorm, thrown = forced_choice(AGE_BELIEF, [k for k in AGE_BELIEF if k != "null"])
    model = toy_model('{"name": "Ada", "age": null}')
    compiler = Compiler(model.tokenizer.vocabulary)
    outcomes: dict[str, Counter[str]] = {}
    for label, schema in (("integer age", PERSON_SCHEMA), ("nullable age", NULLABLE_PERSON_SCHEMA)):
        counts: Counter[str] = Counter()
        for a in generate_many(model, compiler.json_schema(schema), n, max_tokens=40):
            value: Any
            value, error = validate_answer(a.text, schema) if a.finished else (None, "cut off")
            if error is not None:
                counts["cut off"] += 1
            else:
                counts["null" if value["age"] is None else "invented number"] += 1
        outcomes[label] = counts
    fig = new_figure(8.0, 3.4)
    ax = fig.add_subplot(1, 2, 1)
    x = np.arange(len(AGE_BELIEF))
    ax.bar(x - 0.2, list(AGE_BELIEF.values()), 0.4, label="belief")
    ax.bar(x + 0.2, [renorm.get(k, 0.0) for k in AGE_BELIEF], 0.4, label="after an integer mask")
    ax.set_xticks(x, list(AGE_BELIEF))
    ax.set(title=f"the mask throws away {thrown:.0%}")
    ax.legend(fontsize="small")
    ax = fig.add_subplot(1, 2, 2)
    kinds = ("null", "invented number", "cut off")
    left = np.zeros(len(outcomes))
    for kind, color in zip(kinds, ("#4c9a2a", "#c0392b", "#7f8c8d"), strict=True):
        w = np.array([c[kind] / n for c in outcomes.values()])
        ax.barh(list(outcomes), w, left=left, label=kind, color=color)
        left += w
    ax.set(title="toy model that means null", xlim=(0, 1))
    ax.legend(fontsize="small")
    return Result(
        "forced_choice",
        "Forced choice, and a nullable field as the fix",
        f"A model {AGE_BELIEF['null']:.0%} sure the age is unknown, masked to integers, loses that share of its "
        "belief and writes a made-up age as confidently as a real one. Allowing null removes the pressure.",
        {"renormalised": renorm, "thrown_away": thrown, "toy": {k: dict(v) for k, v in outcomes.items()}},
        ("schema", *kinds),
        [(k, *(c[kind] for kind in kinds)) for k, c in outcomes.items()],
        fig,
    )


# -- 7. retries -----------------------------------------------------------------------------------------------------


def expected_attempts(p: float) -> float:
    """Average calls until one is valid, when each is valid with probability ``p``: ``1 / p``."""
    if not 0 < p <= 1:
        raise ValueError(f"p must be in (0, 1], got {p}")
    return 1.0 / p


def all_fail(p: float, k: int) -> float:
    """The chance that ``k`` independent tries all fail: ``(1 - p) ** k``."""
    if not 0 <= p <= 1 or k < 0:
        raise ValueError(f"need 0 <= p <= 1 and k >= 0, got p={p}, k={k}")
    return (1.0 - p) ** k


def _toy_caller(model: ToyModel) -> Callable[[str], str]:
    """A ``generate(prompt) -> text`` callable over the unconstrained toy model, a new seed per call."""
    seeds = itertools.count()

    def call(prompt: str) -> str:
        return generate(model, None, seed=next(seeds), prompt=prompt, max_tokens=40).text

    return call


def retries(n: int = 100, max_attempts: int = 3) -> Result:
    """Retry math beside :func:`banister.retry.retry` driving the toy model on the age and person tasks."""
    measured: dict[str, dict[str, float]] = {}
    for task, model, schema in (
        ("age", toy_model(AGE_REFERENCE), AGE_SCHEMA),
        ("person", toy_model(), PERSON_SCHEMA),
    ):
        call = _toy_caller(model)

        results = [retry(call, schema, f"user: give the {task} as JSON\n", max_attempts=max_attempts) for _ in range(n)]
        first = sum(r.attempts[0].error is None for r in results) / n
        later = [a for r in results for a in r.attempts[1:]]
        p_later = sum(a.error is None for a in later) / len(later) if later else first
        measured[task] = {
            "p_first": first,
            "p_later": p_later,
            "success": sum(r.ok for r in results) / n,
            "mean_attempts": float(np.mean([r.num_attempts for r in results])),
            "predicted_success": 1 - all_fail(first, 1) * all_fail(p_later, max_attempts - 1),
            "expected_attempts": expected_attempts(first) if first > 0 else float("inf"),
        }
    ps = np.linspace(0.05, 1.0, 200)
    fig = new_figure(8.0, 3.4)
    ax = fig.add_subplot(1, 2, 1)
    ax.plot(ps, 1 / ps)
    for task, m in measured.items():
        if m["p_first"] > 0:
            ax.plot([m["p_first"]], [m["expected_attempts"]], "o", label=f"toy {task}")
    ax.set(xlabel="P(one try valid)", ylabel="expected tries 1/p", ylim=(0, 12))
    ax.legend(fontsize="small")
    ax = fig.add_subplot(1, 2, 2)
    for k in (1, 2, 3, 5):
        ax.plot(ps, (1 - ps) ** k, label=f"k = {k}")
    ax.set(xlabel="P(one try valid)", ylabel="P(all k tries fail)")
    ax.legend(fontsize="small")
    return Result(
        "retries",
        "Validate and retry",
        f"Each failure costs a whole call: 1/p calls on average; with {max_attempts} attempts the request fails "
        f"(1 - p)^{max_attempts} of the time. Measured with banister.retry on the toy model, which ignores what the "
        "feedback says; but a new prompt redraws its logit noise, so retries have their own p (the table's second "
        "column), and the prediction 1 - (1 - p1)(1 - p2)^(k-1) uses both.",
        {"measured": measured, "max_attempts": max_attempts},
        ("task", "p1 (first try)", "p2 (retries)", "1/p1", f"success in {max_attempts}", "predicted", "mean calls"),
        [
            (
                t,
                f"{m['p_first']:.3f}",
                f"{m['p_later']:.3f}",
                f"{m['expected_attempts']:.2f}",
                f"{m['success']:.3f}",
                f"{m['predicted_success']:.3f}",
                f"{m['mean_attempts']:.2f}",
            )
            for t, m in measured.items()
        ],
        fig,
    )


# -- 8. JSON mode versus a strict schema ----------------------------------------------------------------------------


def json_mode_vs_schema(n: int = 50) -> Result:
    """A toy model that forgot the age: JSON mode parses but misses it; the strict schema adds one (invented)."""
    model = toy_model('{"name": "Ada"}')
    compiler = Compiler(model.tokenizer.vocabulary)
    modes = {"JSON mode": compiler.json(), "strict schema": compiler.json_schema(PERSON_SCHEMA)}
    counts: dict[str, Counter[str]] = {}
    for mode, grammar in modes.items():
        c: Counter[str] = Counter()
        for a in generate_many(model, grammar, n, max_tokens=40):
            c["finished"] += a.finished
            try:
                value = json.loads(a.text)
            except json.JSONDecodeError:
                continue
            c["parses"] += 1
            c["fits schema"] += validate_answer(a.text, PERSON_SCHEMA)[1] is None
            c["has age"] += isinstance(value, dict) and "age" in value
        counts[mode] = c
    kinds = ("finished", "parses", "fits schema", "has age")
    fig = new_figure()
    ax = fig.add_subplot()
    x = np.arange(len(kinds))
    for i, (mode, c) in enumerate(counts.items()):
        ax.bar(x + (i - 0.5) * 0.4, [c[k] / n for k in kinds], 0.4, label=mode)
    ax.set_xticks(x, kinds)
    ax.set(ylabel=f"share of {n} answers", ylim=(0, 1.05), title='reference answer {"name": "Ada"} (no age)')
    ax.legend()
    return Result(
        "json_mode",
        "JSON mode versus a strict schema",
        "JSON mode guarantees something parseable, not your keys: the age is missing. The strict schema "
        "guarantees the shape, so the age is there, but the model had none, so it is made up.",
        {"n": n, "counts": {k: dict(v) for k, v in counts.items()}},
        ("mode", *kinds),
        [(m, *(c[k] for k in kinds)) for m, c in counts.items()],
        fig,
    )
