"""What goes into the engine besides SamplingParams, and what comes out."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from banister.sampling import TokenLogprobs

if TYPE_CHECKING:
    from banister.compiler import CompiledGrammar

Prompt = str | Sequence[int] | Sequence[Mapping[str, Any]]
"""A raw text prompt, its token ids, or chat messages (``{"role": ..., "content": ...}``) that go
through the tokenizer's chat template."""

FinishReason = Literal["stop", "eos", "grammar", "length", "abort"]
"""Why a sequence ended: a stop string or stop token (``stop_reason`` says which), EOS, the grammar
complete and unable to grow (``grammar``), the token budget or context (``length``), or
:meth:`~banister.engine.Engine.abort` / no allowed token (``abort``). An OpenAI-style API reports
``stop`` for the first three."""


@dataclass(frozen=True)
class RequestOptions:
    """Engine options of one request (the sampling settings are in SamplingParams).

    Parameters
    ----------
    jump_forward:
        When the grammar forces the next bytes, append their tokens without sampling them (None:
        the engine's default). Off for a request that asks for logprobs or uses penalties or
        ``min_tokens``, whose bookkeeping counts sampled tokens only.
    token_healing:
        When the prompt's last token could be the start of a longer token, remove it from the
        prompt and make the output start with its text, so the model can choose the longer token
        (default False). The returned text leaves the removed text out.
    close_within_budget:
        For a structured request with ``max_tokens``: when the next token would leave too few
        tokens to finish the structure, append the shortest completion instead, so the output is
        complete and valid (``finish_reason`` is still ``"length"``; ``budget_closed`` is True).
        Default False: a structure cut by the budget is returned as is, with ``incomplete`` True.
    grammar_syntax:
        The syntax of ``SamplingParams.grammar``: ``"gbnf"`` (default) or ``"lark"``.
    json_options:
        Options for compiling ``json_schema`` and ``json_object`` requests (see
        :meth:`banister.Compiler.json_schema`), over the engine's default
        ``{"whitespace": "pretty"}`` (one line, ``json.dumps``' separators); e.g.
        ``{"whitespace": "flexible"}`` lets the model lay the JSON out, ``{"strict": True}`` closes
        objects as OpenAI's strict mode does.
    grammar:
        A grammar compiled by the caller against the engine's vocabulary (e.g. with
        ``engine.compiler.structural_tag(...)``), for constraints that SamplingParams has no field
        for. Give it or a structured-output field of SamplingParams, not both (default None).
    """

    jump_forward: bool | None = None
    token_healing: bool = False
    close_within_budget: bool = False
    grammar_syntax: Literal["gbnf", "lark"] = "gbnf"
    json_options: Mapping[str, Any] = field(default_factory=dict)
    grammar: CompiledGrammar | None = None

    def __post_init__(self) -> None:
        if self.grammar_syntax not in ("gbnf", "lark"):
            raise ValueError(f"grammar_syntax must be 'gbnf' or 'lark', got {self.grammar_syntax!r}")
        object.__setattr__(self, "json_options", dict(self.json_options))


@dataclass(frozen=True)
class Usage:
    """Token counts of one request (all its samples together).

    ``forced_tokens`` counts output tokens appended by jump-forward or budget closing without a
    sampling step of their own.
    """

    prompt_tokens: int
    completion_tokens: int
    forced_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class CompletionOutput:
    """One sample of a request, as it stands after the latest step.

    Parameters
    ----------
    index:
        Which of the request's ``n`` samples.
    text:
        The output text shown so far: complete UTF-8 characters only, without a stop string (unless
        ``include_stop_str_in_output``) and, while unfinished, without a tail that might still turn
        into one. It only ever grows.
    token_ids:
        The output tokens (EOS or the stop token included when one ended it).
    finish_reason:
        None while running; see :data:`FinishReason`.
    stop_reason:
        The stop string or stop token id that ended it, else None.
    logprobs:
        One entry per output token when the request asked for logprobs, else None.
    incomplete:
        It finished before the output was complete: a structured output whose grammar is not
        satisfied (cut by the budget, a stop string or an abort), or free text cut by the budget
        or an abort.
    budget_closed:
        The structure was closed early to fit the budget (``close_within_budget``).
    """

    index: int
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None
    stop_reason: int | str | None = None
    logprobs: tuple[TokenLogprobs, ...] | None = None
    incomplete: bool = False
    budget_closed: bool = False

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass(frozen=True)
class RequestOutput:
    """A request's state after a step: its samples, prompt logprobs and usage.

    ``prompt_logprobs`` has one entry per prompt token after the first (when asked for).
    """

    request_id: Hashable
    prompt_token_ids: tuple[int, ...]
    outputs: tuple[CompletionOutput, ...]
    usage: Usage
    prompt_logprobs: tuple[TokenLogprobs, ...] | None = None

    @property
    def finished(self) -> bool:
        """Whether every sample has finished."""
        return all(o.finished for o in self.outputs)

    @property
    def text(self) -> str:
        """The first sample's text (the whole answer when ``n == 1``)."""
        return self.outputs[0].text
