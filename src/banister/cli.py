"""The `banister` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import numpy as np

from banister import __version__, _build
from banister.collector import add_gc_options, whole_number_arg
from banister.compiler import Compiler
from banister.errors import BanisterError
from banister.mask.bitmask import allocate_token_bitmask, unpack_bitmask
from banister.matcher import Matcher
from banister.vocab import Vocabulary


def _byte_vocabulary() -> Vocabulary:
    """One token per byte value plus EOS: checks text without any real tokenizer."""
    return Vocabulary([bytes([b]) for b in range(256)] + [b"</s>"], eos_token_ids=[256])


def _cmd_check(args: argparse.Namespace) -> int:
    matcher = Matcher(Compiler(_byte_vocabulary()).regex(args.pattern))
    status = matcher.status(args.text)
    result: dict[str, object] = {"status": status}
    if status == "dead":
        offset = matcher.dead_offset(args.text)
        result["dies_at"] = offset
        if offset is None:  # every character keeps it alive but the bytes don't: an invalid encoding
            result["dies_at"] = len(args.text)
        else:
            result["context"] = args.text[max(0, offset - 20) : offset] + "⟦" + args.text[offset:][:20]
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(f"status: {status}")
        if status == "dead":
            print(f"dies at character {result['dies_at']}: {result.get('context', '')}")
    return 0 if status == "complete" else 1


def _cmd_compile(args: argparse.Namespace) -> int:
    from banister.vocab.named import load_named

    t0 = time.perf_counter()
    vocab = load_named(args.vocab).vocab
    trie_start = time.perf_counter()
    vocab.trie  # noqa: B018 - build the vocabulary-level table outside the timed compile
    load_s, trie_s = trie_start - t0, time.perf_counter() - trie_start
    compiler = Compiler(vocab, max_states=args.max_states)
    compiled = compiler.regex(args.pattern) if args.pattern is not None else compiler.choice(args.choice)
    matcher = Matcher(compiled)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    t1 = time.perf_counter()
    matcher.fill_next_token_bitmask(bitmask)
    first_s = time.perf_counter() - t1
    reps = 200
    t2 = time.perf_counter()
    for _ in range(reps):
        matcher.fill_next_token_bitmask(bitmask)
    cached_s = (time.perf_counter() - t2) / reps
    allowed = np.flatnonzero(unpack_bitmask(bitmask, vocab.vocab_size)[0])
    dfa = getattr(compiled.automaton, "dfa", None)
    report = {
        "vocabulary": args.vocab,
        "vocab_size": vocab.vocab_size,
        "vocab_load_ms": round(load_s * 1e3, 1),
        "trie_build_ms": round(trie_s * 1e3, 1),
        "states": dfa.n_states if dfa is not None else None,
        "compile_ms": round(compiled.compile_seconds * 1e3, 3),
        "first_mask_us": round(first_s * 1e6, 1),
        "cached_mask_us": round(cached_s * 1e6, 2),
        "tokens_allowed_at_start": int(allowed.size),
        "sample_allowed": [vocab.tokens[t].decode("utf-8", "replace") for t in allowed[: args.show]],
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        for key, value in report.items():
            print(f"{key:>24}: {value}")
    return 0


def _cmd_bench_maskbench(args: argparse.Namespace) -> int:
    from banister.bench.maskbench import main_maskbench

    return main_maskbench(args.data, args.tokenizer, args.engines.split(","), limit=args.limit, split=args.split,
                          json_out=args.json, show_failures=args.show_failures, sample=args.sample, seed=args.seed,
                          extras=not args.no_extras, gc_threshold=args.gc_threshold, gc_thaw_every=args.gc_thaw_every,
                          checkpoint=args.checkpoint, by_split=args.by_split, jobs=args.jobs, shard=args.shard,
                          report=args.report)


def _shard_arg(text: str) -> tuple[int, int]:
    """The command-line type of ``--shard K/N``: whole numbers with 1 <= K <= N."""
    k, sep, n = text.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"expected K/N with 1 <= K <= N, not {text!r}")
    return int(k), int(n)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="banister", description="Structured generation for language models.")
    parser.add_argument("--version", action="version", version=f"banister {__version__} ({_build.describe()})")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="check a text against a regex: status and where it dies")
    check.add_argument("pattern", help="the regex the whole text must match")
    check.add_argument("text", help="the text to check")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(run=_cmd_check)

    comp = sub.add_parser("compile", help="compile a regex or choices on a real vocabulary and time its masks")
    what = comp.add_mutually_exclusive_group(required=True)
    what.add_argument("pattern", nargs="?", help="the regex to compile")
    what.add_argument("--choice", nargs="+", metavar="TEXT", help="compile these literal alternatives instead")
    comp.add_argument("--vocab", default="llama3", help="named vocabulary: llama3, qwen, gpt2, mistral, smollm2")
    comp.add_argument("--max-states", type=int, default=10_000, help="DFA state limit (default 10000)")
    comp.add_argument("--show", type=int, default=10, help="how many allowed start tokens to list")
    comp.add_argument("--json", action="store_true", help="print one JSON object")
    comp.set_defaults(run=_cmd_compile)

    bench = sub.add_parser("bench", help="benchmarks side by side with the peer engines")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    mb = bench_sub.add_parser("maskbench", help="the MaskBench protocol for every engine over the same records")
    mb.add_argument("--data", required=True, help="MaskBench records: JSON lines, optionally gzipped")
    mb.add_argument("--tokenizer", default="llama3", help="named vocabulary (default llama3)")
    mb.add_argument("--engines", default="banister,llguidance,xgrammar",
                    help="comma-separated: banister, llguidance, xgrammar, outlines-core (banister first for ratios)")
    mb.add_argument("--limit", type=int, help="only the first N records (after --split)")
    mb.add_argument("--split", help="only records of this split, e.g. Github_easy")
    mb.add_argument("--sample", type=int,
                    help="a random sample of N records (after --split and --limit), in a random order; N at least "
                         "their number times them all in that order")
    mb.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    mb.add_argument("--json", metavar="OUT", help="also write the summary as JSON to OUT")
    mb.add_argument("--show-failures", type=int, default=5, help="failures listed per engine (default 5)")
    add_gc_options(mb, how=", as `banister serve` runs")
    mb.add_argument("--no-extras", action="store_true",
                    help="skip banister's untimed extras: jump-forward share and memory per compiled grammar")
    mb.add_argument("--checkpoint", metavar="FILE",
                    help="keep each timed record's results in FILE as it finishes; run the same command again "
                         "to go on from where it stopped (for runs longer than one sitting)")
    mb.add_argument("--by-split", action="store_true",
                    help="also one line per split: schemas passing per engine and banister's ratio to the better "
                         "peer at time to first mask p50, mask p50 and mask p99")
    mb.add_argument("--jobs", type=whole_number_arg, default=1, metavar="N",
                    help="time the records in N worker processes at once, worker k taking every Nth record from "
                         "the kth (with --checkpoint FILE, each keeps FILE.k-of-N); every engine stays "
                         "single-threaded and runs in every worker, which share the CPU's caches (default 1)")
    mb.add_argument("--report", action="store_true",
                    help="time nothing: print the table of the records that --checkpoint FILE holds (with --jobs N, "
                         "its N workers' files), as the run that writes it may still be going")
    # what a --jobs worker is given: every Nth record from the Kth
    mb.add_argument("--shard", type=_shard_arg, help=argparse.SUPPRESS)
    mb.set_defaults(run=_cmd_bench_maskbench)

    from banister.engine.commands import add_commands as add_engine_commands
    from banister.lab.commands import add_commands as add_lab_commands
    from banister.server.commands import add_commands as add_server_commands

    add_engine_commands(sub)
    add_lab_commands(sub)
    add_server_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BanisterError as exc:
        print(f"banister: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
