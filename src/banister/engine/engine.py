"""The generation engine: continuous batching over a LanguageModel, with guided decoding.

One :meth:`Engine.step`, in order:

1. take the aborted and the newly added requests (both may arrive from other threads);
2. admit waiting requests while the batch has room; a request with ``n > 1`` is prefilled once
   and its samples fork the prompt's cache;
3. fill the token bitmask of every constrained sequence (optionally on a worker thread while the
   model runs, see ``overlap_masks``);
4. one forward pass: new sequences feed their prompt, running ones the tokens they got last step;
5. sample every row with the batched :class:`~banister.sampling.Sampler`, the bitmask applied;
6. per sequence: close within the budget if the token would not leave room (option), accept the
   token into the grammar, check stop conditions, stop when the grammar is terminated, then jump
   forward over bytes the grammar forces (option);
7. report the requests that changed; finished sequences leave the batch.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from banister.cache import WarmCache
from banister.compiler import Compiler
from banister.engine.guide import Guide, VocabIndex, closing_bytes, compile_request
from banister.engine.hf import HFLanguageModel, HFTokenizer
from banister.engine.model import EngineError, Feed, LanguageModel, TextTokenizer
from banister.engine.types import CompletionOutput, FinishReason, Prompt, RequestOptions, RequestOutput, Usage
from banister.mask.bitmask import bitmask_words
from banister.sampling import (
    Sampler,
    SamplingParams,
    SamplingState,
    StopChecker,
    TokenLogprobs,
    expand_n,
    prompt_logprobs,
)

# How many of the latest output tokens jump-forward may retokenise together with the forced text.
_RETOKENIZE_WINDOW = 2


@dataclass
class EngineStats:
    """Counters since the engine started (read them; the engine updates them every step).

    ``mask_seconds`` is the time spent filling bitmasks, ``forward_seconds`` the time the step
    waited for the model (with ``overlap_masks`` the two overlap).
    """

    steps: int = 0
    prefill_tokens: int = 0
    sampled_tokens: int = 0
    forced_tokens: int = 0
    forward_seconds: float = 0.0
    mask_seconds: float = 0.0
    sample_seconds: float = 0.0
    compile_seconds: float = 0.0


@dataclass(eq=False)
class _Group:
    """One request: its prompt and its samples."""

    request_id: Hashable
    prompt_ids: list[int]
    params: SamplingParams
    options: RequestOptions
    sequences: list[_Sequence] = field(default_factory=list)
    prompt_logprobs: tuple[TokenLogprobs, ...] | None = None


@dataclass(eq=False)
class _Sequence:
    """One sample of a request, from admission to finish."""

    seq_id: tuple[Hashable, int]
    group: _Group
    params: SamplingParams
    guide: Guide
    checker: StopChecker
    jump_forward: bool
    output: list[int] = field(default_factory=list)
    fed: int = 0  # output tokens the model has seen
    logprobs: list[TokenLogprobs] | None = None
    raw_text: str = ""  # text released by the checker, healing prefix included
    skip_chars: int = 0  # characters a rebuilt checker releases again
    heal_chars: int = 0
    forced: int = 0
    finish_reason: FinishReason | None = None
    stop_reason: int | str | None = None
    budget_closed: bool = False
    closing: list[int] | None = None  # tokens that would close the structure now (close_within_budget)


class Engine:
    """Generates from a language model for many requests at once, structured or free.

    Parameters
    ----------
    model:
        A :class:`~banister.engine.model.LanguageModel` (e.g. :class:`~banister.engine.toy.ToyModel`)
        or a transformers causal LM, which is wrapped in :class:`~banister.engine.hf.HFLanguageModel`.
    tokenizer:
        A :class:`~banister.engine.model.TextTokenizer` or a transformers tokenizer (wrapped in
        :class:`~banister.engine.hf.HFTokenizer`, with the model's generation-config EOS ids).
    max_batch_size:
        Most sequences decoded together (default 8); more requests wait their turn.
    jump_forward:
        Default of :attr:`RequestOptions.jump_forward` (default True: it saves decoding steps, see
        docs/engine.md for the measurement).
    overlap_masks:
        Fill the bitmasks on a worker thread while the model runs (default False: on CPU models
        the two compete for the same cores; see docs/engine.md).
    seed:
        Seed of the generator for requests without their own seed (default None: torch's global one).
    cache_dir:
        Warm-start cache of the engine's :class:`~banister.Compiler` (default None: off; the CLI and
        the server use :func:`banister.cache.default_cache_dir`).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_batch_size: int = 8,
        jump_forward: bool = True,
        overlap_masks: bool = False,
        seed: int | None = None,
        cache_dir: str | os.PathLike[str] | WarmCache | None = None,
    ) -> None:
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ValueError(f"max_batch_size must be a positive integer, got {max_batch_size!r}")
        self.model: LanguageModel = model if isinstance(model, LanguageModel) else HFLanguageModel(model)
        if isinstance(tokenizer, TextTokenizer):
            self.tokenizer: TextTokenizer = tokenizer
        else:
            eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            eos_ids = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
            self.tokenizer = HFTokenizer(tokenizer, vocab_size=self.model.vocab_size, eos_token_ids=eos_ids)
        self.vocabulary = self.tokenizer.vocabulary
        if self.vocabulary.vocab_size != self.model.vocab_size:
            raise EngineError(
                f"the tokenizer's vocabulary has {self.vocabulary.vocab_size} ids but the model's logits "
                f"are {self.model.vocab_size} wide"
            )
        self.compiler = Compiler(self.vocabulary, cache_dir=cache_dir)
        self.max_batch_size = max_batch_size
        self.jump_forward = jump_forward
        self.overlap_masks = overlap_masks
        self.stats = EngineStats()
        self._index = VocabIndex(self.vocabulary)
        self._state = SamplingState(self.model.vocab_size, self.vocabulary.eos_token_ids, device=self.model.device)
        generator = None if seed is None else torch.Generator(device=self.model.device).manual_seed(seed)
        self._sampler = Sampler(generator)
        self._lock = threading.Lock()
        self._incoming: deque[_Group] = deque()
        self._aborts: list[Hashable] = []
        self._waiting: deque[_Group] = deque()
        self._groups: dict[Hashable, _Group] = {}
        self._running: dict[Hashable, _Sequence] = {}
        self._ids = itertools.count()
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def from_pretrained(cls, name_or_path: str = "default", *, progress: Any = None, **engine_kwargs: Any) -> Engine:
        """An engine over a Hugging Face model directory, a GGUF file, or ``"default"`` (SmolLM2-135M-Instruct).

        ``progress`` receives status lines while loading (see :func:`~banister.engine.loading.load_pretrained`);
        ``engine_kwargs`` go to the constructor.
        """
        from banister.engine.loading import load_pretrained

        model, tokenizer = load_pretrained(name_or_path, progress=progress)
        return cls(model, tokenizer, **engine_kwargs)

    # -- requests ---------------------------------------------------------------------------------------

    def add_request(
        self,
        request_id: Hashable,
        prompt: Prompt,
        params: SamplingParams | None = None,
        options: RequestOptions | None = None,
    ) -> None:
        """Queue a request; it joins the batch at a coming step. Safe to call from any thread.

        The grammar is compiled here (cached by the engine's Compiler), so a bad specification
        raises now: ``SchemaError``, ``RegexError``, ``GrammarError`` or ``LimitError``. A prompt
        too long for the model raises :class:`~banister.engine.model.EngineError`, a request id in
        use ``ValueError``.
        """
        self._enqueue([self._prepare(request_id, prompt, params or SamplingParams(), options or RequestOptions())])

    def abort(self, request_id: Hashable) -> None:
        """Stop a request at the next step (its outputs finish with ``"abort"``). Safe from any thread."""
        with self._lock:
            self._aborts.append(request_id)

    @property
    def num_running(self) -> int:
        """Sequences in the batch now."""
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        """Requests queued for a place in the batch."""
        with self._lock:
            return len(self._incoming) + len(self._waiting)

    def has_unfinished_requests(self) -> bool:
        """Whether any request is waiting or running."""
        with self._lock:
            return bool(self._incoming or self._groups)

    def _prepare(self, request_id: Hashable, prompt: Prompt, params: SamplingParams, options: RequestOptions) -> _Group:
        """Tokenise, check, compile and heal a request; one sequence per sample."""
        prompt_ids = self.encode_prompt(prompt)
        if not prompt_ids:
            raise EngineError("the prompt has no tokens")
        limit = self.model.max_length
        if limit is not None and len(prompt_ids) >= limit:
            raise EngineError(f"the prompt has {len(prompt_ids)} tokens; the model takes at most {limit - 1}")
        start = time.perf_counter()
        compiled = compile_request(self.compiler, params, options)
        self.stats.compile_seconds += time.perf_counter() - start
        heal, fed_prompt = self._heal(prompt_ids) if options.token_healing else (b"", list(prompt_ids))
        group = _Group(request_id, fed_prompt, params, options)
        wants_jump = self.jump_forward if options.jump_forward is None else options.jump_forward
        for index, child in enumerate(expand_n(params)):
            group.sequences.append(
                _Sequence(
                    seq_id=(request_id, index),
                    group=group,
                    params=child,
                    guide=Guide(compiled, heal, self._index),
                    checker=StopChecker(child, self.vocabulary),
                    jump_forward=wants_jump and compiled is not None and _jump_compatible(child),
                    logprobs=[] if child.logprobs is not None else None,
                    heal_chars=len(heal.decode()),
                )
            )
        return group

    def _enqueue(self, groups: list[_Group]) -> None:
        with self._lock:
            taken = set(self._groups) | {g.request_id for g in self._incoming}
            ids = [g.request_id for g in groups]
            clash = [i for i in ids if i in taken] or [i for i in ids if ids.count(i) > 1]
            if clash:
                raise ValueError(f"request_id {clash[0]!r} is already in use")
            self._incoming.extend(groups)

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt: raw text, token ids as given, or chat messages through the template."""
        if isinstance(prompt, str):
            return self.tokenizer.encode_prompt(prompt)
        items: list[Any] = list(prompt)
        if all(isinstance(t, int) and not isinstance(t, bool) for t in items):
            bad = [t for t in items if not 0 <= t < self.vocabulary.vocab_size]
            if bad:
                raise EngineError(f"prompt token ids outside [0, {self.vocabulary.vocab_size}): {bad[:5]}")
            return [int(t) for t in items]
        if all(isinstance(m, Mapping) for m in items):
            return self.tokenizer.chat_prompt(items)
        raise TypeError("a prompt is a string, a sequence of token ids, or a sequence of chat messages (dicts)")

    # -- running ----------------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Prompt | Sequence[Prompt],
        params: SamplingParams | Sequence[SamplingParams] | None = None,
        options: RequestOptions | None = None,
    ) -> list[RequestOutput]:
        """Run prompts to completion (batched) and return their outputs in order.

        ``prompts`` is one prompt or a list of them (a list of chat messages is one prompt; wrap
        token ids in a list: ``[[1, 2, 3]]``); ``params`` one for all or one per prompt. Drives
        :meth:`step` itself, so don't call it while something else steps this engine.
        """
        batch = _as_prompt_list(prompts)
        if params is None or isinstance(params, SamplingParams):
            per_prompt = [params] * len(batch)
        else:
            per_prompt = list(params)
            if len(per_prompt) != len(batch):
                raise ValueError(f"{len(batch)} prompts but {len(per_prompt)} SamplingParams")
        ids = [("generate", next(self._ids)) for _ in batch]
        options = options or RequestOptions()
        self._enqueue([
            self._prepare(request_id, prompt, p or SamplingParams(), options)
            for request_id, prompt, p in zip(ids, batch, per_prompt, strict=True)
        ])  # all or none: a bad prompt or schema raises before any of them is queued
        done: dict[Hashable, RequestOutput] = {}
        while len(done) < len(ids):
            for out in self.step():
                if out.finished:
                    done[out.request_id] = out
        return [done[i] for i in ids]

    def stream(
        self, prompt: Prompt, params: SamplingParams | None = None, options: RequestOptions | None = None
    ) -> Iterator[RequestOutput]:
        """Run one prompt, yielding its output after every step that changed it (the last is finished)."""
        request_id = ("stream", next(self._ids))
        self.add_request(request_id, prompt, params, options)
        finished = False
        while not finished:
            for out in self.step():
                if out.request_id == request_id:
                    finished = out.finished
                    yield out

    def step(self) -> list[RequestOutput]:
        """Advance every running sequence by one token (plus any forced tokens); see the module docstring.

        Returns the outputs of the requests that changed, finished ones included (once).
        """
        changed: dict[Hashable, _Group] = {}
        self._take_incoming(changed)
        new = self._admit()
        for group in new:
            changed[group.request_id] = group
        if not self._running:
            return self._report(changed)
        order = [self._running[sid] for sid in self._state.request_ids]
        constrained = [s for s in order if s.guide.constrained]
        bitmask = np.empty((len(constrained), bitmask_words(self.model.vocab_size)), dtype=np.int32)
        feeds, forks = self._feeds(new)
        logits = self._forward_with_masks(feeds, constrained, bitmask)
        for parent, child in forks:
            self.model.fork(parent, child)
        last: dict[Hashable, torch.Tensor] = {}
        for feed, out in zip(feeds, logits, strict=True):
            seq = self._running[feed.seq_id]
            last[feed.seq_id] = out[-1:]
            if feed.all_logits:
                scored = prompt_logprobs(out, seq.group.prompt_ids, seq.params.prompt_logprobs or 0)
                seq.group.prompt_logprobs = tuple(
                    x for x in scored.to_lists(seq.params.prompt_logprobs) if x is not None
                )
        for parent, child in forks:
            last[child] = last[parent]
        start = time.perf_counter()
        batch_logits = torch.cat([last[sid] for sid in self._state.request_ids])
        rows = [self._state.row(s.seq_id) for s in constrained]
        sampled = self._sampler(batch_logits, self._state, bitmask if constrained else None, rows or None)
        tokens = sampled.token_ids.tolist()
        logprobs = sampled.logprobs_per_row()
        self._state.append_tokens(sampled.token_ids)
        self.stats.sample_seconds += time.perf_counter() - start
        self.stats.steps += 1
        for seq, token, lp in zip(order, tokens, logprobs, strict=True):
            seq.fed = len(seq.output)
            self._take_token(seq, int(token), lp)
            self._release_text(seq)
            changed[seq.group.request_id] = seq.group
        for seq in order:
            if seq.finish_reason is not None:
                self._state.remove_request(seq.seq_id)
                self.model.release(seq.seq_id)
                del self._running[seq.seq_id]
        return self._report(changed)

    # -- internals: admission and the forward pass ------------------------------------------------------

    def _take_incoming(self, changed: dict[Hashable, _Group]) -> None:
        with self._lock:
            incoming, self._incoming = self._incoming, deque()
            aborts, self._aborts = self._aborts, []
            for group in incoming:
                self._groups[group.request_id] = group
                self._waiting.append(group)
        for request_id in aborts:
            aborted = self._groups.get(request_id)
            if aborted is None:
                continue
            if aborted in self._waiting:
                self._waiting.remove(aborted)
            for seq in aborted.sequences:
                if seq.finish_reason is None:
                    self._finish(seq, "abort")
                    self._release_text(seq)
                if seq.seq_id in self._running:
                    self._state.remove_request(seq.seq_id)
                    self.model.release(seq.seq_id)
                    del self._running[seq.seq_id]
            changed[request_id] = aborted

    def _admit(self) -> list[_Group]:
        """Move waiting requests into the batch while there is room (a request comes in whole)."""
        admitted = []
        while self._waiting:
            group = self._waiting[0]
            n = len(group.sequences)
            if self._running and len(self._running) + n > self.max_batch_size:
                break
            self._waiting.popleft()
            for seq in group.sequences:
                if group.options.close_within_budget:
                    self._plan_closing(seq)
                self._state.add_request(seq.seq_id, seq.params, group.prompt_ids)
                self._running[seq.seq_id] = seq
            admitted.append(group)
        return admitted

    def _feeds(self, new: list[_Group]) -> tuple[list[Feed], list[tuple[Hashable, Hashable]]]:
        """One feed per running sequence; a new request's other samples fork its first one's prompt."""
        feeds: list[Feed] = []
        forks: list[tuple[Hashable, Hashable]] = []
        for group in new:
            first, *others = group.sequences
            feeds.append(Feed(first.seq_id, group.prompt_ids, first.params.prompt_logprobs is not None))
            forks.extend((first.seq_id, seq.seq_id) for seq in others)
        self.stats.prefill_tokens += sum(len(f.token_ids) for f in feeds)
        for sid in self._state.request_ids:
            seq = self._running[sid]
            if seq.group not in new:
                feeds.append(Feed(sid, seq.output[seq.fed :]))
        return feeds, forks

    def _forward_with_masks(
        self, feeds: list[Feed], constrained: list[_Sequence], bitmask: np.ndarray
    ) -> list[torch.Tensor]:
        """The model's forward pass, with the bitmask rows filled before it or, overlapped, during it."""

        def fill() -> None:
            start = time.perf_counter()
            for i, seq in enumerate(constrained):
                seq.guide.fill(bitmask[i])
            self.stats.mask_seconds += time.perf_counter() - start

        if self.overlap_masks and constrained:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="banister-masks")
            start = time.perf_counter()
            pending = self._pool.submit(fill)
            logits = self.model.forward(feeds)
            pending.result()
        else:
            fill()
            start = time.perf_counter()
            logits = self.model.forward(feeds)
        self.stats.forward_seconds += time.perf_counter() - start
        return logits

    # -- internals: one sequence's token ----------------------------------------------------------------

    def _take_token(self, seq: _Sequence, token: int, logprobs: TokenLogprobs | None) -> None:
        if token < 0:
            self._finish(seq, "abort")
            return
        if self._close_needed(seq, token):
            self._close(seq)
            return
        if not seq.guide.accept(token):
            self._finish(seq, "abort")
            return
        if seq.logprobs is not None and logprobs is not None:
            seq.logprobs.append(logprobs)
        self.stats.sampled_tokens += 1
        if self._append(seq, token):
            return
        if seq.jump_forward and not seq.guide.heal:
            self._jump(seq)
        if seq.finish_reason is None and seq.group.options.close_within_budget:
            self._plan_closing(seq)

    def _append(self, seq: _Sequence, token: int) -> bool:
        """Record an accepted token; finish the sequence when it ends it. Returns whether it finished."""
        seq.output.append(token)
        if seq.checker.append(token):
            reason: FinishReason = seq.checker.finish_reason or "stop"
            if reason == "stop" and seq.checker.stop_reason is None and token in self.vocabulary.eos_token_ids:
                reason = "eos"
            elif reason == "length" and seq.guide.is_terminated():
                reason = "grammar"  # the last token the budget allowed completed the grammar
            self._finish(seq, reason, seq.checker.stop_reason)
        elif seq.guide.is_terminated():
            self._finish(seq, "grammar")
        else:
            limit = self.model.max_length
            if limit is not None and len(seq.group.prompt_ids) + len(seq.output) >= limit:
                self._finish(seq, "length")
        return seq.finish_reason is not None

    def _finish(self, seq: _Sequence, reason: FinishReason, stop_reason: int | str | None = None) -> None:
        seq.finish_reason = reason
        seq.stop_reason = stop_reason

    def _jump(self, seq: _Sequence) -> None:
        """Append the tokens of the text the grammar forces next, retokenising the boundary.

        The latest output tokens (up to ``_RETOKENIZE_WINDOW``, never healing tokens) are tokenised
        again together with the forced text, so a token that would have merged across the boundary
        replaces them (they are rolled back everywhere). The last new token is held back when a
        longer token starts with it and the grammar goes on: the model may want that longer token.
        """
        matcher = seq.guide.matcher
        if matcher is None:
            return
        forced = matcher.jump_forward_string()
        if not forced:
            return
        plan = self._retokenize(seq, forced)
        if plan is None:
            return
        backtrack, tokens = plan
        budget = seq.params.max_tokens
        if budget is not None:
            tokens = tokens[: budget - (len(seq.output) - backtrack)]
        if not tokens:
            return
        if backtrack:
            self._rollback(seq, backtrack)
        for token in tokens:
            if not matcher.accept_token(token):
                raise EngineError(f"jump-forward produced token {token} that the grammar refuses")
            seq.forced += 1
            self.stats.forced_tokens += 1
            if self._append(seq, token):
                return

    def _retokenize(self, seq: _Sequence, forced: str) -> tuple[int, list[int]] | None:
        """(tokens to roll back, tokens to append) for jumping over ``forced``, or None."""
        vocab = self.vocabulary
        movable = len(seq.output) - seq.guide.healing_tokens
        for window in range(min(_RETOKENIZE_WINDOW, movable), -1, -1):
            tail = seq.output[len(seq.output) - window :] if window else []
            if any(not vocab.is_matchable(t) for t in tail):
                continue
            try:
                tail_text = vocab.decode(tail).decode("utf-8")
            except UnicodeDecodeError:
                continue
            text = tail_text + forced
            ids = self.tokenizer.encode(text)
            if vocab.decode(ids) != text.encode():
                continue
            common = 0
            while common < min(window, len(ids)) and ids[common] == tail[common]:
                common += 1
            new = ids[common:]
            if new and self._index.extendable[new[-1]] and not self._ends_grammar(seq, forced):
                new = new[:-1]
            replaced = len(vocab.decode(tail[common:]))
            if len(vocab.decode(new)) > replaced:
                return window - common, new
        return None

    def _ends_grammar(self, seq: _Sequence, forced: str) -> bool:
        matcher = seq.guide.matcher
        if matcher is None:
            return False
        twin = matcher.copy()
        return twin.accept_string(forced) and twin.is_terminated()

    def _rollback(self, seq: _Sequence, count: int) -> None:
        """Remove the last ``count`` output tokens from the grammar, the checker and the model's cache."""
        if seq.guide.matcher is not None:
            seq.guide.matcher.rollback(count)
        unfed = len(seq.output) - seq.fed
        from_cache = count - min(count, unfed)
        if from_cache:
            self.model.truncate(seq.seq_id, from_cache)
            seq.fed -= from_cache
        del seq.output[len(seq.output) - count :]
        seq.checker = StopChecker(seq.params, self.vocabulary)
        for token in seq.output:
            seq.checker.append(token)
        seq.skip_chars = len(seq.raw_text)

    # -- internals: closing within the budget ------------------------------------------------------------

    def _plan_closing(self, seq: _Sequence) -> None:
        """Keep the tokens that would close the structure from here (None when they can't be found)."""
        matcher = seq.guide.matcher
        if matcher is None or seq.params.max_tokens is None or seq.guide.heal:
            seq.closing = None
            return
        found = closing_bytes(matcher.compiled, matcher.state)
        seq.closing = None if found is None else self._index.greedy_tokens(found)

    def _close_needed(self, seq: _Sequence, token: int) -> bool:
        """Whether taking ``token`` would leave too few tokens to close the structure afterwards."""
        matcher = seq.guide.matcher
        budget = seq.params.max_tokens
        if matcher is None or budget is None or token in self.vocabulary.eos_token_ids:
            return False
        if seq.closing is None or len(seq.closing) > budget - len(seq.output):
            return False  # closing from here doesn't fit either: let the budget cut it
        twin = matcher.copy()
        if not twin.accept_token(token):
            return False
        found = closing_bytes(twin.compiled, twin.state)
        after = None if found is None else self._index.greedy_tokens(found)
        left = budget - len(seq.output) - 1
        return after is None or len(after) > left

    def _close(self, seq: _Sequence) -> None:
        """Append the planned closing tokens and finish with ``"length"`` (the output is complete)."""
        closing = seq.closing or []
        matcher = seq.guide.matcher
        for token in closing:
            if matcher is None or not matcher.accept_token(token):
                raise EngineError(f"closing token {token} refused by the grammar")
            seq.forced += 1
            self.stats.forced_tokens += 1
            seq.output.append(token)
            if seq.checker.append(token):
                break
        seq.budget_closed = True
        self._finish(seq, "length")

    # -- internals: outputs -----------------------------------------------------------------------------

    def _release_text(self, seq: _Sequence) -> None:
        """Move newly safe text from the checker to ``raw_text`` (all of it once the sequence is done)."""
        if seq.finish_reason is not None and not seq.checker.finished:
            # Ended outside the checker (grammar, abort, context, budget closing): nothing is held back.
            data = seq.checker.output_bytes
            seq.raw_text += data[len(seq.raw_text.encode()) :].decode("utf-8", errors="replace")
            return
        text = seq.checker.take_text()
        if seq.skip_chars:
            cut = min(seq.skip_chars, len(text))
            text, seq.skip_chars = text[cut:], seq.skip_chars - cut
        seq.raw_text += text

    def _report(self, changed: dict[Hashable, _Group]) -> list[RequestOutput]:
        outputs = [self._output(group) for group in changed.values()]
        with self._lock:
            for group in changed.values():
                if all(s.finish_reason is not None for s in group.sequences):
                    self._groups.pop(group.request_id, None)
        return outputs

    def _output(self, group: _Group) -> RequestOutput:
        samples = []
        for i, seq in enumerate(group.sequences):
            if seq.guide.matcher is not None:
                complete = seq.guide.is_complete()
            else:
                complete = seq.finish_reason in ("stop", "eos") and not seq.guide.heal
            samples.append(
                CompletionOutput(
                    index=i,
                    text=seq.raw_text[seq.heal_chars :],
                    token_ids=tuple(seq.output),
                    finish_reason=seq.finish_reason,
                    stop_reason=seq.stop_reason,
                    logprobs=None if seq.logprobs is None else tuple(seq.logprobs),
                    incomplete=seq.finish_reason is not None and not complete,
                    budget_closed=seq.budget_closed,
                )
            )
        usage = Usage(
            prompt_tokens=len(group.prompt_ids),
            completion_tokens=sum(len(s.output) for s in group.sequences),
            forced_tokens=sum(s.forced for s in group.sequences),
        )
        return RequestOutput(group.request_id, tuple(group.prompt_ids), tuple(samples), usage, group.prompt_logprobs)

    def _heal(self, prompt_ids: list[int]) -> tuple[bytes, list[int]]:
        """Token healing: (the last token's bytes, the prompt without it) when a longer token starts
        with it; else nothing to heal."""
        last = prompt_ids[-1]
        if len(prompt_ids) < 2 or not self.vocabulary.is_matchable(last) or not self._index.extendable[last]:
            return b"", prompt_ids
        data = self.vocabulary.tokens[last]
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return b"", prompt_ids
        return data, prompt_ids[:-1]


def _jump_compatible(params: SamplingParams) -> bool:
    """Jump-forward keeps a request's bookkeeping exact only when nothing counts sampled tokens."""
    return (
        params.logprobs is None
        and params.min_tokens == 0
        and not params.presence_penalty
        and not params.frequency_penalty
        and params.repetition_penalty == 1.0
    )


def _as_prompt_list(prompts: Prompt | Sequence[Prompt]) -> list[Prompt]:
    if isinstance(prompts, str):
        return [prompts]
    items: list[Any] = list(prompts)
    if items and all(isinstance(m, Mapping) for m in items):
        return [items]
    if any(isinstance(p, int) for p in items):
        raise TypeError("pass token-id prompts as a list of lists, e.g. [[1, 2, 3]]")
    return items
