"""The engine on the default model (SmolLM2-135M-Instruct): validity, speed, jump-forward, healing.

    .venv/bin/python benchmarks/bench_engine.py [--threads 1] [--quick]

Sections, each printed as a table:

1. validity: 20 chat prompts over 5 MaskBench dev schemas (tool calls and nested objects),
   greedy, with the schema enforced (as is, and closing within the budget) and without; every
   finished constrained answer is checked with jsonschema, and the unconstrained valid rate is
   printed beside it (whole answer, and the first JSON object found in it);
2. speed: tokens per second, constrained versus unconstrained, the 20 prompts 8 at a time, and
   one prompt per schema alone;
3. jump-forward and JSON whitespace: decoding steps, forced tokens and time, on and off;
4. masks overlapped with the forward pass, on and off;
5. token healing: prompts that end in a space, with the answer constrained to a choice; accuracy and
   the answer's mean log-probability, with and without healing.

The machines these notes were written on are shared 2-core VMs where torch's two OpenMP threads
fight other processes for the cores; one thread is several times faster there (``--threads``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from pathlib import Path

import torch

from banister.engine import Engine, RequestOptions
from banister.engine.demo import check
from banister.sampling import SamplingParams

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "maskbench" / "dev.jsonl.gz"

# Schema id -> four tasks for it.
TASKS = {
    "Glaiveai2K---book_flight_9d21bbd6.json": [
        "Book a flight to Lisbon on 2025-06-01 for Ana Silva, age 34, passport P1234567.",
        "I need a flight to Tokyo on 2024-12-24; passenger Ken Sato, 51, passport TK998877.",
        "Book Maria Rossi (29, passport YA5550123) on a flight to Rome departing 2025-03-15.",
        "Flight for John Smith, 42, passport 533380006, going to New York on 2025-01-10.",
    ],
    "Glaiveai2K---analyze_health_data_4ad104b4.json": [
        "Analyze my heart rate: 72 at 2024-05-01T08:00:00Z and 80 at 2024-05-01T12:00:00Z.",
        "Here is my weight data: 70.5 kg on 2024-01-01T07:30:00Z. Analyze it.",
        "Blood pressure 120 measured 2024-02-10T09:15:00Z; analyze the data.",
        "Analyze steps: 9000 on 2024-03-03T20:00:00Z and 12000 on 2024-03-04T20:00:00Z.",
    ],
    "BFCL_java_22.json": [
        "Set the new status to 1 for products 12, 15 and 19.",
        "Update the status of product 7 to 0.",
        "Mark products 100 and 101 with new status 2.",
        "Change the status of products 3, 4, 5, 6 to 1.",
    ],
    "Github_medium---o1.json": [
        "Record a correction: primary key abc123, comment 'fix typo in README', module docs.",
        "Add two corrections for module core-lib: key k1 'wrong date', key k2 'missing author'.",
        "Correction for key XYZ-9 at line 42: 'update email'; author dev@example.org.",
        "List one correction with primary key id42 and comment 'rename variable'.",
    ],
    "Kubernetes---kb_1060_Normalized.json": [
        "A TCP socket probe on port 8080.",
        "Describe a TCP socket action to host db.internal on port 5432.",
        "TCP socket check on the named port http.",
        "A socket action for port 443 on host example.com.",
    ],
}

HEALING = [
    ("The capital of France is ", ["Paris", "London", "Berlin", "Madrid", "Rome"], "Paris"),
    ("The capital of Italy is ", ["Paris", "London", "Berlin", "Madrid", "Rome"], "Rome"),
    ("The capital of Germany is ", ["Paris", "London", "Berlin", "Madrid", "Rome"], "Berlin"),
    ("The capital of Spain is ", ["Paris", "London", "Berlin", "Madrid", "Rome"], "Madrid"),
    ("The capital of England is ", ["Paris", "London", "Berlin", "Madrid", "Rome"], "London"),
    ("The largest planet in the solar system is ", ["Jupiter", "Mars", "Venus", "Earth"], "Jupiter"),
    ("The red planet is called ", ["Jupiter", "Mars", "Venus", "Earth"], "Mars"),
    ("Water freezes at a temperature of ", ["0", "50", "100", "-40"], "0"),
    ("The opposite of hot is ", ["cold", "warm", "big", "fast"], "cold"),
    ("A baby cat is called a ", ["kitten", "puppy", "calf", "foal"], "kitten"),
]


def load_schemas() -> dict[str, dict]:
    wanted = set(TASKS)
    found = {}
    with gzip.open(DATA, "rt") as f:
        for line in f:
            record = json.loads(line)
            if record["id"] in wanted:
                schema = record["schema"]
                found[record["id"]] = schema if isinstance(schema, dict) else json.loads(schema)
    missing = wanted - set(found)
    if missing:
        raise SystemExit(f"schemas not found in {DATA}: {sorted(missing)}")
    return found


def prompts_for(schemas: dict[str, dict], quick: bool) -> list[tuple[str, dict, list[dict]]]:
    out = []
    for schema_id, tasks in TASKS.items():
        for task in tasks[: 1 if quick else None]:
            text = (f"{task}\nAnswer with one JSON object, and nothing else, that matches this JSON Schema:\n"
                    f"{json.dumps(schemas[schema_id])}")
            out.append((schema_id, schemas[schema_id], [{"role": "user", "content": text}]))
    return out


def first_json_object(text: str) -> str | None:
    """The first balanced {...} in ``text`` that parses as JSON (for the lenient unconstrained rate)."""
    for start in (m.start() for m in re.finditer(r"\{", text)):
        depth = 0
        for end in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                candidate = text[start : end + 1]
                try:
                    json.loads(candidate)
                    return candidate
                except json.JSONDecodeError:
                    break
    return None


def run(engine: Engine, items, params, options) -> tuple[list, float, dict]:
    before = dict(vars(engine.stats))
    start = time.perf_counter()
    outs = engine.generate([chat for _, _, chat in items], params, options)
    seconds = time.perf_counter() - start
    delta = {k: v - before[k] for k, v in vars(engine.stats).items()}
    return outs, seconds, delta


def section_validity(engine: Engine, items, max_tokens: int) -> None:
    print(f"\n== 1. validity: {len(items)} prompts over {len(TASKS)} MaskBench schemas, greedy, max_tokens {max_tokens}")
    constrained = [SamplingParams(temperature=0.0, max_tokens=max_tokens, json_schema=s) for _, s, _ in items]
    free = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    c_outs, c_s, c_stats = run(engine, items, constrained, RequestOptions())
    k_outs, _, _ = run(engine, items, constrained, RequestOptions(close_within_budget=True))
    f_outs, f_s, f_stats = run(engine, items, free, RequestOptions())
    rows: dict[str, list[int]] = {}
    for (schema_id, schema, _), c, k, f in zip(items, c_outs, k_outs, f_outs):
        row = rows.setdefault(schema_id, [0] * 8)
        row[0] += 1
        if c.outputs[0].incomplete:
            row[2] += 1
        else:
            row[1] += check(c.text, schema) is None
            row[3] += 1
        row[4] += k.outputs[0].budget_closed
        row[5] += not k.outputs[0].incomplete and check(k.text, schema) is None
        row[6] += check(f.text, schema) is None
        found = first_json_object(f.text)
        row[7] += found is not None and check(found, schema) is None
        for out in (c, k):
            if not out.outputs[0].incomplete and check(out.text, schema) is not None:
                print("  !! a finished constrained answer is invalid:", schema_id, check(out.text, schema))
    head = ("schema", "n", "valid/finished", "cut", "closed", "valid (closing)", "free: whole", "free: 1st {}")
    print("  {:<46} {:>2} {:>14} {:>4} {:>7} {:>15} {:>11} {:>12}".format(*head))
    total = [0] * 8
    for schema_id, row in [*rows.items(), ("all", None)]:
        if row is None:
            row = total
        else:
            total = [a + b for a, b in zip(total, row)]
        print(f"  {schema_id[:46]:<46} {row[0]:>2} {f'{row[1]}/{row[3]}':>14} {row[2]:>4} {row[4]:>7} "
              f"{f'{row[5]}/{row[0]}':>15} {f'{row[6]}/{row[0]}':>11} {f'{row[7]}/{row[0]}':>12}")
    print("\n== 2. speed (the same runs, 8 sequences at a time)")
    for name, outs, seconds, stats in (("constrained", c_outs, c_s, c_stats), ("unconstrained", f_outs, f_s, f_stats)):
        tokens = sum(o.usage.completion_tokens for o in outs)
        print(f"  {name:<14} {tokens:>5} tokens in {seconds:6.1f} s = {tokens / seconds:5.1f} tokens/s; "
              f"{stats['steps']} steps, forward {stats['forward_seconds']:.1f} s, masks {stats['mask_seconds']:.2f} s, "
              f"compile {stats['compile_seconds']:.2f} s")
    single = items[: len(TASKS) * 4 : 4]
    for name, params in (("constrained", [SamplingParams(temperature=0.0, max_tokens=max_tokens, json_schema=s)
                                         for _, s, _ in single]),
                         ("unconstrained", [SamplingParams(temperature=0.0, max_tokens=max_tokens)] * len(single))):
        tokens = seconds = 0.0
        for item, p in zip(single, params):
            outs, s_, _ = run(engine, [item], p, RequestOptions())
            tokens += outs[0].usage.completion_tokens
            seconds += s_
        print(f"  one at a time, {name:<14} {tokens / seconds:5.1f} tokens/s ({len(single)} prompts)")


def section_jump_forward(engine: Engine, items, max_tokens: int) -> None:
    print("\n== 3. jump-forward and JSON whitespace (one prompt per schema, strict, greedy)")
    print(f"  {'whitespace':<10} {'jump':<5} {'batch':<9} {'steps':>6} {'tokens':>7} {'forced':>7} {'seconds':>8} "
          f"{'tokens/s':>9} {'finished':>9} {'valid':>6}")
    grid = [("flexible", False, True), ("flexible", True, True), ("pretty", False, True), ("pretty", True, True),
            ("pretty", False, False), ("pretty", True, False)]
    for whitespace, jump, together in grid:
        options = RequestOptions(jump_forward=jump, json_options={"whitespace": whitespace, "strict": True})
        groups = [items] if together else [[item] for item in items]
        outs, seconds, stats = [], 0.0, {"steps": 0, "forced_tokens": 0}
        for group in groups:
            params = [SamplingParams(temperature=0.0, max_tokens=max_tokens, json_schema=s) for _, s, _ in group]
            o, sec, st = run(engine, group, params, options)
            outs += o
            seconds += sec
            stats = {k: stats[k] + st[k] for k in stats}
        tokens = sum(o.usage.completion_tokens for o in outs)
        done = [(o, s) for o, (_, s, _) in zip(outs, items) if not o.outputs[0].incomplete]
        valid = sum(check(o.text, s) is None for o, s in done)
        print(f"  {whitespace:<10} {jump!s:<5} {'together' if together else 'alone':<9} {stats['steps']:>6} "
              f"{tokens:>7} {stats['forced_tokens']:>7} {seconds:>8.1f} {tokens / seconds:>9.1f} {len(done):>9} {valid:>6}")


def section_overlap(engine: Engine, items, max_tokens: int) -> None:
    print("\n== 4. masks filled during the forward pass (one prompt per schema, constrained, greedy)")
    for overlap in (False, True):
        engine.overlap_masks = overlap
        params = [SamplingParams(temperature=0.0, max_tokens=max_tokens, json_schema=s) for _, s, _ in items]
        outs, seconds, stats = run(engine, items, params, RequestOptions())
        tokens = sum(o.usage.completion_tokens for o in outs)
        print(f"  overlap={overlap!s:<5} {seconds:6.1f} s, {tokens / seconds:5.1f} tokens/s, "
              f"mask time {stats['mask_seconds']:.2f} s, forward {stats['forward_seconds']:.1f} s, {stats['steps']} steps")
    engine.overlap_masks = False


def section_healing(engine: Engine) -> None:
    print("\n== 5. token healing: raw prompts ending in a space, answer constrained to a choice")
    for healing in (False, True):
        correct, logprob, count = 0, 0.0, 0
        for prompt, choices, answer in HEALING:
            params = SamplingParams(temperature=0.0, max_tokens=8, choice=choices, logprobs=0)
            out = engine.generate([prompt], params, RequestOptions(token_healing=healing))[0].outputs[0]
            correct += out.text.strip() == answer
            logprob += sum(lp.logprob for lp in out.logprobs)
            count += 1
        print(f"  healing={healing!s:<5} correct {correct}/{count}, mean log-probability of the answer "
              f"{logprob / count:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, see the docstring)")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="one prompt per schema and short answers")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    max_tokens = 60 if args.quick else args.max_tokens
    start = time.perf_counter()
    engine = Engine.from_pretrained("default")
    print(f"model loaded in {time.perf_counter() - start:.1f} s; torch threads {torch.get_num_threads()}; "
          f"max_batch_size {engine.max_batch_size}")
    items = prompts_for(load_schemas(), args.quick)
    one_per_schema = items[:: 1 if args.quick else 4]
    section_validity(engine, items, max_tokens)
    section_jump_forward(engine, one_per_schema, max_tokens)
    section_overlap(engine, one_per_schema, max_tokens)
    section_healing(engine)


if __name__ == "__main__":
    main()
