"""A memory on a read-only filesystem (a mounted backup, a read-only volume) can still be read.

Before: `status`, `search`, `export` and the rest refused it ("the folder is not
writable", exit 3). Now the file is opened read-only: reading commands work, a write
fails with one line saying the file is read-only, and a database whose changes are
still in an unreadable -wal file is refused saying what to do.

The filesystem is made read-only with a bind mount in a private user and mount
namespace (`unshare -Urm`), so no privilege is needed; where the kernel does not
allow that, the test is skipped and says so.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled
from test_commands import EXPORTS, om


def read_only(folder: Path, *command: str) -> subprocess.CompletedProcess:
    """Run `command` with `folder` mounted read-only (only for it)."""
    where = shlex.quote(str(folder))
    script = f"mount --bind {where} {where} && mount -o remount,bind,ro {where} {where} && exec {shlex.join(command)}"
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        env=clean_env(folder.parent),
        cwd=REPO,
    )


@pytest.fixture
def mounted(tmp_path: Path) -> Path:
    folder = tmp_path / "volume"
    folder.mkdir()
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) to mount a folder read-only")
    probe = read_only(folder, "sh", "-c", f"! touch {shlex.quote(str(folder / 'x'))} 2>/dev/null")
    if probe.returncode != 0:
        pytest.skip(f"user and mount namespaces are not available here: {probe.stderr.strip()[:200]}")
    return folder


def om_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return read_only(folder, PYTHON, "-m", "om_mcp", *args, "--db", str(folder / "memory.db"))


@pytest.mark.slow
def test_reading_commands_work_and_a_write_says_why_not(mounted):
    db = mounted / "memory.db"
    assert om("import", str(EXPORTS / "claude" / "conversations.json"), db=db).returncode == 0
    status = om_read_only(mounted, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["counts"]["messages"] == 7
    found = om_read_only(mounted, "search", "sourdough starter", "--json")
    assert found.returncode == 0 and json.loads(found.stdout), found.stderr
    exported = om_read_only(mounted, "export")
    assert exported.returncode == 0 and json.loads(exported.stdout.splitlines()[-1])["type"] == "end"
    for command in (("threads",), ("show", "claude-5f1d8a3e-2c4b-4e8f-9a61-0b7c3d2e1f40"), ("doctor",)):
        done = om_read_only(mounted, *command)
        assert done.returncode == 0, (command, done.stderr)
    assert "read-only filesystem (opened read-only)" in om_read_only(mounted, "doctor").stdout
    forget = om_read_only(mounted, "forget", "--yes", "--thread", "claude-5f1d8a3e-2c4b-4e8f-9a61-0b7c3d2e1f40")
    assert forget.returncode == 1
    assert forget.stderr.strip().splitlines() == [
        "om-mcp: the database file is read-only: check its permissions (and its folder's), or its filesystem's mount"
    ]


@pytest.mark.slow
def test_changes_left_in_a_wal_file_are_not_silently_missed(mounted):
    db = mounted / "memory.db"
    assert om("import", str(EXPORTS / "claude" / "conversations.json"), db=db).returncode == 0
    writer = (  # a process that wrote and was killed before a checkpoint, its -shm gone
        "import os, sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute('PRAGMA wal_autocheckpoint = 0')\n"
        "conn.execute(\"UPDATE threads SET title = 'changed' WHERE 1\")\n"
        "os._exit(0)\n"
    )
    subprocess.run([PYTHON, "-c", writer, str(db)], check=True, env=clean_env(mounted.parent))
    os.remove(f"{db}-shm")
    assert Path(f"{db}-wal").stat().st_size > 0
    done = om_read_only(mounted, "status")
    assert done.returncode == 3
    assert "changes still in memory.db-wal" in done.stderr and "copy the database" in done.stderr
    with sqlite3.connect(db) as conn:  # writable again: nothing was lost
        assert {r[0] for r in conn.execute("SELECT title FROM threads")} == {"changed"}
    conn.close()
