"""The server's limits and options, shared by the CLI and the app (no web framework imported here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSettings:
    """Limits and options of one `banister serve` process.

    Parameters
    ----------
    model_name:
        The model id that /v1/models lists and that requests must name (default ``"default"``).
    api_key:
        When set, every endpoint but /health needs ``Authorization: Bearer <api_key>``.
    max_queue:
        Requests that may wait for a place in the engine's batch (default 64); beyond the batch
        and this queue a request is answered 429. A request with several prompts counts each.
    request_timeout:
        Seconds a request may take from arrival to its last token (default 600); then it is
        aborted and answered 504 (a stream ends with an error event).
    max_body_bytes:
        Largest request body (default 1 MiB); larger ones are answered 413.
    max_tokens:
        Most tokens one answer may ask for (default 4096), and the budget of a request that
        names none (capped by what the model's context leaves).
    max_schema_bytes:
        Largest structured-output specification: a JSON Schema or a tool's parameters (as
        compact JSON), a regex, a grammar, or the choices together (default 64 KiB).
    max_n:
        Most samples per request (default 16).
    compile_threads:
        Threads that compile requests' grammars beside the engine thread (default 2): a schema that
        takes seconds holds up neither the requests decoding nor a quicker compile.
    """

    model_name: str = "default"
    api_key: str | None = None
    max_queue: int = 64
    request_timeout: float = 600.0
    max_body_bytes: int = 1 << 20
    max_tokens: int = 4096
    max_schema_bytes: int = 64 << 10
    max_n: int = 16
    compile_threads: int = 2

    def __post_init__(self) -> None:
        for name in ("max_queue", "max_body_bytes", "max_tokens", "max_schema_bytes", "max_n", "compile_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_queue" else 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.request_timeout > 0:
            raise ValueError(f"request_timeout must be > 0 seconds, got {self.request_timeout!r}")
