"""A per-test time limit, so a hang fails one test instead of the whole CI run.

Each test (its set-up and call together) gets `DEFAULT_SECONDS`, or what `@pytest.mark.timeout(seconds)`
gives it, times the machine factor; its teardown gets at least `TEARDOWN_SECONDS`. The seconds written in
the code are for the reference machine (a quiet 2-core machine of the project's kind); the factor says how
much slower this one is right now: at session start a fixed CPU loop and a process spawn are timed (best of
a few) against `REFERENCE`, and before each test the 1-minute load average is read per core. The factor is
the largest of those ratios, at least 1 and at most `MAX_FACTOR`, so a loaded machine (another suite beside
this one, or this suite's own workers) stretches the limits instead of failing slow tests, and a hang still
fails within minutes. Under pytest-xdist the controller calibrates once and hands the figures to its workers.

`OM_TEST_TIMEOUT` (seconds) is every test's limit as given, not scaled; 0 turns the limits off (a debugger
session). `OM_TEST_TIMEOUT_FACTOR` fixes the factor instead of measuring it (1: the limits as written).
`scaled(seconds)` stretches a test's own waits (a server to start, an answer to come) by the same factor.

Past the limit, SIGALRM dumps every thread's stack to the test's captured stderr and fails the test, naming
it; if the test is stuck where Python cannot raise (a C call that never returns), faulthandler ends the run
`GRACE_SECONDS` later rather than letting CI hang. It lives here rather than in pytest-timeout to keep the
test dependencies small and to scale the limits; it needs SIGALRM (Linux, macOS) and does nothing elsewhere.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import pytest

DEFAULT_SECONDS = 120.0
GRACE_SECONDS = 60.0
TEARDOWN_SECONDS = 30.0
MAX_FACTOR = 8.0
LIMIT_VARIABLE = "OM_TEST_TIMEOUT"
FACTOR_VARIABLE = "OM_TEST_TIMEOUT_FACTOR"


def _cpu_loop() -> None:
    sum(i * i for i in range(300_000))


@dataclass(frozen=True)
class Machine:
    """What the session-start calibration measured: the best of a few runs of a fixed CPU loop and of
    spawning `python -c pass` (seconds), and the cores this process may run on."""

    cpu_seconds: float
    spawn_seconds: float
    cores: int

    @classmethod
    def measure(cls) -> Machine:
        def timed(run) -> float:
            start = time.perf_counter()
            run()
            return time.perf_counter() - start

        cpu = min(timed(_cpu_loop) for _ in range(5))
        spawn = min(timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)) for _ in range(3))
        return cls(cpu_seconds=cpu, spawn_seconds=spawn, cores=_cores())

    def ratios(self, load: float) -> dict[str, float]:
        return {
            "cpu loop": self.cpu_seconds / REFERENCE.cpu_seconds,
            "process spawn": self.spawn_seconds / REFERENCE.spawn_seconds,
            "load per core": load / max(self.cores, 1),
        }

    def factor(self, load: float) -> float:
        return min(MAX_FACTOR, max(1.0, *self.ratios(load).values()))


# The best of 112 calibrations on the project's 2-core machine over an hour and a half (Python 3.11, the
# venv's python; python -c "from support.timeouts import Machine; print(Machine.measure())" from tests/):
# what it does when nothing else runs.
REFERENCE = Machine(cpu_seconds=0.016, spawn_seconds=0.024, cores=2)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _load() -> float:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


@dataclass(frozen=True)
class Limit:
    seconds: float  # 0: no limit
    why: str  # how the figure was reached, for the failure message


def limit(marked: float | None, env: Mapping[str, str], factor: float) -> Limit:
    """A test's limit: `OM_TEST_TIMEOUT` as given (0: none), else its marker's seconds or the default,
    times the machine factor."""
    if env.get(LIMIT_VARIABLE, "").strip():
        given = float(env[LIMIT_VARIABLE])
        return Limit(given, f"{LIMIT_VARIABLE}={given:g}")
    base = DEFAULT_SECONDS if marked is None else marked
    where = "the default" if marked is None else "@pytest.mark.timeout"
    return Limit(round(base * factor, 1), f"{base:g} s ({where}) x machine factor {factor:.2g}")


# -- the session's calibration ---------------------------------------------------------------------------

MACHINE = pytest.StashKey["Machine | None"]()
DEADLINE = pytest.StashKey[float]()
LIMIT = pytest.StashKey[Limit]()
WORKER_INPUT = "om_test_machine"


def fixed_factor(env: Mapping[str, str]) -> float | None:
    given = env.get(FACTOR_VARIABLE, "").strip()
    return float(given) if given else None


_machine: list[Machine | None] = [None]  # this process's calibration, for `scaled`


def scaled(seconds: float) -> float:
    """A test's own wait for something that takes machine time (a server to start, an answer to come back),
    stretched by the machine factor now, as the limits are: the wait ends as soon as the thing happens, so
    a longer one only delays a real failure, and a loaded machine no longer fails a test that would pass."""
    fixed = fixed_factor(os.environ)
    if fixed is not None:
        return seconds * fixed
    machine = _machine[0]
    return seconds * (1.0 if machine is None else machine.factor(_load()))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "timeout(seconds): this test's own time limit on the reference machine")
    given = getattr(config, "workerinput", {}).get(WORKER_INPUT)
    if given is not None:  # an xdist worker: the controller measured
        config.stash[MACHINE] = Machine(**given)
    elif fixed_factor(os.environ) is None:
        config.stash[MACHINE] = Machine.measure()
    else:
        config.stash[MACHINE] = None
    _machine[0] = config.stash[MACHINE]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist, in the controller: each worker gets the controller's calibration (measured once, before the
    workers add their own load)."""
    machine = node.config.stash.get(MACHINE, None)
    if machine is not None:
        node.workerinput[WORKER_INPUT] = asdict(machine)


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get(LIMIT_VARIABLE, "").strip():
        return f"time limits: {LIMIT_VARIABLE}={os.environ[LIMIT_VARIABLE]} s a test (not scaled)"
    fixed = fixed_factor(os.environ)
    if fixed is not None:
        return f"time limits: {DEFAULT_SECONDS:g} s a test x {fixed:g} ({FACTOR_VARIABLE})"
    machine = config.stash.get(MACHINE, None)
    if machine is None:
        return f"time limits: {DEFAULT_SECONDS:g} s a test"
    load = _load()
    ratios = ", ".join(f"{name} {ratio:.1f}x" for name, ratio in machine.ratios(load).items())
    return (
        f"time limits: {DEFAULT_SECONDS:g} s a test x machine factor {machine.factor(load):.1f} now ({ratios}"
        f" of the reference; rescaled before each test by the load), {LIMIT_VARIABLE} / {FACTOR_VARIABLE} to fix"
    )


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """The same line at the end, where `-q` (the project's default) shows it."""
    if not hasattr(config, "workerinput"):
        terminalreporter.write_line(pytest_report_header(config))


