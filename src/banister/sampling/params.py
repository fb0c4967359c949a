"""Sampling settings of one request, with the OpenAI / vLLM field names."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from banister.errors import BanisterError

#: Temperatures below this are greedy decoding (dividing by them would overflow the logits).
GREEDY_TEMPERATURE = 1e-5

_STRUCTURED_FIELDS = ("regex", "json_schema", "choice", "grammar", "json_object")


class SamplingParamsError(BanisterError, ValueError):
    """A sampling setting that is out of range or of the wrong type.

    ``field`` names the offending setting; the message starts with it.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass
class SamplingSettings:
    """Process-wide limits that validation reads at the time a request is checked.

    Parameters
    ----------
    max_logprobs:
        Largest ``logprobs`` / ``prompt_logprobs`` count a request may ask for (default 20, as OpenAI).
    """

    max_logprobs: int = 20


#: The live settings; change them with ``settings.max_logprobs = 50`` before requests are created.
settings = SamplingSettings()


@dataclass(frozen=True)
class SamplingParams:
    """How to pick the tokens of one request (immutable; checked on construction).

    Field names and defaults follow the OpenAI and vLLM APIs. A field out of range raises
    :class:`SamplingParamsError` naming it. Token ids are checked against a vocabulary only when the
    request joins a batch (:meth:`SamplingState.add_request`).

    Parameters
    ----------
    n:
        Number of independent samples to return (default 1); see :func:`expand_n`.
    presence_penalty, frequency_penalty:
        OpenAI penalties in [-2, 2] (default 0): ``logit - count * frequency - (count > 0) * presence``
        over the tokens generated so far.
    repetition_penalty:
        HF/CTRL penalty > 0 (default 1 = off) over prompt and output tokens: positive logits are
        divided by it, negative ones multiplied.
    temperature:
        >= 0 (default 1); below ``GREEDY_TEMPERATURE`` (so 0) means greedy decoding.
    top_p:
        Nucleus mass in (0, 1] (default 1 = off).
    top_k:
        Keep the k most likely tokens and any tied with the k-th (default 0 = off; -1 also means off
        and is stored as 0).
    min_p:
        In [0, 1] (default 0 = off): drop tokens less likely than ``min_p`` times the top token.
    seed:
        Seed of this request's own random generator (default None: the shared generator).
    stop:
        Stop strings (a string or a sequence of non-empty strings; stored as a tuple, default empty).
    stop_token_ids:
        Token ids that end generation (stored as a tuple, default empty).
    include_stop_str_in_output:
        Keep the matched stop string (or the stop/EOS token's text) in the output (default False).
    ignore_eos:
        Keep going after EOS (default False); EOS is then an ordinary token.
    max_tokens:
        Most tokens to generate, >= 1 (default 16); None: until the context runs out.
    min_tokens:
        EOS, stop tokens and stop strings are held back until this many tokens exist (default 0).
    logprobs:
        Number of top alternatives to return with each sampled token's logprob, in
        [0, ``settings.max_logprobs``] (default None: no logprobs).
    prompt_logprobs:
        Same, for every prompt position (default None).
    logit_bias:
        Token id -> bias in [-100, 100] added to the logit (keys may be decimal strings, as in OpenAI
        JSON; stored with int keys; default None).
    allowed_token_ids:
        Only these ids may be sampled (non-empty; stored as a tuple; default None: all).
    skip_special_tokens:
        Leave special tokens out of the output text (default True).
    regex, json_schema, choice, grammar, json_object:
        Structured output; at most one may be set. ``json_schema`` is a dict or its JSON text,
        ``choice`` a non-empty sequence of strings (stored as a tuple), ``json_object`` is JSON mode.
    """

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | Sequence[str] | None = None
    stop_token_ids: Sequence[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    logit_bias: Mapping[int, float] | None = None
    allowed_token_ids: Sequence[int] | None = None
    skip_special_tokens: bool = True
    regex: str | None = None
    json_schema: dict[str, Any] | str | None = None
    choice: Sequence[str] | None = None
    grammar: str | None = None
    json_object: bool = False

    def __post_init__(self) -> None:
        set_ = self._set
        set_("n", _int(self.n, "n", low=1))
        set_("presence_penalty", _float(self.presence_penalty, "presence_penalty", -2.0, 2.0))
        set_("frequency_penalty", _float(self.frequency_penalty, "frequency_penalty", -2.0, 2.0))
        rep = _float(self.repetition_penalty, "repetition_penalty")
        if rep <= 0:
            raise SamplingParamsError("repetition_penalty", f"must be > 0, got {rep}")
        set_("repetition_penalty", rep)
        set_("temperature", _float(self.temperature, "temperature", low=0.0))
        top_p = _float(self.top_p, "top_p", high=1.0)
        if top_p <= 0:
            raise SamplingParamsError("top_p", f"must be in (0, 1], got {top_p}")
        set_("top_p", top_p)
        top_k = _int(self.top_k, "top_k", low=-1)
        set_("top_k", 0 if top_k == -1 else top_k)
        set_("min_p", _float(self.min_p, "min_p", 0.0, 1.0))
        if self.seed is not None:
            set_("seed", _int(self.seed, "seed", low=-(2**63), high=2**64 - 1))
        set_("stop", _stop_strings(self.stop))
        set_("stop_token_ids", _token_ids(self.stop_token_ids, "stop_token_ids", allow_empty=True))
        for name in ("include_stop_str_in_output", "ignore_eos", "skip_special_tokens", "json_object"):
            _bool(getattr(self, name), name)
        if self.max_tokens is not None:
            set_("max_tokens", _int(self.max_tokens, "max_tokens", low=1))
        set_("min_tokens", _int(self.min_tokens, "min_tokens", low=0))
        if self.max_tokens is not None and self.min_tokens > self.max_tokens:
            raise SamplingParamsError("min_tokens", f"must be <= max_tokens ({self.max_tokens}), got {self.min_tokens}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None:
                set_(name, _int(value, name, low=0, high=settings.max_logprobs, setting="settings.max_logprobs"))
        set_("logit_bias", _logit_bias(self.logit_bias))
        if self.allowed_token_ids is not None:
            set_("allowed_token_ids", _token_ids(self.allowed_token_ids, "allowed_token_ids", allow_empty=False))
        self._check_structured()

    @property
    def greedy(self) -> bool:
        """Whether this request decodes greedily (``temperature < GREEDY_TEMPERATURE``)."""
        return self.temperature < GREEDY_TEMPERATURE

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def _check_structured(self) -> None:
        given = [name for name in _STRUCTURED_FIELDS if getattr(self, name) not in (None, False)]
        if len(given) > 1:
            raise SamplingParamsError(given[1], f"at most one structured-output field may be set, got {given}")
        for name in ("regex", "grammar"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise SamplingParamsError(name, f"must be a non-empty string, got {value!r}")
        schema = self.json_schema
        if isinstance(schema, str):
            try:
                parsed = json.loads(schema)
            except json.JSONDecodeError as exc:
                raise SamplingParamsError("json_schema", f"is not valid JSON: {exc}") from None
            if not isinstance(parsed, dict):
                raise SamplingParamsError("json_schema", "must be a JSON object")
        elif schema is not None and not isinstance(schema, dict):
            raise SamplingParamsError("json_schema", f"must be a dict or its JSON text, got {type(schema).__name__}")
        if self.choice is not None:
            if isinstance(self.choice, str) or not isinstance(self.choice, Sequence):
                raise SamplingParamsError("choice", "must be a sequence of strings")
            choices = tuple(self.choice)
            if not choices or not all(isinstance(c, str) for c in choices):
                raise SamplingParamsError("choice", f"must be a non-empty sequence of strings, got {self.choice!r}")
            self._set("choice", choices)


def _float(value: Any, name: str, low: float | None = None, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SamplingParamsError(name, f"must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise SamplingParamsError(name, f"must be finite, got {number}")
    if (low is not None and number < low) or (high is not None and number > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise SamplingParamsError(name, f"must be in [{lo}, {hi}], got {number}")
    return number


def _int(value: Any, name: str, low: int | None = None, high: int | None = None, setting: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SamplingParamsError(name, f"must be an integer, got {value!r}")
    if low is not None and value < low:
        raise SamplingParamsError(name, f"must be >= {low}, got {value}")
    if high is not None and value > high:
        hint = f" (raise `{setting}` to allow more)" if setting else ""
        raise SamplingParamsError(name, f"must be <= {high}, got {value}{hint}")
    return int(value)


def _bool(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise SamplingParamsError(name, f"must be True or False, got {value!r}")


def _stop_strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    strings = (value,) if isinstance(value, str) else value
    if not isinstance(strings, Sequence):
        raise SamplingParamsError("stop", f"must be a string or a sequence of strings, got {value!r}")
    strings = tuple(strings)
    for s in strings:
        if not isinstance(s, str) or not s:
            raise SamplingParamsError("stop", f"stop strings must be non-empty strings, got {s!r}")
    return strings


def _token_ids(value: Any, name: str, allow_empty: bool) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise SamplingParamsError(name, f"must be a sequence of token ids, got {value!r}")
    ids = tuple(value)
    if not ids and not allow_empty:
        raise SamplingParamsError(name, "must not be empty")
    for t in ids:
        _int(t, name, low=0)
    return ids


def _logit_bias(value: Any) -> dict[int, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise SamplingParamsError("logit_bias", f"must be a mapping of token id to bias, got {value!r}")
    bias: dict[int, float] = {}
    for key, b in value.items():
        if isinstance(key, str) and key.isdecimal():
            key = int(key)
        token = _int(key, "logit_bias", low=0)
        bias[token] = _float(b, "logit_bias", -100.0, 100.0)
    return bias
