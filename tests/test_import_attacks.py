"""`om-mcp import` with hostile or broken exports, run as the command a user types.

Before: the import stopped at the first message over the size limit (321 of 500
conversations stored, the error naming neither, exit 2), a duplicate message uuid
aborted it the same way, a 1 MB zip took 4.2 GB of memory (one element read whole),
and a cut zip, deep nesting, wrong ChatGPT types or bad UTF-8 printed tracebacks.
Now: a conversation that cannot be imported whole is cut or skipped and named by
title and id while the rest import, running again adds only what is missing, a file
broken beyond that is one line, and the exit code is 1 (2 is for bad arguments).
Memory is bounded by the reader (measured by `benchmarks/faults.py --import-bomb`).
"""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest
from test_commands import om

from om_mcp.engine import transfer
from om_mcp.importers.jsonl_format import ExportFormatError


def conversation(i: int, *, messages: int = 3, text: str | None = None, uuid: str | None = None) -> dict[str, Any]:
    return {
        "uuid": uuid or f"conv-{i}",
        "name": f"Chat number {i}",
        "created_at": "2025-01-01T10:00:00Z",
        "updated_at": "2025-01-01T11:00:00Z",
        "chat_messages": [
            {
                "uuid": f"m-{i}-{j}",
                "sender": "human" if j % 2 == 0 else "assistant",
                "text": text if text is not None and j == 1 else f"conversation {i} message {j}",
                "created_at": f"2025-01-01T10:0{j}:00Z",
            }
            for j in range(messages)
        ],
    }


