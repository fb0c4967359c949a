"""Fixtures shared by several test modules."""

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matrices: torch's thread pool costs more than it saves (and these machines are shared)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def gpt2():
    from banister.errors import VocabularyError
    from banister.vocab.named import load_named

    try:
        return load_named("gpt2")
    except VocabularyError as exc:  # the package that ships it is missing
        pytest.skip(str(exc))
