"""Deleted means gone: after delete_thread (or forgetting a resource) the deleted text's
words are nowhere in the bytes of the database file or its -wal.

A scripted Observer and Reflector copy the marker words they read into everything they
write (observations, the current task, the suggested response, an extracted value that
is also written to thread metadata), so the marker reaches every table that derives from
messages. A second marker in a thread that is kept must still be found: the grep works.
Written against behaviour (the raw bytes), not against how the search index stores them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from support.engine import role_of, text_of
from support.files import raw_bytes
from support.mcp import connect, ok

from om_mcp.config import Config
from om_mcp.engine import Memory
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel

pytestmark = pytest.mark.anyio

GONE, KEPT, OTHER = "quokkavelvet", "marmosetamber", "narwhalcopper"  # no shared prefix: index terms stay whole
MARKERS = re.compile(rf"\b(?:{GONE}|{KEPT}|{OTHER})\b", re.I)
SECTION = re.compile(r'<thread id="([^"]+)">\n(.*?)\n</thread>', re.S)


def words(text: str) -> str:
    return " ".join(dict.fromkeys(w.lower() for w in MARKERS.findall(text))) or "nothing"


def copycat(messages: list[dict], target: Any) -> str:
    """Every marker read goes into every field written."""
    body = text_of(messages[-1])
    if role_of(messages) == "reflector":
        return (
            f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) reflected {words(body)}\n</observations>\n"
            f"<digest>{words(body)}</digest>"
        )
    sections = [
        f'<thread id="{label}">\nDate: Mar 2, 2026\n* 🔴 (10:00) heard {words(text)}\n'
        f"<current-task>follow up on {words(text)}</current-task>\n</thread>"
        for label, text in SECTION.findall(body)
    ] or [f"Date: Mar 2, 2026\n* 🔴 (10:00) heard {words(body)}"]
    return (
        "<observations>\n" + "\n".join(sections) + "\n</observations>\n"
        f"<current-task>all about {words(body)}</current-task>\n"
        f"<suggested-response>mention {words(body)}</suggested-response>\n<secret>{words(body)}</secret>"
    )


def found(db: Path, word: str) -> int:
    return raw_bytes(db).lower().count(word[:10].encode())  # a stem, in case the index stems the word


async def open_memory(db: Path, scope: str) -> Memory:
    config = Config.model_validate(
        {
            "db_path": str(db),
            "working_memory": {"scope": "thread"},
            "observational_memory": {
                "scope": scope,
                "observation": {
                    "message_tokens": 100_000,
                    "buffer_tokens": False,
                    "extract": [{"name": "secret", "metadata_key_path": "facts.secret"}],
                },
                "reflection": {"extract": [{"name": "digest"}]},
            },
        }
    )
    return await Memory.open(config, client=ScriptedModel(copycat))


async def talk(client, thread_id: str, resource_id: str, word: str) -> None:
    await ok(
        client,
        "append_messages",
        thread_id=thread_id,
        resource_id=resource_id,
        thread_metadata={"title": f"about {word}"},
        messages=[
            {"role": "user", "content": f"my secret word is {word}; remember {word}"},
            {"role": "assistant", "content": f"noted, {word}"},
        ],
    )
    await ok(client, "update_working_memory", thread_id=thread_id, memory=f"# Notes\n- the word: {word}")


@pytest.mark.parametrize("scope", ["thread", "resource"])
async def test_a_deleted_thread_leaves_no_trace_in_the_file(tmp_path: Path, scope: str) -> None:
    db = tmp_path / "om.db"
    memory = await open_memory(db, scope)
    try:
        async with connect(build_server(memory.config, memory)) as client:
            # kept first: in resource scope its cycle takes in both threads and its events name both
            await talk(client, "kept", "r", KEPT)
            await talk(client, "gone", "r", GONE)
            assert (await ok(client, "observe", thread_id="kept"))["ran"]
            if scope == "thread":
                assert (await ok(client, "observe", thread_id="gone"))["ran"]
            assert (await ok(client, "reflect", thread_id="gone"))["ran"]
            await talk(client, "kept", "r", KEPT + " again")  # more after the reflection, observed too
            assert (await ok(client, "observe", thread_id="kept"))["ran"]
            assert found(db, GONE) > 0 and found(db, KEPT) > 0
            assert (await ok(client, "delete_thread", thread_id="gone")) == {"deleted_messages": 2}
            assert found(db, GONE) == 0, leaks(db, GONE)
            assert found(db, KEPT) > 0
            context = await ok(client, "get_context", thread_id="kept")
            assert KEPT in str(context) and GONE not in str(context)
    finally:
        await memory.close()
    assert found(db, GONE) == 0, leaks(db, GONE)


async def test_a_forgotten_resource_leaves_no_trace_in_the_file(tmp_path: Path) -> None:
    db = tmp_path / "om.db"
    memory = await open_memory(db, "resource")
    try:
        async with connect(build_server(memory.config, memory)) as client:
            await talk(client, "a", "forget-me", GONE)
            await talk(client, "b", "forget-me", GONE + " too")
            await talk(client, "c", "stay", OTHER)
            for thread in ("a", "c"):
                assert (await ok(client, "observe", thread_id=thread))["ran"]
            assert (await ok(client, "reflect", thread_id="a"))["ran"]
            await ok(client, "update_working_memory", thread_id="a", memory=f"# About\n- {GONE}")
        assert found(db, GONE) > 0
        assert await memory.forget_resource("forget-me") == (2, 4)
        assert found(db, GONE) == 0, leaks(db, GONE)
        assert found(db, OTHER) > 0
    finally:
        await memory.close()


def leaks(db: Path, word: str) -> list[str]:
    """Where the word still is, table by table, for the failure message."""
    import sqlite3

    out = []
    with sqlite3.connect(db) as conn:
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            try:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
            except sqlite3.DatabaseError:
                continue
            out += [f"{table}: {str(row)[:200]}" for row in rows if word in str(row).lower()]
    conn.close()
    return out or ["only in freed or unindexed bytes"]
