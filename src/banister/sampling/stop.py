"""Stop conditions of one request: EOS, stop tokens, stop strings, max_tokens, and the text to show."""

from __future__ import annotations

from typing import Literal

from banister.sampling.params import SamplingParams
from banister.vocab import Vocabulary

FinishReason = Literal["stop", "length"]


class StopChecker:
    """Follows one request's output token by token and decides when it stops.

    Stop strings are matched on the detokenised bytes (token bytes from the vocabulary), so they are
    found across token boundaries; a match counts only if it ends in the newest token's bytes, and
    when several end there the one that ends first wins (then the longest). Nothing stops before
    ``min_tokens`` tokens exist (except ``max_tokens``). The text of a matched stop string, EOS or
    stop token is dropped unless ``include_stop_str_in_output``.

    :meth:`take_text` streams the output without ever splitting a multi-byte UTF-8 character and
    without showing text that a stop string still being matched could take back.

    Parameters
    ----------
    params:
        The request's settings (``stop``, ``stop_token_ids``, ``ignore_eos``, ``min_tokens``,
        ``max_tokens``, ``include_stop_str_in_output``, ``skip_special_tokens``).
    vocab:
        Token bytes, EOS ids and special ids.
    """

    def __init__(self, params: SamplingParams, vocab: Vocabulary) -> None:
        self.params = params
        self._vocab = vocab
        self._stops = tuple(s.encode("utf-8") for s in params.stop or ())
        self._stop_ids = frozenset(params.stop_token_ids or ())
        self._eos_ids = frozenset() if params.ignore_eos else frozenset(vocab.eos_token_ids)
        self._bytes = bytearray()
        self._shown = 0
        self.token_ids: list[int] = []
        self.finish_reason: FinishReason | None = None
        self.stop_reason: int | str | None = None

    @property
    def finished(self) -> bool:
        """Whether the request has stopped."""
        return self.finish_reason is not None

    @property
    def output_bytes(self) -> bytes:
        """The output so far (cut at the stop string once one matched)."""
        return bytes(self._bytes)

    @property
    def text(self) -> str:
        """The output so far as text (undecodable bytes become U+FFFD)."""
        return self._bytes.decode("utf-8", errors="replace")

    def append(self, token_id: int) -> bool:
        """Take the next generated token; returns whether the request is now finished.

        Raises ``ValueError`` when the request has already finished.
        """
        if self.finished:
            raise ValueError("token_id: the request has already finished")
        self.token_ids.append(token_id)
        count = len(self.token_ids)
        may_stop = count >= self.params.min_tokens
        piece = self._token_bytes(token_id)
        if may_stop and (token_id in self._eos_ids or token_id in self._stop_ids):
            if self.params.include_stop_str_in_output:
                self._bytes += piece
            self._finish("stop", token_id if token_id in self._stop_ids else None)
            return True
        before = len(self._bytes)
        self._bytes += piece
        if may_stop and self._stops and piece:
            match = self._find_stop(before)
            if match is not None:
                start, stop = match
                end = start + len(stop) if self.params.include_stop_str_in_output else start
                del self._bytes[end:]
                self._finish("stop", stop.decode("utf-8"))
                return True
        if self.params.max_tokens is not None and count >= self.params.max_tokens:
            self._finish("length", None)
        return self.finished

    def take_text(self) -> str:
        """The text that became safe to show since the last call (advances the stream).

        Until the request finishes, this holds back a trailing incomplete UTF-8 character and any
        tail that could still grow into a stop string; once finished it returns the rest.
        """
        end = len(self._bytes)
        if not self.finished:
            end -= self._pending_stop_prefix()
            end = _utf8_boundary(self._bytes, end)
        if end <= self._shown:
            return ""
        out = self._bytes[self._shown : end].decode("utf-8", errors="replace")
        self._shown = end
        return out

    def _token_bytes(self, token_id: int) -> bytes:
        if self.params.skip_special_tokens and token_id in self._vocab.special_token_ids:
            return b""
        return self._vocab.token_bytes(token_id)

    def _finish(self, reason: FinishReason, stop_reason: int | str | None) -> None:
        self.finish_reason = reason
        self.stop_reason = stop_reason

    def _find_stop(self, before: int) -> tuple[int, bytes] | None:
        """The stop string occurrence that ends first among those ending after byte ``before``."""
        best: tuple[int, int, bytes] | None = None
        for stop in self._stops:
            start = self._bytes.find(stop, max(0, before - len(stop) + 1))
            if start < 0:
                continue
            key = (start + len(stop), -len(stop), stop)
            if best is None or key[:2] < best[:2]:
                best = key
        if best is None:
            return None
        end, neg_len, stop = best
        return end + neg_len, stop

    def _pending_stop_prefix(self) -> int:
        """Length of the longest tail of the output that is a proper prefix of a stop string."""
        if self.params.include_stop_str_in_output or not self._stops:
            return 0
        data = self._bytes
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(data)), longest, -1):
                if data.endswith(stop[:size]):
                    longest = size
                    break
        return longest


def _utf8_boundary(data: bytearray, end: int) -> int:
    """The largest ``e <= end`` such that ``data[:e]`` does not stop inside a multi-byte character."""
    for back in range(1, min(4, end) + 1):
        lead = data[end - back]
        if lead & 0xC0 != 0x80:
            need = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 1
            return end - back if need > back else end
    return end
