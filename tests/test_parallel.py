"""The suite shares itself out on workers by default (tests/support/parallel.py) and stays one process when
asked, and the ports its fixtures hand out are held against every other test on the machine
(om_mcp/testing/ports.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.parallel import WORKERS_VARIABLE, default_workers, workers
from support.processes import REPO

from om_mcp.testing import ports

SUPPORT = Path(__file__).resolve().parent

WHERE = """
import os
from pathlib import Path

import pytest


@pytest.mark.parametrize("n", range(4))
def test_where(n):
    out = Path(os.environ["WHERE_OUT"]) / f"test_{n}"
    out.write_text(os.environ.get("PYTEST_XDIST_WORKER", "main"))
"""


def run(tmp_path: Path, *args: str, workers: str = "2") -> tuple[int, set[str]]:
    """`python -m pytest ARGS` on a small suite with the project's plugin; its exit code and the processes
    its tests ran in ("main", or the workers' names)."""
    suite, out = tmp_path / "suite", tmp_path / "out"
    suite.mkdir(exist_ok=True)
    out.mkdir(exist_ok=True)
    for old in out.iterdir():
        old.unlink()
    (suite / "conftest.py").write_text('pytest_plugins = ["support.parallel"]\n')
    (suite / "test_where.py").write_text(WHERE)
    env = {
        # not this run's own worker name, when this test runs on a worker
        **{name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "OM_TEST_"))},
        "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")]),
        "WHERE_OUT": str(out),
        WORKERS_VARIABLE: workers,
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=suite,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, {path.read_text() for path in out.iterdir()}


@pytest.mark.slow
def test_the_plain_command_runs_on_workers_and_still_fails_when_nothing_ran(tmp_path: Path) -> None:
    assert run(tmp_path) == (0, {"gw0", "gw1"})
    assert run(tmp_path, "-k", "no_such_test") == (5, set())  # "no tests collected" stays a failure


@pytest.mark.slow
def test_a_run_stays_in_one_process_when_asked(tmp_path: Path) -> None:
    assert run(tmp_path, "-n", "0") == (0, {"main"})
    assert run(tmp_path, "-p", "no:xdist") == (0, {"main"})  # the option -n is unknown then: nothing passes it
    assert run(tmp_path, "test_where.py") == (0, {"main"})  # a named file: worker start-up would cost more
    assert run(tmp_path, workers="0") == (0, {"main"})
    assert run(tmp_path, "-p", "no:xdist", "-k", "no_such_test") == (5, set())


def test_the_test_extra_brings_the_workers() -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    assert any(requirement.startswith("pytest-xdist") for requirement in extra)


def test_a_port_held_by_another_process_is_not_handed_out(tmp_path: Path) -> None:
    mine = {ports.free_port() for _ in range(5)}
    assert len(mine) == 5  # and none twice here
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from om_mcp.testing import ports; port = ports.free_port(); print(port, flush=True);"
            " sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        held = int(holder.stdout.readline())
        assert held not in mine
        assert not ports._reserve(held)  # the kernel may offer it to us; the reservation says no
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert ports._reserve(held)  # its process ended, and its reservation with it
    ports.release(held)


def test_the_worker_count_comes_from_the_variable_or_the_cores() -> None:
    assert 2 <= default_workers() <= 6
    assert workers({WORKERS_VARIABLE: "3"}) == 3 and workers({WORKERS_VARIABLE: "0"}) == 0
    assert workers({}) == default_workers()
    with pytest.raises(pytest.UsageError, match=WORKERS_VARIABLE):
        workers({WORKERS_VARIABLE: "many"})
