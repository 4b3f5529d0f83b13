"""Corrections survive: an `edit` is dated like a generation, so the memory as of any time before it
shows the line as it was and `show --diff` shows the edit (the old line retired as "edited"); and
`restore --generation N` keeps what the user said since (lines remembered since are carried over,
lines corrected since stay corrected), listing what it keeps and drops, `--dry-run` changing nothing.

Through the MCP tools (get_context, update_thread) on the engine, and the commands as a user runs
them; observations and reflections by the scripted model."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.engine import Memory, Script, config, conversation_of, memory_log_of
from support.mcp import connect, ok
from support.processes import run_om

from om_mcp.server import build_server

pytestmark = pytest.mark.anyio


def observer(messages: list[dict]) -> str:
    ids = list(dict.fromkeys(re.findall(r"\bm\d+\b", conversation_of(messages))))
    return (
        "<observations>\nDate: Mar 2, 2026\n" + "\n".join(f"* 🔴 (10:00) heard {i}" for i in ids) + "\n</observations>"
    )


def keep_two(messages: list[dict]) -> str:
    """A rewrite keeping the lines of m0 and m1 (and any the user stated) and adding a summary."""
    kept = [r for r in memory_log_of(messages).splitlines() if "m0" in r or "m1" in r or "user-stated" in r]
    rows = [re.sub(r" \[L\d+\]$", "", r) for r in kept]
    return "<observations>\nDate: Mar 2, 2026\n" + "\n".join(rows) + "\n* 🔴 (10:00) new summary\n</observations>"


def now() -> str:
    return datetime.now(UTC).isoformat()


async def line_id(mem: Memory, words: str) -> str:
    log = await mem.observations("t")
    return next(line["id"] for g in log["groups"] for line in g["lines"] if words in line["text"])


async def test_the_memory_before_an_edit_shows_the_line_as_it_was(tmp_path: Path):
    mem = await Memory.open(config(), db_path=str(tmp_path / "om.db"), client=Script(observer=observer).model)
    await mem.append_messages("t", [{"id": f"m{n}", "role": "user", "content": f"m{n} hi"} for n in range(3)])
    assert (await mem.observe("t")).ran
    before = now()
    async with connect(build_server(mem.config, mem)) as client:
        wrong = await line_id(mem, "heard m1")
        corrected = await ok(
            client, "update_thread", thread_id="t", observation_id=wrong, text="heard m1, and it was Tuesday"
        )
        assert corrected["corrected"]["generation"] == 1
        then = await ok(client, "get_context", thread_id="t", as_of=before)
        assert "heard m1\n" in then["system_text"] + "\n" and "Tuesday" not in then["system_text"]
        current = await ok(client, "get_context", thread_id="t")
        assert "heard m1, and it was Tuesday\n" in current["system_text"]
        assert "heard m1\n" not in current["system_text"] + "\n"
    diff = await mem.generation_diff("t", 1)
    assert [line["text"] for line in diff["added"]] == ["* 🔴 (10:00) heard m1, and it was Tuesday [user-stated]"]
    assert [(line["text"], line["reason"]) for line in diff["removed"]] == [("* 🔴 (10:00) heard m1", "edited")]
    assert diff["kept"] == 2
    # The new line's id is in the active log; the old id's short form names the retired line.
    assert corrected["corrected"]["id"] == await line_id(mem, "Tuesday")
    await mem.close()


def om(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_om(*args, "--db", str(db), home=db.parent, OM_OBSERVATIONAL_MEMORY__SCOPE="thread")


@pytest.mark.slow
async def test_restore_keeps_what_was_remembered_and_corrected_since(tmp_path: Path):
    db = tmp_path / "om.db"
    mem = await Memory.open(config(), db_path=str(db), client=Script(observer=observer, reflector=keep_two).model)
    await mem.append_messages("t", [{"id": f"m{n}", "role": "user", "content": f"m{n} hi"} for n in range(4)])
    assert (await mem.observe("t")).ran  # generation 0: heard m0..m3
    assert (await mem.reflect("t")).ran  # generation 1: m0, m1 and a summary
    await mem.remember("Deploys happen on Tuesdays only", thread_id="t")
    await mem.control.edit_observation((await line_id(mem, "heard m1")).split(".")[1], "heard m1 twice", "t")
    await mem.close()  # generation 2: the correction

    dry = om(db, "restore", "t", "--generation", "0", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would restore generation 0" in dry.stdout and "heard m1 twice" in dry.stdout
    assert "Deploys happen on Tuesdays only" in dry.stdout and "would drop" in dry.stdout
    assert "new summary" in dry.stdout.split("would drop", 1)[1]
    shown = json.loads(om(db, "show", "t", "--json").stdout)
    assert shown["observations"]["generation"] == 2  # the dry run changed nothing

    done = json.loads(om(db, "restore", "t", "--generation", "0", "--json").stdout)
    assert done["done"] and done["generation"] == 3 and done["back"] == 2
    # The remembered line carries the wall clock's time of day, so the two are compared as a set: a list
    # sorted by text put it first only when the test ran before 10:00.
    remembered = next(line for line in done["kept"] if "Deploys happen on Tuesdays only" in line)
    assert len(done["kept"]) == 2 and set(done["kept"]) == {"* 🔴 (10:00) heard m1 twice [user-stated]", remembered}
    assert done["dropped"] == ["* 🔴 (10:00) new summary"]
    log = om(db, "show", "t").stdout.split("\nretired", 1)[0]
    for line in ("heard m0", "heard m1 twice", "heard m2", "heard m3", "Deploys happen on Tuesdays only"):
        assert line in log, log
    assert "new summary" not in log and not re.search(r"heard m1$", log, re.M)

    # The summary the restore dropped is in generation 2's history; a short id with the thread brings a
    # retired line back (the line is in several generations of the thread's log, and on the pile).
    retired = om(db, "show", "t", "--json")
    assert retired.returncode == 0, retired.stderr
    old = next(
        line["id"]
        for g in json.loads(retired.stdout)["observations"]["retired"]
        for line in g["lines"]
        if line["text"] == "* 🔴 (10:00) heard m1"
    )
    back = om(db, "restore", "--line", old.split(".")[1], "t")
    assert back.returncode == 0 and "restored a line retired (edited): * 🔴" in back.stdout, back.stderr
