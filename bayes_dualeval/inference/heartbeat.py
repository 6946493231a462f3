"""A line now and then while a long compiled computation runs.

Parallel NUTS chains run as one compiled program with no progress bar: NumPyro refuses one
for a callable ``chain_method``, and a bar's host callbacks would keep the program out of
JAX's persistent compilation cache (:mod:`bayes_dualeval.inference.nuts`). A first round on
data of HELM AIR-Bench's size takes twenty minutes or more on a CPU, and without a line in
that time a run looks hung. :func:`heartbeat` logs how long the computation has been running,
from a thread of its own, at growing intervals (:data:`FIRST`, then doubling up to
:data:`LONGEST`), and stops when the block ends. A compiled program reports nothing until it
returns, so how far the computation has got is known only where it runs in pieces (a round
in chunks of draws, :mod:`bayes_dualeval.inference.nuts_round`); the caller's ``progress`` then
adds it to the line.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import contextmanager

#: Seconds before the first line ...
FIRST = 60.0
#: ... and the longest interval between two lines (each interval doubles the one before).
LONGEST = 600.0


@contextmanager
def heartbeat(
    logger: logging.Logger,
    what: str,
    progress: Callable[[], str | None] | None = None,
    first: float | None = None,
    longest: float | None = None,
):
    """While the block runs, log ``"<what> still running (<elapsed> so far)"`` now and then.

    Parameters
    ----------
    logger : logging.Logger
        Where the lines go (INFO records).
    what : str
        What is running, e.g. ``"round 1"``.
    progress : callable, optional
        Called for each line; what it returns (e.g. ``"100 of 300 draws"``), when not None,
        is added to the line.
    first, longest : float, optional
        Seconds before the first line, and the most between two lines (default
        :data:`FIRST` and :data:`LONGEST`).

    Notes
    -----
    The lines come from a daemon thread that waits on an event, so the block's end (or an
    exception, or Ctrl-C in the main thread) stops them at once.
    """
    first = FIRST if first is None else first
    longest = LONGEST if longest is None else longest
    done = threading.Event()

    def beat():
        elapsed, wait = 0.0, first
        while not done.wait(wait):
            elapsed += wait
            done_so_far = progress() if progress is not None else None
            tail = f"; {done_so_far}" if done_so_far else ""
            logger.info("%s still running (%s so far%s)", what, duration(elapsed), tail)
            wait = min(2.0 * wait, longest)

    thread = threading.Thread(target=beat, name=f"heartbeat: {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def duration(seconds: float) -> str:
    """``"45 s"``, ``"3 min"`` or ``"1 h 05 min"``: a span of time as the lines say it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
