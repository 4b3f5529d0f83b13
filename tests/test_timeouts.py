"""The suite's per-test time limit (tests/support/timeouts.py): a hang fails that one test, naming it, and
the run goes on; the limit is scaled by how slow the machine is, `OM_TEST_TIMEOUT` and
`@pytest.mark.timeout` still decide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import timeouts
from support.timeouts import REFERENCE, Machine, limit

SUPPORT = Path(__file__).resolve().parent

HANGS = """
import threading

import anyio
import pytest


@pytest.mark.timeout(1)
def test_blocks_on_a_lock():
    lock = threading.Lock()
    lock.acquire()
    lock.acquire()


@pytest.mark.timeout(1)
@pytest.mark.anyio
async def test_awaits_forever():
    await anyio.Event().wait()


@pytest.mark.anyio
async def test_after_them_runs():
    await anyio.sleep(0)


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""


def run_hangs(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["support.timeouts"]\n')
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent(HANGS))
    child = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}
    for name in (timeouts.LIMIT_VARIABLE, timeouts.FACTOR_VARIABLE):
        child.pop(name, None)
    child.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfE", *args, "test_hangs.py"],
        cwd=tmp_path,
        env=child,
        capture_output=True,
        text=True,
        timeout=300,  # the limit under test failed to end the run: say so instead of hanging
    )


@pytest.mark.slow
def test_a_hung_test_fails_by_name_and_the_run_goes_on(tmp_path: Path) -> None:
    done = run_hangs(tmp_path, **{timeouts.FACTOR_VARIABLE: "1"})
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 failed, 1 passed" in out, out
    for name in ("test_blocks_on_a_lock", "test_awaits_forever"):
        assert f"test_hangs.py::{name} ran past its 1 s limit in call" in out, out
    assert "Current thread" in out or "Thread 0x" in out, out  # the stacks, to see where it hung
    assert f"time limits: 120 s a test x 1 ({timeouts.FACTOR_VARIABLE})" in out, out  # the header says so


@pytest.mark.slow
def test_the_factor_stretches_a_marked_limit_and_workers_enforce_it(tmp_path: Path) -> None:
    """Under pytest-xdist, in the workers, a test marked 1 s on a machine twice as slow gets 2 s."""
    done = run_hangs(tmp_path, "-n", "2", **{timeouts.FACTOR_VARIABLE: "2"})
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 failed, 1 passed" in out, out
    # by name, not by count: pytest's summary repeats each message in full when CI is set, cut to the width otherwise
    for name in ("test_blocks_on_a_lock", "test_awaits_forever"):
        assert f"{name} ran past its 2 s limit in call (1 s (@pytest.mark.timeout) x machine factor 2" in out, out
    assert "test_after_them_runs ran past" not in out, out


def test_the_factor_is_the_slowest_measure_within_bounds() -> None:
    quiet = Machine(cpu_seconds=REFERENCE.cpu_seconds, spawn_seconds=REFERENCE.spawn_seconds, cores=2)
    assert quiet.factor(load=0.5) == 1.0  # never below the limits as written
    assert quiet.factor(load=6.0) == 3.0  # 6 runnable on 2 cores: three times as long
    slow_spawn = Machine(cpu_seconds=REFERENCE.cpu_seconds, spawn_seconds=4 * REFERENCE.spawn_seconds, cores=2)
    assert slow_spawn.factor(load=2.0) == pytest.approx(4.0)
    assert quiet.factor(load=1000.0) == timeouts.MAX_FACTOR  # a hang still ends


def test_the_limit_follows_the_marker_the_variable_and_the_factor() -> None:
    assert limit(None, {}, 1.0).seconds == timeouts.DEFAULT_SECONDS
    assert limit(None, {}, 2.5).seconds == 2.5 * timeouts.DEFAULT_SECONDS
    assert limit(600.0, {}, 2.0).seconds == 1200.0  # a marker is reference seconds too
    given = limit(600.0, {timeouts.LIMIT_VARIABLE: "900"}, 2.0)
    assert given.seconds == 900.0 and timeouts.LIMIT_VARIABLE in given.why  # as given, not scaled
    assert limit(600.0, {timeouts.LIMIT_VARIABLE: "0"}, 2.0).seconds == 0  # none at all, under a debugger


def test_the_calibration_measures_this_machine() -> None:
    machine = Machine.measure()
    assert machine.cpu_seconds > 0 and machine.spawn_seconds > 0 and machine.cores >= 1
    assert 1.0 <= machine.factor(load=0.0) <= timeouts.MAX_FACTOR


def test_a_tests_own_waits_stretch_by_the_same_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(timeouts.FACTOR_VARIABLE, "3")
    assert timeouts.scaled(10.0) == 30.0
    monkeypatch.setenv(timeouts.FACTOR_VARIABLE, "1")
    assert timeouts.scaled(10.0) == 10.0
