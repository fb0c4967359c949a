"""Fixtures shared by several test modules."""

import pytest
import torch


def pytest_sessionstart(session):
    """Refuse to test a compiled module in place of its edited source (run `make test`: it rebuilds)."""
    from banister import _build

    stale = _build.stale_compiled()
    if stale and not _build.interpreted():
        pytest.exit(f"compiled modules older than their sources: {', '.join(stale)}; rebuild with `make test` "
                    "(or run with BANISTER_INTERPRETED=1)", returncode=2)


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
