"""`banister serve` (registered by :func:`add_commands`); the web framework is imported only when it runs."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Any

from banister.collector import add_gc_options
from banister.server.settings import ServerSettings

_DEFAULTS = ServerSettings()


def add_commands(subparsers: Any) -> None:
    """Register ``serve`` on the `banister` command's subparsers (``run`` returns the exit status)."""
    serve = subparsers.add_parser("serve", help="an OpenAI-compatible HTTP API (needs the 'server' extra)")
    serve.add_argument("--model", default="default", help="model directory, .gguf file or 'default' (SmolLM2-135M)")
    serve.add_argument("--served-model-name", help="the model id clients send (default: the --model value)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--api-key", default=os.environ.get("BANISTER_API_KEY"),
                       help="require 'Authorization: Bearer KEY' on every endpoint but /health "
                            "(default: $BANISTER_API_KEY, else no key)")
    serve.add_argument("--max-batch-size", type=int, default=8, help="sequences decoded together (default 8)")
    serve.add_argument("--threads", type=int, metavar="N",
                       help="CPU threads for the model (default: torch's choice; 1 is often fastest on a busy machine)")
    add_gc_options(serve)
    serve.add_argument("--max-queue", type=int, default=_DEFAULTS.max_queue,
                       help=f"requests that may wait beyond the batch; more get 429 (default {_DEFAULTS.max_queue})")
    serve.add_argument("--request-timeout", type=float, default=_DEFAULTS.request_timeout,
                       help=f"seconds a request may take (default {_DEFAULTS.request_timeout:g})")
    serve.add_argument("--max-body-bytes", type=int, default=_DEFAULTS.max_body_bytes,
                       help=f"largest request body (default {_DEFAULTS.max_body_bytes})")
    serve.add_argument("--max-tokens", type=int, default=_DEFAULTS.max_tokens,
                       help=f"most tokens per answer, and the default budget (default {_DEFAULTS.max_tokens})")
    serve.add_argument("--max-schema-bytes", type=int, default=_DEFAULTS.max_schema_bytes,
                       help=f"largest schema, grammar, regex or tool list (default {_DEFAULTS.max_schema_bytes})")
    serve.add_argument("--max-n", type=int, default=_DEFAULTS.max_n,
                       help=f"most samples per request (default {_DEFAULTS.max_n})")
    serve.add_argument("--compile-threads", type=int, default=_DEFAULTS.compile_threads,
                       help=f"threads compiling grammars beside the engine's (default {_DEFAULTS.compile_threads})")
    serve.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    serve.set_defaults(run=_cmd_serve)


def settings_from_args(args: argparse.Namespace) -> ServerSettings:
    """The server settings the command line asks for (raises ``ValueError`` for a bad limit)."""
    return ServerSettings(
        model_name=args.served_model_name or args.model,
        api_key=args.api_key or None,
        max_queue=args.max_queue,
        request_timeout=args.request_timeout,
        max_body_bytes=args.max_body_bytes,
        max_tokens=args.max_tokens,
        max_schema_bytes=args.max_schema_bytes,
        max_n=args.max_n,
        compile_threads=args.compile_threads,
    )


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from banister.server.app import create_app
    except ImportError as exc:
        print(f"banister serve needs the 'server' extra (missing {exc.name}): pip install 'banister[server]'",
              file=sys.stderr)
        return 2
    from banister.engine.commands import load_engine

    try:
        settings = settings_from_args(args)
        if args.max_batch_size < 1:
            raise ValueError(f"--max-batch-size must be >= 1, got {args.max_batch_size}")
    except ValueError as exc:
        print(f"banister serve: error: {exc}", file=sys.stderr)
        return 2
    if settings.api_key is None and not _is_loopback(args.host):
        print(f"warning: serving on {args.host} without --api-key: anyone who can reach it can use it",
              file=sys.stderr)
    engine = load_engine(args.model, threads=args.threads, gc_threshold=args.gc_threshold,
                         gc_thaw_every=args.gc_thaw_every)
    engine.max_batch_size = args.max_batch_size
    uvicorn.run(create_app(engine, settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
