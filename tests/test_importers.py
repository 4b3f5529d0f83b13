"""Claude and ChatGPT export importers: real-shaped fixtures in, MessageIn-valid threads out."""

from __future__ import annotations

import copy
import io
import json
import zipfile
from pathlib import Path

import pytest

from om_mcp.importers import (
    ExportError,
    ImportedThread,
    Refused,
    _stream,
    chatgpt_export,
    claude_export,
    detect_source,
    iter_export,
)
from om_mcp.messages import MessageIn

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
CLAUDE = FIXTURES / "claude" / "conversations.json"
CHATGPT = FIXTURES / "chatgpt" / "conversations.json"


def _all(threads):
    return {t.id: t for t in threads}


def _validate(thread):
    for m in thread.messages:
        MessageIn.model_validate(m)


def test_claude_export_becomes_threads_with_their_real_dates():
    threads = _all(claude_export.iter_conversations(CLAUDE))
    assert list(threads) == [
        "claude-5f1d8a3e-2c4b-4e8f-9a61-0b7c3d2e1f40",
        "claude-9d8c7b6a-5e4f-4d3c-b2a1-908f7e6d5c4b",
        "claude-00c0ffee-1234-4abc-9def-000000000003",
    ]
    sourdough = threads["claude-5f1d8a3e-2c4b-4e8f-9a61-0b7c3d2e1f40"]
    _validate(sourdough)
    assert sourdough.title == "Sourdough starter schedule"
    assert sourdough.created_at == "2024-03-02T08:14:22.918734+00:00"
    assert [m["role"] for m in sourdough.messages] == ["user", "assistant", "user"]
    assert [m["created_at"] for m in sourdough.messages] == [
        "2024-03-02T08:14:23.104511+00:00",
        "2024-03-02T08:14:40.220118+00:00",
        "2024-03-02T08:31:05.112233+00:00",
    ]
    # the empty assistant message is skipped, and so is the text-less token_budget block: both counted
    assert sourdough.metadata["import"]["skipped"] == {"block:token_budget": 1, "empty": 1}
    empty = threads["claude-00c0ffee-1234-4abc-9def-000000000003"]
    assert empty.title is None and empty.messages == []


def test_claude_blocks_attachments_and_files_map_to_parts():
    sourdough = next(claude_export.iter_conversations(CLAUDE))
    user, assistant, last = sourdough.messages
    kinds = [p["type"] for p in user["content"]]
    assert kinds == ["text", "file", "text", "image"]  # jar.jpg listed in files and files_v2 once
    assert user["content"][1] == {"type": "file", "mime_type": "text/plain", "name": "feeding-log.txt"}
    assert user["content"][2]["text"].startswith("[attachment feeding-log.txt (text/plain)]\nMon 08:00 fed")
    assert user["content"][3] == {"type": "image", "mime_type": "image/jpeg", "name": "jar.jpg"}
    reasoning, call, result, text = assistant["content"]
    assert reasoning["type"] == "reasoning" and "starving" in reasoning["text"]
    assert call == {
        "type": "tool-call",
        "tool_name": "web_search",
        "tool_call_id": "toolu_01XyZ",
        "args": {"query": "sourdough starter acetone smell feeding ratio"},
    }
    assert result["tool_call_id"] == "toolu_01XyZ" and result["result"] == [
        {
            "title": "Why does my starter smell like nail polish?",
            "url": "https://example.org/starter-acetone",
            "text": "A sign of hunger: feed more often or at a higher ratio.",
        }
    ]
    assert text["text"].startswith("An acetone smell")
    # no content blocks: the message's text is used
    assert last["content"] == [{"type": "text", "text": "Thanks, I'll try 1:5:5 with whole wheat from now on."}]


def test_claude_attachment_text_is_cut_at_the_limit_and_counted():
    sourdough = next(claude_export.iter_conversations(CLAUDE, attachment_text_limit=20))
    note = sourdough.messages[0]["content"][2]["text"]
    assert "Mon 08:00 fed 50g/50" in note and "Tue" not in note
    assert "more characters of this attachment were not imported" in note
    assert sourdough.metadata["import"]["skipped"]["attachment_text_cut"] == 1


def test_claude_branches_follow_the_newest_leaf_or_the_named_one():
    raw = json.loads(CLAUDE.read_text())[1]
    lisbon = claude_export.convert_conversation(raw)
    ids = [m["id"][-1] for m in lisbon.messages]
    assert ids == ["1", "3", "4", "5"]  # the replaced sardine answer (2) is left out
    assert lisbon.metadata["import"]["skipped"] == {"other_branch": 1}
    named = copy.deepcopy(raw)
    named["current_leaf_message_uuid"] = "019b0000-0000-7000-8000-000000000002"
    assert [m["id"][-1] for m in claude_export.convert_conversation(named).messages] == ["1", "2"]


def test_chatgpt_follows_current_node_and_keeps_custom_instructions_out_of_the_thread():
    threads = _all(chatgpt_export.iter_conversations(CHATGPT))
    pg = threads["chatgpt-66a1b2c3-d4e5-8f00-a1b2-c3d4e5f60718"]
    _validate(pg)
    assert pg.title == "Postgres index for time ranges"
    assert pg.created_at == "2024-06-10T06:13:20+00:00"
    assert [m["id"] for m in pg.messages] == ["u-1", "a-1", "u-2b", "a-2b"]  # the edited question's branch
    assert pg.messages[1]["metadata"] == {"imported_from": "chatgpt", "model": "gpt-4o"}
    assert pg.metadata["chatgpt"]["custom_instructions"] == {
        "user_profile": "I'm a backend developer in Lyon.",
        "user_instructions": "Answer briefly, with SQL examples.",
    }
    assert pg.metadata["import"]["skipped"] == {"other_branch": 2, "system": 1}


