"""The garbage-collector settings of a long-running process (banister.collector)."""

import gc

import pytest

from banister.cli import build_parser
from banister.collector import GEN0_THRESHOLD, whole_number_arg, settle_heap


def test_settle_heap_freezes_the_live_heap_and_raises_the_young_threshold():
    previous = gc.get_threshold()
    try:
        assert settle_heap(20_000) == previous
        assert gc.get_threshold() == (20_000, previous[1], previous[2])  # older generations as they were
        assert gc.get_freeze_count() > 0
        assert gc.get_count()[0] < 100  # nothing young left over: the collection ran, then the freeze
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


@pytest.mark.parametrize("bad", [0, -5])
def test_settle_heap_refuses_a_threshold_that_would_stop_collection(bad):
    previous = gc.get_threshold()
    with pytest.raises(ValueError, match="gen0_threshold"):
        settle_heap(bad)
    assert gc.get_threshold() == previous


def test_the_command_line_option_takes_a_positive_whole_number():
    assert whole_number_arg("700") == 700
    for bad in ("0", "-1", "1.5", "many"):
        with pytest.raises(Exception, match="at least 1"):
            whole_number_arg(bad)
    parser = build_parser()
    assert parser.parse_args(["serve"]).gc_threshold == GEN0_THRESHOLD
    assert parser.parse_args(["bench", "maskbench", "--data", "x", "--gc-threshold", "700"]).gc_threshold == 700
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--gc-threshold", "0"])
