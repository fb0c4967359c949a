"""Run the app on a real socket in a background thread (for tests, benchmarks and notebooks)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn on ``host`` (port 0: a free one) and yield its base URL, e.g.
    ``http://127.0.0.1:54321``; the server shuts down (lifespan included) when the block ends."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="banister-uvicorn", daemon=True)
    thread.start()
    start = time.monotonic()
    while not server.started:
        if not thread.is_alive() or time.monotonic() - start > timeout:
            raise RuntimeError(f"the server did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout)
