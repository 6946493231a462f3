"""A long round says now and then that it is still running, and stops saying it after."""

import logging
import time

import pytest

from bayes_dualeval.inference import heartbeat as heartbeat_module
from bayes_dualeval.inference.heartbeat import duration, heartbeat

LOG = logging.getLogger("bayes_dualeval.test_heartbeat")


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOG.name]


def test_lines_come_at_doubling_intervals_and_stop_with_the_block(caplog):
    caplog.set_level(logging.INFO, logger=LOG.name)
    with heartbeat(LOG, "round 1", first=0.05, longest=0.1):
        time.sleep(0.5)  # lines near 0.05, 0.15, 0.25, 0.35, 0.45 s
    said = _lines(caplog)
    assert 2 <= len(said) <= 6, said  # 5 on an idle machine; threads may start late
    assert all(line.startswith("round 1 still running (") for line in said)
    time.sleep(0.3)
    assert len(_lines(caplog)) == len(said)  # nothing after the block


def test_a_short_block_says_nothing_and_an_exception_stops_the_lines(caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger=LOG.name)
    monkeypatch.setattr(heartbeat_module, "FIRST", 0.2)  # the default, read at each call
    with heartbeat(LOG, "round 1"):
        time.sleep(0.05)
    with pytest.raises(KeyboardInterrupt), heartbeat(LOG, "round 2"):
        raise KeyboardInterrupt
    time.sleep(0.3)
    assert _lines(caplog) == []


@pytest.mark.parametrize(
    "seconds, text", [(45, "45 s"), (89.4, "89 s"), (180, "3 min"), (3900, "1 h 05 min")]
)
def test_durations_read_as_a_person_would_say_them(seconds, text):
    assert duration(seconds) == text
