"""One thread owns the engine; asyncio request handlers talk to it through :class:`Job` objects.

The engine's step API is synchronous and not meant to be driven from two threads, and a fast
tokenizer must not be used from two threads at once. So every engine call (tokenising the
prompt, :meth:`~banister.engine.Engine.step`) happens on the runner's thread. Grammars compile on
threads of their own: a big schema takes seconds, and the requests already decoding go on
meanwhile (taking turns for the GIL, which a compile holds and torch's operators release). The
engine thread loops:

1. take the submitted requests, the compiled grammars and the cancellations (from any thread,
   under a lock);
2. send each new request with a grammar to a compile thread; add the others, and those whose
   grammar is compiled, to the engine (a failure goes to that request's job);
3. abort the cancelled ones (their slot is free once the engine reports them finished; a grammar
   still compiling is dropped when it is done);
4. step the engine while it has requests, and hand every output to its job on the event loop
   (``call_soon_threadsafe``); sleep when there is nothing to do, after the garbage collector's
   full collection if one is due and no grammar is compiling (:func:`~banister.collector.thaw_if_due`).

The runner also bounds the work in flight: the engine's batch plus ``max_queue`` waiting
requests; :meth:`EngineRunner.submit` raises :class:`QueueFullError` beyond that.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from banister.collector import thaw_if_due
from banister.compiler import CompiledGrammar, Compiler
from banister.engine.engine import Engine
from banister.engine.types import Prompt, RequestOptions, RequestOutput
from banister.sampling import SamplingParams

log = logging.getLogger("banister.server")


class QueueFullError(Exception):
    """The engine's batch and the waiting queue are full; try again later (HTTP 429)."""


@dataclass(frozen=True)
class EngineRequest:
    """What one engine request needs.

    ``template_kwargs`` go to the chat template (e.g. ``tools``); ``grammar``, when given, compiles
    the request's constraint with the engine's compiler on a compile thread of the runner (it becomes
    ``RequestOptions.grammar``; its time counts in ``engine.stats.compile_seconds``).
    """

    prompt: Prompt
    params: SamplingParams
    options: RequestOptions = field(default_factory=RequestOptions)
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    grammar: Callable[[Compiler], CompiledGrammar] | None = None


