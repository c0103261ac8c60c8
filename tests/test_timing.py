"""umscope.timing.Stopwatch: the one CPU-side wall-time measurement (monotonic clock, before and after)."""
import time

import pytest

from umscope.timing import Stopwatch


def test_stopwatch_measures_the_block_and_only_the_block():
    sw = Stopwatch()
    time.sleep(0.3)  # before the block: not counted
    with sw:
        time.sleep(0.02)
    assert 0.02 <= sw.seconds < 0.3
    assert sw.elapsed() >= sw.seconds  # still running after the block: elapsed() goes on


def test_a_block_that_raises_has_no_seconds():
    with pytest.raises(ValueError):
        with Stopwatch() as sw:
            raise ValueError("no")
    assert sw.seconds is None


def test_elapsed_counts_from_creation_without_a_block():
    sw = Stopwatch()
    time.sleep(0.01)
    assert sw.seconds is None and 0.01 <= sw.elapsed() < 1.0


def test_a_stopwatch_can_start_in_the_past():
    """already: work that began before the stopwatch was made (a batch case whose start went unseen)."""
    sw = Stopwatch(already=5.0)
    assert 5.0 <= sw.elapsed() < 6.0
