"""The floor om-mcp is measured against: a bare MCP SDK server doing om-mcp's storage work, nothing else.

    python benchmarks/bare_server.py DB

`MCPServer` from the SDK with its own stdio transport, over a database om-mcp made (the same file
layout, the same FTS5 index, the same interpreter), with no engine: no validation of its own, no
token counts, no secret scan, no observation, no thread bookkeeping. Its tools:
  * append_messages(thread_id, messages, resource_id): one transaction (BEGIN IMMEDIATE ... COMMIT)
    inserting each message into `messages` and its words into `messages_fts` with the resource's
    scope token, as om-mcp indexes it;
  * get_context(thread_id, limit): the thread's newest `limit` messages, oldest first, as compact JSON
    (id, role, time, content), what om-mcp's get_context returns of them;
  * search(match, limit): a ranked bm25 floor: the best `limit` of a plain FTS5 table over the same
    text (`prepare_search` builds it once, untimed), a line per hit;
  * ping: nothing, one MCP round trip.
Imported by nothing: `benchmarks/floor.py` and `benchmarks/startup.py` spawn it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from datetime import UTC, datetime

from mcp.server.mcpserver import MCPServer

conn = sqlite3.connect(sys.argv[1], isolation_level=None, check_same_thread=False)
conn.execute("PRAGMA busy_timeout = 5000")
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("PRAGMA synchronous = NORMAL")
mcp = MCPServer("bare")


def scope_token(resource_id: str) -> str:
    return "\ue000" + hashlib.blake2b(resource_id.encode(), digest_size=8).hexdigest()


@mcp.tool()
async def append_messages(thread_id: str, messages: list[dict], resource_id: str = "r") -> str:
    now = datetime.now(UTC).isoformat()
    token = scope_token(resource_id)
    conn.execute("BEGIN IMMEDIATE")
    for message in messages:
        content = message["content"]
        body = content if isinstance(content, str) else json.dumps(content)
        seq = conn.execute(
            "INSERT INTO messages (id, thread_id, resource_id, role, body, created_at, tokens) VALUES (?,?,?,?,?,?,?)",
            (message.get("id") or now, thread_id, resource_id, message["role"], body, now, len(body) // 4),
        ).lastrowid
        conn.execute("INSERT INTO messages_fts (rowid, body) VALUES (?, ?)", (seq, f"{token} {body}"))
    conn.execute("COMMIT")
    return json.dumps({"stored": len(messages)})


@mcp.tool()
async def get_context(thread_id: str, limit: int = 100) -> str:
    rows = conn.execute(
        "SELECT id, role, body, parts, created_at FROM messages WHERE thread_id = ? AND observable"
        " ORDER BY seq DESC LIMIT ?",
        (thread_id, limit),
    ).fetchall()
    messages = [
        {"id": i, "role": role, "at": at, "content": body if parts is None else json.loads(parts)}
        for i, role, body, parts, at in reversed(rows)
    ]
    return json.dumps({"messages": messages}, ensure_ascii=False, separators=(",", ":"))


@mcp.tool()
async def prepare_search() -> str:
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS plain USING fts5(body)")
    conn.execute("BEGIN")
    conn.execute("DELETE FROM plain")
    conn.execute("INSERT INTO plain (rowid, body) SELECT seq, body FROM messages")
    conn.execute("COMMIT")
    return "ok"


@mcp.tool()
async def search(match: str, limit: int = 10) -> str:
    rows = conn.execute(
        "SELECT m.id, m.thread_id, m.created_at, substr(m.body, 1, 120) FROM plain"
        " JOIN messages m ON m.seq = plain.rowid WHERE plain MATCH ? ORDER BY rank LIMIT ?",
        (match, limit),
    ).fetchall()
    return "\n".join(f"{i} {thread} {at}: {text}" for i, thread, at, text in rows)


@mcp.tool()
async def ping() -> str:
    return "ok"


if __name__ == "__main__":
    mcp.run()
