"""ChatGPT's data export (Settings > Data controls > Export data).

`conversations.json` is an array of conversations `{id | conversation_id, title,
create_time, update_time, current_node, mapping}`; `mapping` is a tree of nodes
`{id, parent, children, message}` and a message is `{id, author {role, name},
create_time (epoch seconds), content {content_type, parts | text | ...},
recipient, metadata}`.

Decisions (what a thread gets):
- Branches: the thread is the path from `current_node` back to the root, the
  conversation as the user last saw it. Other branches (regenerated answers,
  edited questions) are not imported and are counted as skipped
  "other_branch": they are answers the user replaced. Without a usable
  `current_node`, the newest leaf is taken.
- Skipped and counted: nodes without a message (the root), messages marked
  `is_visually_hidden_from_conversation`, system messages, reasoning
  (`thoughts`, `reasoning_recap`), `model_editable_context` (ChatGPT's own
  memory snapshot, repeated in every chat), web browsing traffic (calls to and
  results from `web`/`browser`/`file_search` tools, `tether_*`, `sonic_webpage`:
  the answer that follows already says what mattered), and empty messages.
- Custom instructions (`user_editable_context`, or a system message with
  `is_user_system_message`) go to the thread's metadata["chatgpt"]
  ["custom_instructions"], not into the conversation.
- Tools that did work: an assistant message addressed to a tool (`recipient`
  != "all", e.g. `python`, `dalle.text2im`, `canmore.create_textdoc`) becomes
  a tool-call part (args = its JSON, or {"code": ...} / {"input": ...}); the
  tool's answer becomes a role "tool" message with a tool-result part
  (`execution_output` text, `system_error` as is_error) plus image parts for
  generated images. A call whose result was not kept is dropped too, so no
  thread ends on an unanswered call.
- Images and files: `image_asset_pointer` parts become image parts whose url
  is the asset pointer (`file-service://file-...` or `sediment://file_...`,
  the file's name in the export archive), with width/height and, when the
  message's `metadata.attachments` lists it, its name and mime type. Other
  attachments become file parts (name, mime type, no content). Audio keeps its
  transcription as text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from om_mcp.importers._stream import MAX_ELEMENT_CHARS
from om_mcp.importers.thread import ImportedThread, Progress, Refused, conversations, finish, guess_mime, iso_from_epoch

SOURCE = "chatgpt"
_HIDDEN_TYPES = {
    "thoughts",
    "reasoning_recap",
    "model_editable_context",
    "tether_browsing_display",
    "tether_quote",
    "sonic_webpage",
}
_WEB_TOOLS = ("web", "browser", "file_search", "myfiles_browser", "research_kickoff_tool")


def iter_conversations(
    path: str | Path, *, max_chars: int = MAX_ELEMENT_CHARS, progress: Progress | None = None
) -> Iterator[ImportedThread | Refused]:
    """Each conversation of a ChatGPT export (`conversations.json` or the `.zip`), streamed;
    one that cannot be read is a `Refused` naming it."""
    return conversations(path, convert_conversation, _name, "ChatGPT", max_chars=max_chars, progress=progress)


def _name(raw: dict[str, Any], _index: int) -> tuple[str | None, str | None]:
    ident = raw.get("conversation_id") or raw.get("id")
    return (f"chatgpt-{ident}" if isinstance(ident, str) and ident else None), raw.get("title") or None


def convert_conversation(raw: dict[str, Any], index: int = 0) -> ImportedThread:
    source_id = str(raw.get("conversation_id") or raw.get("id") or f"conversation-{index}-{raw.get('create_time')}")
    thread = ImportedThread(
        id=f"chatgpt-{source_id}",
        title=raw.get("title") or None,
        created_at=iso_from_epoch(raw.get("create_time")),
        updated_at=iso_from_epoch(raw.get("update_time")),
        messages=[],
    )
    mapping = _dict(raw.get("mapping"))
    path = _active_path(mapping, raw.get("current_node"))
    with_message = sum(1 for n in mapping.values() if isinstance(n, dict) and n.get("message"))
    thread.skipped["other_branch"] += with_message - sum(1 for n in path if n.get("message"))
    calls: dict[str, str] = {}  # tool name -> id of its latest call message
    time = thread.created_at
    for node in path:
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        converted = _message(message, node, thread, calls, time)
        if converted:
            time = converted["created_at"]
            thread.messages.append(converted)
    _drop_unanswered_calls(thread)
    model = raw.get("default_model_slug") or raw.get("model_slug")
    if model:
        thread.metadata.setdefault("chatgpt", {})["model"] = model
    thread.skipped = +thread.skipped
    return finish(thread, SOURCE, source_id)


def _active_path(mapping: dict[str, Any], current: Any) -> list[dict]:
    nodes = {k: v for k, v in mapping.items() if isinstance(v, dict)}
    leaf = current if isinstance(current, str) and current in nodes else None
    if leaf is None:
        leaves = [k for k, v in nodes.items() if not v.get("children")]
        leaf = max(leaves, key=lambda k: _time(nodes[k]), default=None)
    path, seen = [], set()
    while leaf in nodes and leaf not in seen:
        seen.add(leaf)
        path.append(nodes[leaf])
        parent = nodes[leaf].get("parent")
        leaf = parent if isinstance(parent, str) else None
    return path[::-1]


def _time(node: dict) -> float:
    value = _dict(node.get("message")).get("create_time")
    return value if isinstance(value, (int, float)) else 0.0


def _message(
    m: dict, node: dict, thread: ImportedThread, calls: dict[str, str], fallback_time: str | None
) -> dict[str, Any] | None:
    author = _dict(m.get("author"))
    role = author.get("role")
    content = _dict(m.get("content"))
    kind = _str(content.get("content_type")) or "text"
    meta = _dict(m.get("metadata"))
    recipient = _str(m.get("recipient")) or "all"
    if kind == "user_editable_context" or (role == "system" and meta.get("is_user_system_message")):
        _keep_instructions(thread, content, meta)
        return None
    skip = None
    if kind in _HIDDEN_TYPES:
        skip = kind
    elif role == "system":
        skip = "system"
    elif meta.get("is_visually_hidden_from_conversation"):
        skip = "hidden"
    elif _is_web(recipient if role == "assistant" else author.get("name")):
        skip = "web_browsing"
    if skip:
        thread.skipped[skip] += 1
        return None
    msg_id = str(m.get("id") or node.get("id"))
    if role == "assistant" and recipient != "all":
        parts = [{"type": "tool-call", "tool_name": recipient, "args": _call_args(content), "tool_call_id": msg_id}]
        calls[recipient] = msg_id
    elif role == "tool":
        parts = _tool_result(content, author.get("name") or "tool", meta, calls)
    elif role in ("user", "assistant"):
        parts = _parts(content, meta)
    else:
        thread.skipped[f"role:{role}"] += 1
        return None
    if not parts:
        thread.skipped["empty"] += 1
        return None
    metadata: dict[str, Any] = {"imported_from": SOURCE}
    if meta.get("model_slug"):
        metadata["model"] = meta["model_slug"]
    return {
        "id": msg_id[:200],
        "role": role,
        "content": parts,
        "created_at": iso_from_epoch(m.get("create_time")) or fallback_time or "1970-01-01T00:00:00+00:00",
        "metadata": metadata,
    }


def _is_web(tool: Any) -> bool:
    return isinstance(tool, str) and any(tool == t or tool.startswith(t + ".") for t in _WEB_TOOLS)


def _keep_instructions(thread: ImportedThread, content: dict, meta: dict) -> None:
    found = {k: content[k] for k in ("user_profile", "user_instructions") if content.get(k)}
    data = _dict(meta.get("user_context_message_data"))
    found.update(
        {
            k: v
            for k, v in (
                ("user_profile", data.get("about_user_message")),
                ("user_instructions", data.get("about_model_message")),
            )
            if v
        }
    )
    if found:
        thread.metadata.setdefault("chatgpt", {})["custom_instructions"] = found


def _parts(content: dict, meta: dict) -> list[dict[str, Any]]:
    kind = _str(content.get("content_type")) or "text"
    attachments: dict[str, dict] = {
        a["id"]: a for a in _list(meta.get("attachments")) if isinstance(a, dict) and isinstance(a.get("id"), str)
    }
    parts: list[dict[str, Any]] = []
    used: set[str] = set()
    if kind == "code":
        text = _str(content.get("text"))
        if text.strip():
            parts.append({"type": "text", "text": f"```{content.get('language') or ''}\n{text}\n```"})
    elif kind in ("text", "multimodal_text"):
        texts: list[str] = []
        for item in _list(content.get("parts")):
            if isinstance(item, str):
                if item.strip():
                    texts.append(item)
                continue
            if not isinstance(item, dict):
                continue
            sub = item.get("content_type")
            if sub == "image_asset_pointer":
                _flush(texts, parts)
                parts.append(_image(item, attachments, used))
            elif sub == "audio_transcription" and _str(item.get("text")).strip():
                texts.append(item["text"])
        _flush(texts, parts)
    elif isinstance(content.get("text"), str) and content["text"].strip():
        parts.append({"type": "text", "text": content["text"]})
    for att_id, att in attachments.items():
        if att_id not in used:
            mime = _str(att.get("mime_type")) or guess_mime(_str(att.get("name")) or None)
            kind_out = "image" if mime.startswith("image/") else "file"
            part = {"type": kind_out, "mime_type": mime}
            if _str(att.get("name")):
                part["name"] = att["name"]
            parts.append(part)
    return parts


def _flush(texts: list[str], parts: list[dict[str, Any]]) -> None:
    if texts:
        parts.append({"type": "text", "text": "\n".join(texts)})
        texts.clear()


def _image(item: dict, attachments: dict[str, dict], used: set[str]) -> dict[str, Any]:
    pointer = str(item.get("asset_pointer") or "")
    file_id = pointer.split("://", 1)[-1]
    att = attachments.get(file_id) or {}
    if att:
        used.add(file_id)
    part: dict[str, Any] = {
        "type": "image",
        "mime_type": _str(att.get("mime_type")) or guess_mime(_str(att.get("name")) or None, "image/*"),
    }
    if _str(att.get("name")):
        part["name"] = att["name"]
    if pointer:
        part["url"] = pointer
    for key in ("width", "height"):
        if isinstance(item.get(key), int) and item[key] > 0:
            part[key] = item[key]
    return part


def _call_args(content: dict) -> Any:
    text = content.get("text")
    if not isinstance(text, str):
        text = "\n".join(p for p in _list(content.get("parts")) if isinstance(p, str))
    try:
        value = json.loads(text)
        if isinstance(value, (dict, list)):
            return value
    except (TypeError, ValueError):
        pass
    return {"code": text} if content.get("content_type") == "code" else {"input": text}


def _tool_result(content: dict, tool: str, meta: dict, calls: dict[str, str]) -> list[dict[str, Any]]:
    kind = _str(content.get("content_type"))
    images = [p for p in _parts(content, meta) if p["type"] == "image"] if kind == "multimodal_text" else []
    texts = "\n".join(p for p in _list(content.get("parts")) if isinstance(p, str) and p.strip())
    if kind == "multimodal_text":
        text = texts
    elif kind in ("execution_output", "system_error", "code"):
        text = _str(content.get("text"))
    else:
        text = texts or _str(content.get("text"))
    if not text.strip() and not images:
        return []
    result: dict[str, Any] = {"type": "tool-result", "tool_name": tool, "result": text}
    call = calls.pop(tool, None) or (calls.popitem()[1] if len(calls) == 1 else None)
    if call:
        result["tool_call_id"] = call
    if kind == "system_error":
        result["is_error"] = True
    return [result, *images]


def _dict(value: Any) -> dict[str, Any]:
    """A field that should hold an object; anything else reads as empty (exports vary)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _drop_unanswered_calls(thread: ImportedThread) -> None:
    answered = {p.get("tool_call_id") for m in thread.messages for p in m["content"] if p["type"] == "tool-result"}
    kept = []
    for m in thread.messages:
        if (
            m["role"] == "assistant"
            and all(p["type"] == "tool-call" for p in m["content"])
            and not any(p.get("tool_call_id") in answered for p in m["content"])
        ):
            thread.skipped["unanswered_tool_call"] += 1
            continue
        kept.append(m)
    thread.messages = kept
