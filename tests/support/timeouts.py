"""A per-test time limit, so a hang fails one test instead of the whole CI run.

Each test (its set-up and call together) gets `DEFAULT_SECONDS`, or what
`@pytest.mark.timeout(seconds)` gives it, and its teardown at least `TEARDOWN_SECONDS`;
`OM_TEST_TIMEOUT` (seconds) sets the default, 0 turns the limit off (a debugger session).
Past the limit, SIGALRM dumps every thread's stack to the test's captured stderr and
fails the test, naming it; if the test is stuck where Python cannot raise (a C call
that never returns), faulthandler ends the run `GRACE_SECONDS` later rather than letting CI hang.

It lives here rather than in pytest-timeout to keep the test dependencies to the design
card; it needs SIGALRM (Linux, macOS) and does nothing elsewhere.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DEFAULT_SECONDS = 120.0
GRACE_SECONDS = 60.0
TEARDOWN_SECONDS = 30.0
DEADLINE = pytest.StashKey[float]()


def limit_for(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        return float(marker.args[0] if marker.args else marker.kwargs["seconds"])
    return float(os.environ.get("OM_TEST_TIMEOUT", DEFAULT_SECONDS))


@contextmanager
def time_limit(item: pytest.Item, phase: str) -> Iterator[None]:
    """Run one phase of `item` (setup, call, teardown) inside what is left of its limit;
    teardown always gets `TEARDOWN_SECONDS` at least, to stop what the test started."""
    seconds = limit_for(item)
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return
    if phase == "setup":
        item.stash[DEADLINE] = time.monotonic() + seconds
    left = item.stash.get(DEADLINE, time.monotonic() + seconds) - time.monotonic()
    if phase == "teardown":
        left = max(left, TEARDOWN_SECONDS)

    def expired(signum: int, frame: object) -> None:
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        pytest.fail(
            f"{item.nodeid} ran past its {seconds:g} s limit in {phase} (a hang?); its captured stderr shows where"
            " every thread was. @pytest.mark.timeout(seconds) sets a test's own limit, OM_TEST_TIMEOUT the default.",
            pytrace=False,
        )

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
    faulthandler.dump_traceback_later(max(left, 0.001) + GRACE_SECONDS, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with time_limit(item, "setup"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with time_limit(item, "call"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with time_limit(item, "teardown"):
        return (yield)
