"""Several processes writing one database file at once: nothing lost, nothing
doubled, and no "database is locked" reaching anyone.

(Two real stdio servers sharing one file are covered in test_transports.py.)"""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

pytestmark = pytest.mark.slow

# Per process: 100 messages to a shared thread (50 single appends, 10 batches of 5), 100 to its own
# thread (batches of 10), 50 to another shared thread (batches of 5) and 20 that every process sends.
ROUNDS = 100

WRITER = r"""
import json, sys, traceback
import anyio
from om_mcp.config import Config
from om_mcp.engine import Memory, RecallQuery

db, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])

async def main():
    config = Config.model_validate({"db_path": db, "observational_memory": {"enabled": False}})
    memory = await Memory.open(config)
    report = {"appended": 0, "skipped": 0, "common_appended": 0, "common_skipped": 0, "errors": []}

    async def append(thread, messages, common=False):
        try:
            out = await memory.append_messages(thread, messages, resource_id="team")
        except Exception as error:
            report["errors"].append(f"{thread}: {type(error).__name__}: {error}")
            return
        report["appended"] += out.appended
        report["skipped"] += out.skipped_duplicates
        if common:
            report["common_appended"] += out.appended
            report["common_skipped"] += out.skipped_duplicates

    memory.counter.count_text("warm up")  # load the tokenizer before the race starts
    print("ready", flush=True)
    sys.stdin.readline()  # wait for the other writers, so they really overlap
    try:
        for i in range(rounds):
            if i % 2 == 0:  # one message per call: the most write transactions fighting for the lock
                await append("shared", [{"id": f"{name}-s{i}", "role": "user",
                                         "content": f"shared {name} word{name}{i}"}])
            elif i % 10 == 1:
                await append("shared", [{"id": f"{name}-s{j}", "role": "user",
                                         "content": f"shared {name} word{name}{j}"}
                                        for j in range(i, i + 10, 2)])
            if i % 10 == 0:
                await append(f"own-{name}", [{"id": f"{name}-o{j}", "role": "assistant", "content": f"own {name} {j}"}
                                             for j in range(i, i + 10)])
            if i % 5 == 0:
                # every writer sends the very same message: exactly one of them stores it
                await append("common", [{"id": f"c{i}", "role": "user", "content": f"common {i}",
                                          "created_at": "2024-05-01T10:00:00+02:00"}], common=True)
            if i % 10 == 0:
                await append("batches", [{"id": f"{name}-b{i}-{k}", "role": "user", "content": f"batch {k}"}
                                         for k in range(5)])
            if i % 20 == 0:
                await memory.recall(RecallQuery(thread_id="shared", mode="search", query=f"word{name}{i}"))
                await memory.get_context("shared")
    except Exception:
        report["errors"].append(traceback.format_exc())
    finally:
        await memory.close()
    print(json.dumps(report), flush=True)

anyio.run(main)
"""


def expected_ids(name: str) -> set[tuple[str, str]]:
    rows = {("shared", f"{name}-s{i}") for i in range(ROUNDS)}
    rows |= {(f"own-{name}", f"{name}-o{i}") for i in range(ROUNDS)}
    rows |= {("batches", f"{name}-b{i}-{k}") for i in range(0, ROUNDS, 10) for k in range(5)}
    return rows


def test_three_processes_append_concurrently(tmp_path):
    db = tmp_path / "shared.db"
    names = ("A", "B", "C")
    env = clean_env(tmp_path)
    processes = [
        subprocess.Popen(
            [PYTHON, "-c", WRITER, str(db), name, str(ROUNDS)],
            env=env,
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    try:
        for process in processes:
            assert process.stdout.readline().strip() == "ready", process.stderr.read()
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = [process.communicate(timeout=scaled(120)) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=scaled(10))

    reports = []
    for process, (stdout, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr
        assert "locked" not in stderr.lower(), stderr
        assert "Traceback" not in stderr, stderr
        report = json.loads(stdout.strip().splitlines()[-1])
        assert report["errors"] == [], report["errors"]
        reports.append(report)

    unique_per_process = 2 * ROUNDS + 5 * len(range(0, ROUNDS, 10))
    commons = len(range(0, ROUNDS, 5))
    assert sum(r["common_appended"] for r in reports) == commons
    assert sum(r["common_skipped"] for r in reports) == commons * (len(names) - 1)
    for report in reports:
        assert report["appended"] - report["common_appended"] == unique_per_process

    expected = {("common", f"c{i}") for i in range(0, ROUNDS, 5)}
    for name in names:
        expected |= expected_ids(name)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT thread_id, id FROM messages").fetchall()
        assert len(rows) == len(set(rows)) == len(expected)
        assert set(rows) == expected
        assert conn.execute("SELECT SUM(messages) FROM messages_fts_scopes").fetchone()[0] == len(expected)
        # every writer's messages are findable through the index
        for name in names:
            hits = len(
                conn.execute(
                    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (f'"word{name}{ROUNDS - 1}"',)
                ).fetchall()
            )
            assert hits == 1
        owners = dict(conn.execute("SELECT id, resource_id FROM threads").fetchall())
        assert owners == {"shared": "team", "common": "team", "batches": "team", **{f"own-{n}": "team" for n in names}}
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