# -- the limit itself ---------------------------------------------------------------------------------


def limit_for(item: pytest.Item) -> Limit:
    marker = item.get_closest_marker("timeout")
    marked = None
    if marker is not None:
        marked = float(marker.args[0] if marker.args else marker.kwargs["seconds"])
    return limit(marked, os.environ, scaled(1.0))


@contextmanager
def time_limit(item: pytest.Item, phase: str) -> Iterator[None]:
    """Run one phase of `item` (setup, call, teardown) inside what is left of its limit;
    teardown always gets `TEARDOWN_SECONDS` at least, to stop what the test started."""
    if phase == "setup" or LIMIT not in item.stash:
        item.stash[LIMIT] = limit_for(item)
    given = item.stash[LIMIT]
    if given.seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return
    if phase == "setup" or DEADLINE not in item.stash:
        item.stash[DEADLINE] = time.monotonic() + given.seconds
    left = item.stash[DEADLINE] - time.monotonic()
    if phase == "teardown":
        left = max(left, TEARDOWN_SECONDS)

    def expired(signum: int, frame: object) -> None:
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        pytest.fail(
            f"{item.nodeid} ran past its {given.seconds:g} s limit in {phase} ({given.why}; a hang?); its captured"
            f" stderr shows where every thread was. @pytest.mark.timeout(seconds) sets a test's own limit,"
            f" {LIMIT_VARIABLE} every test's.",
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