def test_chatgpt_tools_images_and_hidden_content():
    thread = _all(chatgpt_export.iter_conversations(CHATGPT))["chatgpt-77b2c3d4-e5f6-9011-b2c3-d4e5f6071829"]
    _validate(thread)
    assert [(m["id"], m["role"]) for m in thread.messages] == [
        ("u1", "user"),
        ("c1", "assistant"),
        ("o1", "tool"),
        ("d1", "assistant"),
        ("d2", "tool"),
        ("a1", "assistant"),
    ]
    image, text, csv = thread.messages[0]["content"]
    assert image == {
        "type": "image",
        "mime_type": "image/png",
        "name": "dashboard.png",
        "url": "file-service://file-Jq1pZ8",
        "width": 1024,
        "height": 768,
    }
    assert text["text"].startswith("Here is a screenshot")
    assert csv == {"type": "file", "mime_type": "text/csv", "name": "sales_q3.csv"}
    call = thread.messages[1]["content"][0]
    assert call["tool_name"] == "python" and call["args"]["code"].startswith("import pandas")
    result = thread.messages[2]["content"][0]
    assert result["tool_call_id"] == "c1" and "Sep    45010" in result["result"]
    assert thread.messages[3]["content"][0]["args"]["prompt"].startswith("A clean bar chart")
    generated = thread.messages[4]["content"]
    assert generated[0]["tool_call_id"] == "d1"
    assert generated[1] == {
        "type": "image",
        "mime_type": "image/*",
        "url": "sediment://file_00000000a1b2c3d4",
        "width": 1024,
        "height": 1024,
    }
    assert thread.metadata["import"]["skipped"] == {
        "model_editable_context": 1,
        "thoughts": 1,
        "web_browsing": 1,
        "tether_browsing_display": 1,
        "unanswered_tool_call": 1,
    }


def test_chatgpt_without_current_node_takes_the_newest_leaf():
    raw = json.loads(CHATGPT.read_text())[0]
    raw["current_node"] = None
    assert [m["id"] for m in chatgpt_export.convert_conversation(raw).messages][-1] == "a-2b"
    raw["mapping"]["a-2a"]["message"]["create_time"] += 10_000
    assert [m["id"] for m in chatgpt_export.convert_conversation(raw).messages] == ["u-1", "a-1", "u-2a", "a-2a"]


@pytest.mark.parametrize("path", [CLAUDE, CHATGPT])
def test_reimport_yields_the_same_ids(path):
    first = [(t.id, [m["id"] for m in t.messages]) for t in iter_export(path)]
    again = [(t.id, [m["id"] for m in t.messages]) for t in iter_export(path)]
    assert first == again and all(ids for _, ids in first[:1])


def test_detect_source_and_zip_archives(tmp_path):
    assert detect_source(CLAUDE) == "claude" and detect_source(CHATGPT) == "chatgpt"
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data-2025-06-11/conversations.json", CHATGPT.read_text())
        z.writestr("data-2025-06-11/user.json", "{}")
    assert [t.id for t in iter_export(archive)] == [t.id for t in iter_export(CHATGPT)]
    other = tmp_path / "other.json"
    other.write_text('[{"messages": []}]')
    with pytest.raises(ExportError, match="not a Claude export"):
        detect_source(other)


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_streaming_survives_any_buffer_boundary(monkeypatch, chunk):
    whole = [c for c in json.loads(CHATGPT.read_text()) + json.loads(CLAUDE.read_text())]
    text = json.dumps(whole + [1.5e300, -12345678901234567890, "tail"], indent=2)
    monkeypatch.setattr(_stream, "CHUNK", chunk)
    assert list(_stream.iter_array(io.StringIO(text))) == json.loads(text)


def test_wrapped_object_form_is_accepted():
    text = json.dumps({"conversations": json.loads(CLAUDE.read_text())})
    assert len(list(_stream.iter_array(io.StringIO(text), key="conversations"))) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"uuid": "a"}, {"uuid": ', "the file ends inside element 1"),
        ('[{"uuid": "a"}', "ends inside the array"),
        ('[{"uuid": "a"} {"uuid": "b"}]', "expected ',' or ']' after element 0"),
        ('"just a string"', "expected a JSON array"),
    ],
)
def test_broken_files_name_where_they_break(text, message):
    with pytest.raises(ExportError, match=message):
        list(_stream.iter_array(io.StringIO(text)))


def test_a_conversation_that_is_not_an_object_is_named_and_the_rest_read(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text('[{"uuid": "a", "chat_messages": []}, 3, {"uuid": "b", "chat_messages": []}]')
    out = list(claude_export.iter_conversations(path))
    assert [t.id for t in out if isinstance(t, ImportedThread)] == ["claude-a", "claude-b"]
    assert [(r.index, r.reason) for r in out if isinstance(r, Refused)] == [(1, "a JSON int, not an object")]
