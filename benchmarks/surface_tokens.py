"""What the tool surface costs the model that reads it, in o200k tokens.

Runs an in-process server on a fresh database (observation off: nothing here needs a model) and counts, through
the real MCP client:
  * tools/list as the client receives it (names, descriptions, input and output schemas, annotations), and the
    server instructions;
  * an `append_messages` result (default and compact-turn form), `get_context` on an empty thread and on a
    thread with working memory, `update_working_memory` in schema mode;
  * `recall` pages, three search hits, a default search (an index of 10 hits), and whether `max_tokens` bounds
    the result.
Prints one table, each row against its budget (issue 9; tools/list: issue 35).
Run with `.venv/bin/python benchmarks/surface_tokens.py`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client  # noqa: E402

from om_mcp.config import Config  # noqa: E402
from om_mcp.engine.tokens import TokenCounter  # noqa: E402
from om_mcp.server import build_server  # noqa: E402

FACTS = [
    "We use Postgres 16 for the orders service.",
    "We deploy on Fly.io, two regions.",
    "The CI runs on GitHub Actions; the slow suite is nightly.",
    "Dana owns the billing code; ask her before touching invoices.",
]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "timezone": {"type": "string"},
        "projects": {"type": "array", "items": {"type": "string"}},
    },
}


def text_of(result) -> str:
    assert not result.is_error, result.content[0].text
    return result.content[0].text if result.content else ""


async def measure(db: Path) -> list[tuple[str, int, int | None]]:
    counter = TokenCounter()
    count = counter.count_text
    rows: list[tuple[str, int, int | None]] = []
    config = Config.model_validate({"db_path": str(db), "observational_memory": {"enabled": False}})
    async with Client(build_server(config), raise_exceptions=True) as client:
        listed = await client.list_tools()
        tools = [tool.model_dump(mode="json", exclude_none=True, by_alias=True) for tool in listed.tools]
        rows.append(("tools/list, all tools", count(json.dumps(tools, separators=(",", ":"))), 1900))
        for tool in tools:
            rows.append((f"  {tool['name']}", count(json.dumps(tool, separators=(",", ":"))), None))
        outputs = sum(count(json.dumps(t.get("outputSchema", {}))) for t in tools if "outputSchema" in t)
        rows.append(("  of which output schemas", outputs, None))
        rows.append(("server instructions (initialize)", count(client.instructions or ""), None))

        async def call(tool: str, **arguments) -> str:
            return text_of(await client.call_tool(tool, arguments))

        rows.append(("get_context, empty thread", count(await call("get_context", thread_id="empty")), 150))
        two = [
            {"role": "user", "content": "Which database do we use?", "id": "u1"},
            {"role": "assistant", "content": "Postgres 16.", "id": "a1"},
        ]
        rows.append(
            ("append_messages, 2 messages", count(await call("append_messages", thread_id="t", messages=two)), 40)
        )
        rows.append(
            (
                "append_messages, user=/assistant=",
                count(await call("append_messages", thread_id="t", user="And hosting?", assistant="Fly.io.")),
                40,
            )
        )
        rows.append(
            (
                "append_messages, re-sent (skipped)",
                count(await call("append_messages", thread_id="t", messages=two)),
                40,
            )
        )
        for i, fact in enumerate(FACTS * 10):
            await call("append_messages", thread_id="t", user=f"Note {i}: {fact}", assistant="Noted.")
        rows.append(
            (
                "update_working_memory, Markdown",
                count(
                    await call(
                        "update_working_memory", thread_id="wm", memory="# User\n- Name: Sam\n- Prefers short answers"
                    )
                ),
                40,
            )
        )
        rows.append(("get_context, working memory only", count(await call("get_context", thread_id="wm")), None))
        rows.append(("recall messages, limit 5", count(await call("recall", thread_id="t", limit=5)), None))
        rows.append(
            (
                "recall search, 3 hits",
                count(await call("recall", thread_id="t", mode="search", query="which database", limit=3)),
                None,
            )
        )
        rows.append(
            (
                "recall search, default (index, 10 hits)",
                count(await call("recall", thread_id="t", mode="search", query="which database hosting CI billing")),
                400,
            )
        )
        for bound in (200, 500, 2000):
            got = count(await call("recall", thread_id="t", limit=50, max_tokens=bound))
            rows.append((f"recall max_tokens={bound}", got, bound))
        rows.append(("recall threads", count(await call("recall", thread_id="t", mode="threads")), None))
    schema_config = Config.model_validate(
        {"db_path": str(db), "observational_memory": {"enabled": False}, "working_memory": {"schema": SCHEMA}}
    )
    async with Client(build_server(schema_config), raise_exceptions=True) as client:
        result = await client.call_tool("update_working_memory", {"thread_id": "wm-json", "memory": {"name": "Sam"}})
        rows.append(("update_working_memory, schema mode", count(text_of(result)), 40))
    return rows


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = anyio.run(measure, Path(tmp) / "om.db")
    width = max(len(name) for name, _, _ in rows)
    print(f"{'what':<{width}}  tokens  budget  ok")
    failed = 0
    for name, tokens, budget in rows:
        verdict = "" if budget is None else ("yes" if tokens <= budget else "NO")
        failed += verdict == "NO"
        print(f"{name:<{width}}  {tokens:>6}  {budget if budget is not None else '':>6}  {verdict}")
    print(f"\n{failed} row(s) over budget (o200k tokens, compact JSON as the client receives it)")


if __name__ == "__main__":
    main()
