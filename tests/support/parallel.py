"""The suite runs on several worker processes by default (pytest-xdist), because most of its time is spent
waiting on the child processes its tests start (servers, hooks, CLIs, PostgreSQL), not on the CPU.

`python -m pytest` (the whole suite, or a folder of it, with any `-k`/`-m`) gets `OM_TEST_WORKERS` workers
(default `default_workers()`); the command stays the README's and CI's, the parallelism comes from here. A
run stays serial, in this process, when it names test files or tests (`tests/test_x.py`, `file.py::test`:
starting the workers would cost more than they save), asks for a debugger (`--pdb`) or for output as it
happens (`-s`), or only collects; `-n N` (`-n 0`: serial) and `-p no:xdist` decide for themselves, and
without pytest-xdist installed the run is serial.

Parallel-safety is a property of the fixtures, not of the test list: each worker is its own process with its
own PostgreSQL server (the session fixture in `support/postgres.py` starts one per process), its own temporary
directories (`tmp_path` is under the worker's own base), its own environment, and ports that no other test on
this machine holds (`om_mcp.testing.ports.free_port`). CONTRIBUTING says what a new test must do to keep it.

The slowest tests go first (those marked `slow`, then the rest in file order), so the long ones do not end
the run alone on one worker; the scheduler hands tests out a few at a time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

WORKERS_VARIABLE = "OM_TEST_WORKERS"


def default_workers() -> int:
    """Twice the cores, at least 2 and at most 6: the tests mostly wait on their children, so more workers
    than cores pays (measured in CONTRIBUTING), and past 6 the workers' own start-up and memory cost more."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(2, min(6, 2 * cores))


def workers(env: os._Environ[str] | dict[str, str] = os.environ) -> int:
    given = env.get(WORKERS_VARIABLE, "").strip()
    if not given:
        return default_workers()
    try:
        return max(0, int(given))
    except ValueError:
        raise pytest.UsageError(f"{WORKERS_VARIABLE}={given!r}: give a number of workers (0 or 1: serial)") from None


def names_files(config: pytest.Config) -> bool:
    """The command line names test files or tests (not a folder, not the default `testpaths`)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS or not config.args:
        return False
    return all("::" in arg or Path(config.invocation_params.dir, arg).is_file() for arg in map(str, config.args))


def stays_serial(config: pytest.Config) -> bool:
    option = config.option
    return bool(
        getattr(option, "usepdb", False)
        or getattr(option, "capture", "fd") == "no"
        or getattr(option, "collectonly", False)
        or names_files(config)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Runs before pytest-xdist's own hook reads the options."""
    if not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput"):
        return
    if config.option.numprocesses is not None or stays_serial(config):
        return
    count = workers()
    if count <= 1:
        return
    config.option.numprocesses = count
    if config.option.dist == "no":
        config.option.dist = "load"
    if getattr(config.option, "maxschedchunk", None) is None:
        config.option.maxschedchunk = 2


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests first when the run is shared out (every worker sorts its collection the same way, so they
    agree); a serial run keeps the file order."""
    if not hasattr(config, "workerinput"):
        return
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