class Job:
    """The engine requests of one HTTP request, seen from the event loop.

    Outputs arrive as ``(index, RequestOutput)`` where ``index`` is the request's position in the
    list given to :meth:`EngineRunner.submit`. Outputs are snapshots (text only grows), so when the
    reader falls behind only each request's latest one is kept: memory stays bounded for a slow
    streaming client.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, request_ids: list[str]) -> None:
        self.request_ids = request_ids
        self._loop = loop
        self._latest: dict[int, RequestOutput] = {}
        self._changed = asyncio.Event()
        self._accepted = 0
        self._accepted_event = asyncio.Event()
        self._error: BaseException | None = None

    async def accepted(self) -> None:
        """Wait until the engine took every request (prompt tokenised, grammar compiled).

        Raises the first error the engine raised for one of them (``SchemaError``, ...).
        """
        await self._accepted_event.wait()
        if self._error is not None:
            raise self._error

    async def outputs(self) -> AsyncIterator[tuple[int, RequestOutput]]:
        """The latest output of each request that changed, until all have finished; raises an
        error the engine raised."""
        await self.accepted()
        finished: set[int] = set()
        while len(finished) < len(self.request_ids):
            await self._changed.wait()
            self._changed.clear()
            if self._error is not None:
                raise self._error
            changed, self._latest = self._latest, {}
            for index, out in sorted(changed.items()):
                if out.finished:
                    finished.add(index)
                yield index, out

    # -- called on the runner thread (through _post, so they run on the event loop) -------------------------

    def _post(self, callback: Any, *args: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the event loop is closed: nobody is waiting any more
            pass

    def _on_accepted(self) -> None:
        self._accepted += 1
        if self._accepted == len(self.request_ids):
            self._accepted_event.set()

    def _on_output(self, index: int, output: RequestOutput) -> None:
        self._latest[index] = output
        self._changed.set()

    def _on_error(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._accepted_event.set()
        self._changed.set()


class EngineRunner:
    """Runs an :class:`~banister.engine.Engine` on its own thread for asyncio request handlers.

    Parameters
    ----------
    engine:
        The engine; nothing else may call it while the runner runs.
    max_queue:
        Engine requests that may wait beyond the engine's batch (``max_batch_size``).
    compile_threads:
        Threads that compile grammars (default 2), so that a quick compile (or a cached one) need not
        wait behind a slow one.
    """

    def __init__(self, engine: Engine, max_queue: int, compile_threads: int = 2) -> None:
        self.engine = engine
        self.capacity = engine.max_batch_size + max_queue
        self._cond = threading.Condition()
        self._submitted: deque[tuple[str, int, EngineRequest, Job]] = deque()
        self._cancels: set[str] = set()
        self._live: dict[str, tuple[int, Job]] = {}  # request id -> (index in its job, job)
        self._compiled: deque[tuple[str, EngineRequest, Job, CompiledGrammar | Exception, float]] = deque()
        self._compiling: set[str] = set()  # the engine thread's own: requests whose grammar is compiling
        self._compiler = ThreadPoolExecutor(compile_threads, thread_name_prefix="banister-compile")
        self._ids = itertools.count()
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def in_flight(self) -> int:
        """Engine requests submitted and not finished yet."""
        with self._cond:
            return len(self._live)

    @property
    def submitted(self) -> int:
        """Requests handed to the runner that the engine has not taken yet."""
        with self._cond:
            return len(self._submitted)

    def start(self) -> None:
        """Start the engine thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="banister-engine", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the engine thread after its current step, and the compile threads after their
        current compiles; unfinished requests are left as they are."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._compiler.shutdown(wait=True, cancel_futures=True)

    def submit(self, requests: list[EngineRequest]) -> Job:
        """Queue requests from the running event loop; raises :class:`QueueFullError` when over capacity."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if len(self._live) + len(requests) > self.capacity:
                raise QueueFullError(
                    f"the server is busy: {len(self._live)} requests in flight, at most {self.capacity} "
                    f"(the batch of {self.engine.max_batch_size} plus max_queue); retry later"
                )
            ids = [f"req-{next(self._ids)}" for _ in requests]
            job = Job(loop, ids)
            for index, (request_id, request) in enumerate(zip(ids, requests, strict=True)):
                self._live[request_id] = (index, job)
                self._submitted.append((request_id, index, request, job))
            self._cond.notify()
        return job

    def cancel(self, job: Job) -> None:
        """Abort the job's unfinished requests (safe to call more than once, from any thread)."""
        with self._cond:
            live = [i for i in job.request_ids if i in self._live]
            if live:
                self._cancels.update(live)
                self._cond.notify()

    # -- the engine thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        engine = self.engine
        while True:
            with self._cond:
                idle = not self._has_work() and not self._compiling
            if idle and thaw_if_due():  # the collector's full collection, while no request waits for it
                log.debug("collected the heap frozen after compiles while idle")
            with self._cond:
                while not self._has_work():
                    self._cond.wait()
                if self._stopping:
                    return
                submitted, self._submitted = self._submitted, deque()
                compiled, self._compiled = self._compiled, deque()
                cancels, self._cancels = self._cancels, set()
            for request_id, _, request, job in submitted:
                if request_id in cancels:
                    cancels.discard(request_id)
                    self._forget(request_id)
                elif request.grammar is not None:
                    self._compiling.add(request_id)
                    self._compiler.submit(self._compile, request_id, request, job)
                else:
                    self._add(request_id, request, job)
            for request_id, request, job, grammar, seconds in compiled:
                self._compiling.discard(request_id)
                with self._cond:
                    wanted = request_id in self._live and request_id not in cancels
                if not wanted:  # cancelled while it compiled
                    cancels.discard(request_id)
                    self._forget(request_id)
                elif isinstance(grammar, Exception):
                    self._forget(request_id)
                    job._post(job._on_error, grammar)
                else:
                    self._add(request_id, request, job, grammar)
                engine.stats.compile_seconds += seconds  # last: the request is in the engine, or never will be
            for request_id in cancels:
                if request_id in self._compiling:
                    self._forget(request_id)  # its grammar is dropped when compiled
                else:
                    engine.abort(request_id)
            if engine.has_unfinished_requests():
                self._step()

    def _has_work(self) -> bool:
        """Something for the engine thread to do (under ``_cond``): stop, new requests, compiled
        grammars, cancellations, steps."""
        return bool(self._stopping or self._submitted or self._compiled or self._cancels
                    or self.engine.has_unfinished_requests())

    def _compile(self, request_id: str, request: EngineRequest, job: Job) -> None:
        """On a compile thread: compile the request's grammar and hand it (or the error, ``SchemaError``
        and the like) to the engine thread."""
        assert request.grammar is not None
        start = time.perf_counter()
        grammar: CompiledGrammar | Exception
        try:
            grammar = request.grammar(self.engine.compiler)
        except Exception as exc:  # noqa: BLE001 - a bad request: only its own job hears about it
            grammar = exc
        with self._cond:
            self._compiled.append((request_id, request, job, grammar, time.perf_counter() - start))
            self._cond.notify()

    def _add(self, request_id: str, request: EngineRequest, job: Job, grammar: CompiledGrammar | None = None) -> None:
        """Add a request to the engine, with its compiled ``grammar`` when it has one."""
        engine = self.engine
        try:
            prompt, options = request.prompt, request.options
            if request.template_kwargs:
                prompt = engine.tokenizer.chat_prompt(list(prompt), **request.template_kwargs)  # type: ignore[arg-type]
            if grammar is not None:
                options = replace(options, grammar=grammar)
            engine.add_request(request_id, prompt, request.params, options)
        except Exception as exc:  # noqa: BLE001 - a bad request: only its own job hears about it
            self._forget(request_id)
            job._post(job._on_error, exc)
            return
        job._post(job._on_accepted)

    def _step(self) -> None:
        try:
            outputs = self.engine.step()
        except Exception as exc:  # the engine is in an unknown state: fail everything in flight
            log.exception("engine step failed")
            with self._cond:
                live, self._live = self._live, {}
            for request_id, (_, job) in live.items():
                self.engine.abort(request_id)
                job._post(job._on_error, exc)
            return
        for out in outputs:
            with self._cond:
                entry = self._live.get(out.request_id)  # type: ignore[call-overload]
                if entry is not None and out.finished:
                    del self._live[out.request_id]  # type: ignore[arg-type]
            if entry is not None:
                index, job = entry
                job._post(job._on_output, index, out)

    def _forget(self, request_id: str) -> None:
        with self._cond:
            self._live.pop(request_id, None)