def run(path: Path, db: Path, *args: str):
    done = om("import", str(path), "--json", *args, db=db)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def stored(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(sql).fetchall()
    conn.close()
    return rows


def one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.slow
def test_a_message_over_the_limit_is_cut_and_every_conversation_imports(tmp_path):
    path = tmp_path / "conversations.json"
    export = [conversation(i, text="x" * 1_200_000 if i == 321 else None) for i in range(500)]
    path.write_text(json.dumps(export))
    done = run(path, tmp_path / "m.db")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["added"] == {"message": 1500, "thread": 500}
    assert report["problems"] == [
        {
            "thread": "claude-conv-321",
            "title": "Chat number 321",
            "what": "trimmed",
            "why": "1 message(s) over the size limit were cut",
        }
    ]
    assert 'trimmed: "Chat number 321" (claude-conv-321)' in done.stderr
    ((text,),) = stored(tmp_path / "m.db", "SELECT body FROM messages WHERE id = 'm-321-1'")
    assert len(text) < 1_000_000 and text.endswith("the message was over the size limit]")


@pytest.mark.slow
def test_a_repeated_message_uuid_keeps_both_messages(tmp_path):
    export = [conversation(0)]
    export[0]["chat_messages"][2]["uuid"] = "m-0-1"  # the same uuid twice, different text
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    assert run(path, tmp_path / "m.db").returncode == 0
    ids = [r[0] for r in stored(tmp_path / "m.db", "SELECT id FROM messages ORDER BY seq")]
    assert ids == ["m-0-0", "m-0-1", "m-0-1~2"]
    assert run(path, tmp_path / "m.db").returncode == 0  # and again: nothing added, the same ids
    assert len(stored(tmp_path / "m.db", "SELECT id FROM messages")) == 3


@pytest.mark.slow
def test_a_conversation_too_big_to_read_is_named_and_a_second_run_finishes_it(tmp_path):
    export = [conversation(0), conversation(1, text="y" * 300_000), conversation(2)]
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("data/conversations.json", json.dumps(export))
    db = tmp_path / "m.db"
    first = run(archive, db, "--max-conversation-mb", "0.1")
    assert first.returncode == 1
    report = json.loads(first.stdout)
    assert report["added"] == {"message": 6, "thread": 2}
    (problem,) = report["problems"]
    assert (problem["thread"], problem["title"], problem["what"]) == ("claude-conv-1", "Chat number 1", "skipped")
    assert "over the 100,000 read at most" in problem["why"]
    assert 'skipped: "Chat number 1" (claude-conv-1)' in first.stderr

    second = run(archive, db)  # the default limit takes it: only what is missing is added
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["added"] == {"message": 3, "thread": 1}
    assert len(stored(db, "SELECT id FROM threads")) == 3


@pytest.mark.slow
def test_a_file_cut_short_keeps_what_came_before_and_a_rerun_adds_the_rest(tmp_path):
    whole = json.dumps([conversation(i) for i in range(20)])
    cut = tmp_path / "cut.json"
    cut.write_text(whole[: whole.index('"conv-12"')])
    db = tmp_path / "m.db"
    done = run(cut, db)
    assert done.returncode == 1
    line = one_line(done)
    assert "ends inside element 12" in line and "the 12 conversations before it were imported" in line
    assert len(stored(db, "SELECT id FROM threads")) == 12
    full = tmp_path / "conversations.json"
    full.write_text(whole)
    again = run(full, db)
    assert again.returncode == 0 and json.loads(again.stdout)["added"]["thread"] == 8


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("truncated.zip", None, "damaged or incomplete zip archive"),
        ("latin1.json", b'[{"uuid": "u", "name": "caf\xe9", "chat_messages": []}]', "not UTF-8 text"),
        ("garbage.json", b"\x00\x01\x02 not json", "expected a JSON array"),
        ("empty.json", b"", "expected a JSON array"),
    ],
)
def test_a_broken_file_is_one_line_and_exit_1(tmp_path, name, content, expected):
    path = tmp_path / name
    if content is None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("conversations.json", json.dumps([conversation(i) for i in range(300)]))
        content = buffer.getvalue()[: len(buffer.getvalue()) // 2]
    path.write_bytes(content)
    done = run(path, tmp_path / "m.db")
    assert done.returncode == 1
    assert expected in one_line(done)


def test_a_member_damaged_inside_a_whole_archive_is_one_line(tmp_path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps([conversation(i, text=f"{i} " * 5000) for i in range(50)]))
    data = bytearray(buffer.getvalue())
    for offset in range(2000, 2400):  # corrupt the compressed stream, keep the directory
        data[offset] ^= 0xFF
    path = tmp_path / "export.zip"
    path.write_bytes(bytes(data))
    done = run(path, tmp_path / "m.db")
    assert done.returncode == 1
    assert "the archive is damaged or cut short" in one_line(done)


@pytest.mark.slow
def test_deep_nesting_and_wrong_types_skip_one_conversation_each(tmp_path):
    deep = '{"uuid": "deep", "name": "Deep", "chat_messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path = tmp_path / "conversations.json"
    path.write_text(f"[{json.dumps(conversation(0))}, {deep}, 7, {json.dumps(conversation(2))}]")
    done = run(path, tmp_path / "m.db")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["added"] == {"message": 6, "thread": 2}
    assert [(p["thread"], p["why"]) for p in report["problems"]] == [
        ("claude-deep", "nested too deeply"),
        (None, "a JSON int, not an object"),
    ]


@pytest.mark.slow
def test_chatgpt_fields_of_the_wrong_type_import_what_is_usable(tmp_path):
    def node(message: Any, parent: Any = None, children: Any = ()) -> dict:
        return {"id": "a", "parent": parent, "children": list(children), "message": message}

    export = [
        {
            "id": "g1",
            "title": "Odd types",
            "create_time": "yesterday",
            "current_node": ["not", "a", "key"],
            "mapping": {
                "a": node(
                    {
                        "id": "a",
                        "author": "user",  # should be an object
                        "create_time": "now",
                        "content": {"content_type": ["text"], "parts": "hello"},
                        "metadata": [1, 2],
                    },
                    parent=["x"],
                    children="b",
                ),
                "b": node(
                    {
                        "id": "b",
                        "author": {"role": "user"},
                        "content": {"content_type": "text", "parts": ["the real question", 5, None]},
                        "metadata": {"attachments": "nope"},
                    },
                    parent="a",
                ),
            },
        },
        {"id": "g2", "title": 12, "mapping": "not a mapping"},
    ]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    done = run(path, tmp_path / "m.db", "--format", "chatgpt")
    assert done.returncode == 0, done.stderr
    assert stored(tmp_path / "m.db", "SELECT body FROM messages") == [("the real question",)]


def test_an_om_mcp_export_line_is_read_only_up_to_a_limit(monkeypatch):
    monkeypatch.setattr(transfer, "MAX_LINE_BYTES", 100)
    lines = transfer._lines(io.BytesIO(b'{"type": "om-mcp-export"}\n' + b"x" * 500 + b"\n"), None)
    assert next(lines) == '{"type": "om-mcp-export"}\n'
    with pytest.raises(ExportFormatError, match="line 2: longer than 100 bytes"):
        next(lines)
