"""Memory as of a day: `get_context` with `as_of` returns the log and working memory as they were
then, and no message made after it; `om-mcp show THREAD --as-of DATE` shows the same, and
`--diff N` what generation N changed against N-1.

Times are taken between the steps (the store stamps what it writes), never waited for."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support.backends import location
from support.engine import Memory, Script, config, conversation_of
from support.mcp import connect, fail, ok
from support.processes import run_om

from om_mcp.server import build_server

pytestmark = pytest.mark.anyio

LATE = datetime(2030, 1, 1, tzinfo=UTC)  # the messages' own times: after every step of the test


def observer(messages: list[dict]) -> str:
    ids = list(dict.fromkeys(re.findall(r"\bm\d+\b", conversation_of(messages))))
    return (
        "<observations>\nDate: Mar 2, 2026\n" + "\n".join(f"* 🔴 (10:00) heard {i}" for i in ids) + "\n</observations>"
    )


def reflector(messages: list[dict]) -> str:
    return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) condensed everything heard so far\n</observations>"


def now() -> str:
    return datetime.now(UTC).isoformat()


async def test_get_context_as_of_shows_what_was_believed_then():
    mem = await Memory.open(config(), db_path=location(), client=Script(observer=observer, reflector=reflector).model)
    async with connect(build_server(mem.config, mem)) as client:
        empty = now()
        first = [{"id": f"m{n}", "role": "user", "content": f"m{n} hi", "created_at": empty} for n in range(3)]
        await ok(client, "append_messages", thread_id="t", messages=first)
        await ok(client, "update_working_memory", thread_id="t", memory="# About the User\n- Name: Ada")
        assert (await ok(client, "observe", thread_id="t"))["ran"]
        observed = now()
        await ok(client, "update_working_memory", thread_id="t", memory="# About the User\n- Name: Ada Byron")
        assert (await ok(client, "reflect", thread_id="t"))["ran"]
        late = [{"id": "m9", "role": "user", "content": "m9 much later", "created_at": LATE.isoformat()}]
        await ok(client, "append_messages", thread_id="t", messages=late)

        before = await ok(client, "get_context", thread_id="t", as_of=empty)
        assert "heard" not in before.get("system_text", "")
        assert [m["id"] for m in before["messages"]] == ["m0", "m1", "m2"]  # made by then, not yet observed

        then = await ok(client, "get_context", thread_id="t", as_of=observed)
        assert "heard m0" in then["system_text"] and "condensed everything" not in then["system_text"]
        assert "- Name: Ada\n" in then["system_text"] + "\n" and "Byron" not in then["system_text"]
        assert then.get("messages") is None  # observed by then; m9 was not made yet

        current = await ok(client, "get_context", thread_id="t")
        assert "condensed everything" in current["system_text"] and "heard m0" not in current["system_text"]
        assert "Ada Byron" in current["system_text"]
        future = await ok(client, "get_context", thread_id="t", as_of=LATE.isoformat())
        assert "condensed everything" in future["system_text"] and future["messages"][-1]["id"] == "m9"

        # A day means its end (UTC); a date-time without a zone is UTC; nonsense names the argument.
        day = await ok(client, "get_context", thread_id="t", as_of=(LATE - timedelta(days=1)).date().isoformat())
        assert "m9" not in json.dumps(day)
        assert "as_of" in await fail(client, "get_context", thread_id="t", as_of="last tuesday")
        # An empty (or blank) as_of is unreadable too, never "now"; refused before anything is read or changed.
        for blank in ("", "   "):
            refused = await fail(client, "get_context", thread_id="t", as_of=blank)
            assert (
                refused
                == f"as_of: cannot read {blank!r}; give an ISO date (2026-03-02) or date-time (2026-03-02T14:30)"
            )
            assert await fail(client, "get_context", thread_id="unseen", as_of=blank) == refused
        assert await mem.thread("unseen") is None
    await mem.close()


def om(db: Path, *args: str) -> subprocess.CompletedProcess:
    return run_om(*args, "--db", str(db), home=db.parent, OM_OBSERVATIONAL_MEMORY__SCOPE="thread")


@pytest.mark.slow
async def test_show_as_of_and_diff(tmp_path: Path):
    db = tmp_path / "om.db"

    def keep_two(messages: list[dict]) -> str:
        from support.engine import memory_log_of

        kept = [r for r in memory_log_of(messages).splitlines() if "m0" in r or "m1" in r]
        rows = [re.sub(r" \[L\d+\]$", "", r) for r in kept]
        return "<observations>\nDate: Mar 2, 2026\n" + "\n".join(rows) + "\n* 🔴 (10:00) new summary\n</observations>"

    mem = await Memory.open(config(), db_path=str(db), client=Script(observer=observer, reflector=keep_two).model)
    await mem.append_messages("t", [{"id": f"m{n}", "role": "user", "content": f"m{n} hi"} for n in range(4)])
    assert (await mem.observe("t")).ran
    observed = now()
    assert (await mem.reflect("t")).ran
    await mem.close()

    shown = om(db, "show", "t", "--as-of", observed, "--json")
    assert shown.returncode == 0, shown.stderr
    then = json.loads(shown.stdout)
    assert then["generation"] == 0 and "heard m3" in then["text"] and "new summary" not in then["text"]
    text = om(db, "show", "t", "--as-of", observed)
    assert "as of" in text.stdout and "heard m3" in text.stdout
    empty = om(db, "show", "t", "--as-of", "")  # it used to show the memory as it is now
    assert empty.returncode == 2 and empty.stdout == "", empty
    assert "as_of: cannot read ''" in empty.stderr

    diff = json.loads(om(db, "show", "t", "--diff", "1", "--json").stdout)
    assert [line["text"] for line in diff["added"]] == ["* 🔴 (10:00) new summary"]
    assert sorted(line["text"] for line in diff["removed"]) == ["* 🔴 (10:00) heard m2", "* 🔴 (10:00) heard m3"]
    assert {line["reason"] for line in diff["removed"]} == {"dropped"} and diff["kept"] == 2
    printed = om(db, "show", "t", "--diff", "1").stdout
    assert "+ * 🔴 (10:00) new summary" in printed and "- * 🔴 (10:00) heard m3  (dropped)" in printed
    missing = om(db, "show", "t", "--diff", "7")
    assert missing.returncode == 4 and "generation 7" in missing.stderr
