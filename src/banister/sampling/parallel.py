"""n > 1: one request fanned out into independent child requests and gathered back."""

from __future__ import annotations

import dataclasses
from typing import Generic, TypeVar

from banister.sampling.params import SamplingParams

R = TypeVar("R")


def expand_n(params: SamplingParams) -> list[SamplingParams]:
    """The ``params.n`` child requests of a request, each with ``n = 1``.

    Child ``i`` gets seed ``seed + i``, so child 0 samples exactly as the same request with ``n = 1``;
    an unseeded request has unseeded children. Everything else is copied.
    """
    return [
        dataclasses.replace(params, n=1, seed=None if params.seed is None else params.seed + i) for i in range(params.n)
    ]


class SampleGroup(Generic[R]):
    """Collects the results of a request's children, in child order.

    Parameters
    ----------
    params:
        The parent request; :attr:`children` holds its expansion (:func:`expand_n`).
    """

    def __init__(self, params: SamplingParams) -> None:
        self.params = params
        self.children = expand_n(params)
        self._results: dict[int, R] = {}

    @property
    def finished(self) -> bool:
        """Whether every child has reported."""
        return len(self._results) == len(self.children)

    def add(self, index: int, result: R) -> None:
        """Record child ``index``'s result; raises ``ValueError`` for an unknown or repeated index."""
        if not 0 <= index < len(self.children):
            raise ValueError(f"index must be in [0, {len(self.children)}), got {index}")
        if index in self._results:
            raise ValueError(f"index {index} already has a result")
        self._results[index] = result

    def results(self) -> list[R]:
        """The children's results in child order; raises ``ValueError`` until all have reported."""
        if not self.finished:
            missing = [i for i in range(len(self.children)) if i not in self._results]
            raise ValueError(f"children {missing} have not reported")
        return [self._results[i] for i in range(len(self.children))]
