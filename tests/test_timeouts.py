"""The suite's per-test time limit (tests/support/timeouts.py): a hang fails that one test,
naming it, and the run goes on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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


def test_a_hung_test_fails_by_name_and_the_run_goes_on(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from support.timeouts import pytest_runtest_call, pytest_runtest_setup, pytest_runtest_teardown  # noqa\n"
    )
    (tmp_path / "test_hangs.py").write_text(textwrap.dedent(HANGS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}
    env.pop("OM_TEST_TIMEOUT", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfE", "test_hangs.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # the limit under test failed to end the run: say so instead of hanging
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 failed, 1 passed" in out, out
    for name in ("test_blocks_on_a_lock", "test_awaits_forever"):
        assert f"test_hangs.py::{name} ran past its 1 s limit in call" in out, out
    assert "Current thread" in out or "Thread 0x" in out, out  # the stacks, to see where it hung
