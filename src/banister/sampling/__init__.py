"""Sampling: request settings, the batched sampler, logprobs, n > 1, beam search and stop conditions.

A decoding loop keeps one :class:`SamplingState` for its running batch (rows added and removed
between steps), calls a :class:`Sampler` once per step on the batch's logits, records the tokens with
``state.append_tokens`` and feeds each request's :class:`StopChecker`.
"""

from banister.sampling.beam import BeamHypothesis, beam_search
from banister.sampling.logprobs import LogprobsTensors, TokenLogprobs, compute_logprobs, prompt_logprobs
from banister.sampling.parallel import SampleGroup, expand_n
from banister.sampling.params import GREEDY_TEMPERATURE, SamplingParams, SamplingParamsError, SamplingSettings, settings
from banister.sampling.sampler import Sampler, SamplerOutput
from banister.sampling.state import SamplingState
from banister.sampling.stop import StopChecker

__all__ = [
    "GREEDY_TEMPERATURE",
    "BeamHypothesis",
    "LogprobsTensors",
    "SampleGroup",
    "Sampler",
    "SamplerOutput",
    "SamplingParams",
    "SamplingParamsError",
    "SamplingSettings",
    "SamplingState",
    "StopChecker",
    "TokenLogprobs",
    "beam_search",
    "compute_logprobs",
    "expand_n",
    "prompt_logprobs",
    "settings",
]
