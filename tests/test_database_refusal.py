"""A database file om-mcp cannot use is refused at start, through the real CLI.

Each case runs `om-mcp serve --db PATH` as a subprocess: exit code 3, one line on stderr
that says what to do, no traceback, nothing on stdout, and the file left exactly as it was.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from support.files import digest, make_database, read_only
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

pytestmark = pytest.mark.slow


def serve(tmp_path: Path, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", "serve", "--db", str(db)],
        env=clean_env(tmp_path),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


def refused(result: subprocess.CompletedProcess) -> str:
    """The one line of a refusal; fails on anything else."""
    assert result.returncode == 3, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("om-mcp: ")
    return lines[0]


# -- damaged or foreign files ---------------------------------------------------------------------


def garbage(db: Path) -> None:
    db.write_bytes(b"these are not the bytes of a database\n" * 200)


def truncated(db: Path) -> None:
    make_database(db)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


def future_schema(db: Path) -> None:
    make_database(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()


def foreign_without_id(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.commit()
    conn.close()


def foreign_with_id(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA application_id = {0x0F0F0F0F}")
    conn.execute("CREATE TABLE threads (id TEXT)")  # even with a table name of ours
    conn.commit()
    conn.close()


def corrupted_page(db: Path) -> None:
    """Garbage over one b-tree page of the messages table, the rest of the file intact."""
    make_database(db, messages=200)
    conn = sqlite3.connect(db)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    conn.close()
    with db.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(bytes((i * 37 + 11) % 256 for i in range(page_size)))


CASES: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "garbage": (garbage, ("is not a SQLite database", "move it aside")),
    "truncated": (truncated, ("is truncated", "restore a backup")),
    "future schema": (future_schema, ("newer om-mcp", "schema 99", "upgrade om-mcp")),
    "another application, no id": (foreign_without_id, ("belongs to another application", "another --db")),
    "another application's id": (foreign_with_id, ("belongs to another application", "another --db")),
    "corrupted page": (corrupted_page, ("is damaged", "restore a backup")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unusable_file_is_refused_in_one_line_and_left_unchanged(tmp_path: Path, case: str) -> None:
    prepare, says = CASES[case]
    db = tmp_path / "memory.db"
    prepare(db)
    before = digest(db)
    line = refused(serve(tmp_path, db))
    assert str(db) in line
    for words in says:
        assert words in line, line
    assert digest(db) == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("memory.db")) == ["memory.db"]


# -- paths that cannot be a database ----------------------------------------------------------------


def test_a_directory_given_as_the_path_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    line = refused(serve(tmp_path, folder))
    assert "is a directory" in line and str(folder / "memory.db") in line
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_a_new_database_in_a_read_only_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    with read_only(folder):
        line = refused(serve(tmp_path, folder / "memory.db"))
    assert "is not writable" in line and str(folder) in line
    assert list(folder.iterdir()) == []


def test_an_existing_database_in_a_read_only_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "locked"
    folder.mkdir()
    db = make_database(folder / "memory.db")
    before = digest(db)
    with read_only(folder):  # WAL needs to create -wal and -shm beside the file
        line = refused(serve(tmp_path, db))
    assert "is not writable" in line
    assert digest(db) == before and [p.name for p in folder.iterdir()] == ["memory.db"]


def test_a_read_only_database_file_is_refused(tmp_path: Path) -> None:
    db = make_database(tmp_path / "memory.db")
    before = digest(db)
    with read_only(db):
        line = refused(serve(tmp_path, db))
    assert "not readable and writable" in line and "permissions" in line
    assert digest(db) == before


def test_a_sound_database_is_accepted(tmp_path: Path) -> None:
    """The control: the same command on a good file starts, and ends at the end of input."""
    db = make_database(tmp_path / "memory.db")
    result = serve(tmp_path, db)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
