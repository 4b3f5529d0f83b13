"""The OpenAI-messages JSONL importer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from om_mcp.importers import ImportFormatError, parse_openai_messages, read_openai_messages
from om_mcp.messages import MessageIn

CHAT = [
    {"role": "system", "content": "You are helpful."},
    {
        "role": "user",
        "content": "What's the weather in Lisbon?",
        "id": "m1",
        "created_at": "2025-12-04T14:30:00Z",
        "name": "ada",
    },
    {
        "role": "assistant",
        "content": None,
        "timestamp": 1764858605,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18°C, sunny"},
    {"role": "assistant", "content": [{"type": "text", "text": "It is 18°C and sunny."}], "timestamp": 1764858606123},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
            {"type": "image_url", "image_url": {"url": "https://example.org/cat.png?x=1"}},
            {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "mp3"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER", "filename": "report.pdf"}},
        ],
    },
    {"role": "developer", "content": [{"type": "input_text", "text": "Be brief."}]},
    {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
]


def write(tmp_path: Path, rows: list, extra: str = "") -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) if not isinstance(r, str) else r for r in rows) + "\n" + extra
    )
    return path


def test_a_chat_log_becomes_messages(tmp_path: Path) -> None:
    messages = read_openai_messages(write(tmp_path, CHAT, "\n\n"))
    for message in messages:
        MessageIn.model_validate(message)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "system",
        "assistant",
    ]
    user = messages[1]
    assert (
        user["id"] == "m1" and user["created_at"] == "2025-12-04T14:30:00+00:00" and user["metadata"]["name"] == "ada"
    )
    assert messages[2]["content"] == [
        {"type": "tool-call", "tool_name": "get_weather", "args": {"city": "Lisbon"}, "tool_call_id": "call_1"}
    ]
    assert messages[2]["created_at"] == "2025-12-04T14:30:05+00:00"
    assert messages[3]["content"] == [
        {"type": "tool-result", "tool_name": "get_weather", "result": "18°C, sunny", "tool_call_id": "call_1"}
    ]
    assert messages[4]["created_at"].startswith("2025-12-04T14:30:06.123")
    kinds = [(p["type"], p.get("mime_type")) for p in messages[5]["content"]]
    assert kinds == [
        ("text", None),
        ("image", "image/jpeg"),
        ("image", "image/png"),
        ("file", "audio/mp3"),
        ("file", "application/pdf"),
    ]
    assert messages[5]["content"][4]["name"] == "report.pdf" and messages[5]["content"][4]["data"] == "JVBER"
    assert messages[5]["content"][2]["url"] == "https://example.org/cat.png?x=1"
    assert messages[6]["content"] == [{"type": "text", "text": "Be brief."}]
    assert messages[7]["content"][0]["text"] == "I can't help with that."


def test_ids_are_stable_across_imports(tmp_path: Path) -> None:
    first = read_openai_messages(write(tmp_path, CHAT))
    second = read_openai_messages(write(tmp_path, CHAT))
    assert [m["id"] for m in first] == [m["id"] for m in second]
    assert len({m["id"] for m in first}) == len(first)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ('{"role": "user", "content": "ok"}\n{"role": "bot", "content": "x"}', "line 2: role: 'bot' is not one of"),
        ('{"content": "x"}', "line 1: role: missing"),
        ('{"role": "user"}', "line 1: content: missing"),
        ('{"role": "user", "content": 5}', "line 1: content: expected a string or a list of parts, got int"),
        (
            '{"role": "user", "content": [{"type": "video", "url": "x"}]}',
            "line 1: content[0].type: unsupported part type 'video'",
        ),
        ('{"role": "user", "content": [{"type": "text"}]}', "line 1: content[0].text: missing or not a string"),
        (
            '{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}',
            "line 1: content[0].image_url.url: missing",
        ),
        (
            '{"role": "user", "content": "x", "created_at": "yesterday"}',
            "line 1: created_at: 'yesterday' is not an ISO-8601",
        ),
        ('{"role": "user", "content": "x", "timestamp": true}', "line 1: timestamp: expected"),
        ('{"role": "user", "content": "x", "id": ""}', "line 1: id: must be 1 to 200"),
        ('{"role": "user", "content": "x", "id": [1]}', "line 1: id: expected a string or an integer"),
        ('{"role": "assistant", "tool_calls": [{"function": {}}]}', "line 1: tool_calls[0].function.name: missing"),
        ('{"role": "user", "content": "fine"}\n\n{"role": "user", "content": "x"', "line 3: not JSON"),
        ("[1, 2]", "line 1: expected a JSON object, got list"),
    ],
)
def test_bad_lines_name_the_line_and_field(row: str, message: str) -> None:
    with pytest.raises(ImportFormatError) as caught:
        parse_openai_messages(row.splitlines(keepends=True))
    assert str(caught.value).startswith(message), str(caught.value)


def test_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"role": "user", "content": "\xff"}\n')
    with pytest.raises(ImportFormatError, match="not UTF-8"):
        read_openai_messages(path)


def test_unparsable_tool_arguments_are_kept_as_text() -> None:
    (message,) = parse_openai_messages(
        [
            '{"role": "assistant", "content": "", "tool_calls":'
            ' [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}]}'
        ]
    )
    assert message["content"][-1]["args"] == "{oops"
