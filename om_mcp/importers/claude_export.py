"""Claude's data export (claude.ai / Claude Desktop: Settings > Privacy > Export data).

The archive's `conversations.json` is an array of conversations:
`{uuid, name, summary?, created_at, updated_at, account, chat_messages: [...]}`,
each message `{uuid, sender: human|assistant, text, content: [blocks], created_at,
attachments: [{file_name, file_type, file_size, extracted_content}],
files / files_v2: [{file_name, file_uuid?, file_kind?}], parent_message_uuid?}`.

Decisions (what a thread gets):
- Roles: human -> user, assistant -> assistant; other senders are skipped.
- Content blocks win over `text` (which is their flattening); `text` is used
  when there are no blocks. text -> text part, thinking -> reasoning part,
  tool_use -> tool-call, tool_result -> tool-result (only its text, title and
  url fields: search hits' metadata and binary payloads are dropped); blocks
  without text (e.g. token_budget) are skipped and counted.
- Branches: newer exports carry `parent_message_uuid` and keep retried /
  edited turns. The thread follows the active path: from
  `current_leaf_message_uuid` when present, else from the newest message, back
  to the root. Messages on other branches are not imported (they are answers
  the user replaced; feeding both to the Observer would record contradictions)
  and are counted as skipped "other_branch". Without parent links the array
  order is the conversation.
- Attachments: a file part (name, mime type, no content) per attachment or
  uploaded file; an attachment's extracted text (what Claude read) follows as a
  text part, cut at `attachment_text_limit` characters. Signed download URLs
  are not kept: they expire and point at claude.ai.
- A message with nothing left is skipped ("empty").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from om_mcp.importers._stream import MAX_ELEMENT_CHARS
from om_mcp.importers.thread import (
    ATTACHMENT_TEXT_LIMIT,
    ImportedThread,
    Progress,
    Refused,
    attachment_text,
    conversations,
    finish,
    guess_mime,
    iso_from_text,
)

SOURCE = "claude"
_ROLES = {"human": "user", "user": "user", "assistant": "assistant"}
_NIL_PARENT = "00000000-0000-4000-8000-000000000000"


def iter_conversations(
    path: str | Path,
    *,
    attachment_text_limit: int = ATTACHMENT_TEXT_LIMIT,
    max_chars: int = MAX_ELEMENT_CHARS,
    progress: Progress | None = None,
) -> Iterator[ImportedThread | Refused]:
    """Each conversation of a Claude export (`conversations.json` or the `.zip`), streamed;
    one that cannot be read is a `Refused` naming it."""
    return conversations(
        path,
        lambda raw, _index: convert_conversation(raw, attachment_text_limit=attachment_text_limit),
        _name,
        "Claude",
        max_chars=max_chars,
        progress=progress,
    )


def _name(raw: dict[str, Any], _index: int) -> tuple[str | None, str | None]:
    uuid = raw.get("uuid")
    return (f"claude-{uuid}" if isinstance(uuid, str) and uuid else None), raw.get("name") or None


def convert_conversation(raw: dict[str, Any], *, attachment_text_limit: int = ATTACHMENT_TEXT_LIMIT) -> ImportedThread:
    source_id = raw.get("uuid") or _fallback_id(raw)
    thread = ImportedThread(
        id=f"claude-{source_id}",
        title=(raw.get("name") or None),
        created_at=iso_from_text(raw.get("created_at")),
        updated_at=iso_from_text(raw.get("updated_at")),
        messages=[],
    )
    extra = {k: raw[k] for k in ("summary", "model") if raw.get(k)}
    project = raw.get("project")
    if isinstance(project, dict) and project.get("name"):
        extra["project"] = project["name"]
    if extra:
        thread.metadata["claude"] = extra
    messages = [m for m in raw.get("chat_messages") or [] if isinstance(m, dict)]
    thread.skipped["malformed"] += len(raw.get("chat_messages") or []) - len(messages)
    path = _active_path(messages, raw.get("current_leaf_message_uuid"))
    thread.skipped["other_branch"] += len(messages) - len(path)
    fallback_time = thread.created_at
    for index, message in enumerate(path):
        converted = _message(message, thread, index, fallback_time, raw.get("model"), attachment_text_limit)
        if converted:
            fallback_time = converted["created_at"]
            thread.messages.append(converted)
    thread.skipped = +thread.skipped  # drop zero counts
    return finish(thread, SOURCE, source_id)


def _active_path(messages: list[dict], leaf_id: Any) -> list[dict]:
    if not any(m.get("parent_message_uuid") for m in messages):
        return messages
    by_id = {m["uuid"]: m for m in messages if isinstance(m.get("uuid"), str) and m["uuid"]}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        # The newest message ends the branch the user saw last.
        order = {id(m): i for i, m in enumerate(messages)}
        leaf = max(messages, key=lambda m: (iso_from_text(m.get("created_at")) or "", order[id(m)]))
    path, seen = [], set()
    node: dict | None = leaf
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        path.append(node)
        parent = node.get("parent_message_uuid")
        node = by_id.get(parent) if isinstance(parent, str) and parent != _NIL_PARENT else None
    return path[::-1]


def _message(
    m: dict, thread: ImportedThread, index: int, fallback_time: str | None, model: Any, limit: int
) -> dict[str, Any] | None:
    role = _ROLES.get(str(m.get("sender", "")).lower())
    if role is None:
        thread.skipped[f"sender:{m.get('sender')}"] += 1
        return None
    parts: list[dict[str, Any]] = []
    blocks = m.get("content")
    if isinstance(blocks, list) and blocks:
        for block in blocks:
            part = _block(block) if isinstance(block, dict) else None
            if part:
                parts.append(part)
            elif isinstance(block, dict) and block.get("type") not in ("text", "thinking"):
                thread.skipped[f"block:{block.get('type')}"] += 1
    elif isinstance(m.get("text"), str) and m["text"].strip():
        parts.append({"type": "text", "text": m["text"]})
    parts += _files(m, thread, limit)
    if not parts:
        thread.skipped["empty"] += 1
        return None
    metadata: dict[str, Any] = {"imported_from": SOURCE}
    if role == "assistant" and isinstance(model, str) and model:
        metadata["model"] = model
    return {
        "id": str(m.get("uuid") or f"{thread.id}-{index}")[:200],
        "role": role,
        "content": parts,
        "created_at": iso_from_text(m.get("created_at")) or fallback_time or "1970-01-01T00:00:00+00:00",
        "metadata": metadata,
    }


def _block(block: dict) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return {"type": "text", "text": text} if isinstance(text, str) and text.strip() else None
    if kind == "thinking":
        text = block.get("thinking")
        return {"type": "reasoning", "text": text} if isinstance(text, str) and text.strip() else None
    if kind == "tool_use":
        part = {"type": "tool-call", "tool_name": str(block.get("name") or "tool"), "args": block.get("input")}
        if block.get("id"):
            part["tool_call_id"] = str(block["id"])
        return part
    if kind == "tool_result":
        part = {
            "type": "tool-result",
            "tool_name": str(block.get("name") or "tool"),
            "result": _result(block.get("content")),
        }
        if block.get("tool_use_id"):
            part["tool_call_id"] = str(block["tool_use_id"])
        if block.get("is_error"):
            part["is_error"] = True
        return part
    text = block.get("text")  # e.g. voice_note: keep what was said
    return {"type": "text", "text": text} if isinstance(text, str) and text.strip() else None


def _result(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    items = []
    for item in content:
        if isinstance(item, dict):
            kept = {k: item[k] for k in ("title", "url", "text") if item.get(k)}
            if kept:
                items.append(kept["text"] if list(kept) == ["text"] else kept)
        elif isinstance(item, str):
            items.append(item)
    texts = [i for i in items if isinstance(i, str)]
    if len(texts) == len(items):
        return "\n".join(texts)
    return items


def _files(m: dict, thread: ImportedThread, limit: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    names: set[str] = set()
    for att in m.get("attachments") or []:
        if not isinstance(att, dict):
            continue
        name = att.get("file_name") or None
        ftype: str = att["file_type"] if isinstance(att.get("file_type"), str) else ""
        mime = ftype if "/" in ftype else guess_mime(name or (f"x.{ftype}" if ftype else None), "text/plain")
        parts.append({"type": "file", "mime_type": mime, **({"name": name} if name else {})})
        names.add(name or "")
        content = att.get("extracted_content")
        if isinstance(content, str) and content.strip():
            text, cut = attachment_text(name, mime, content, limit)
            parts.append({"type": "text", "text": text})
            if cut:
                thread.skipped["attachment_text_cut"] += 1
    for f in [*(m.get("files") or []), *(m.get("files_v2") or [])]:
        if not isinstance(f, dict):
            continue
        name = f.get("file_name") or None
        if (name or "") in names:
            continue  # files and files_v2 list the same upload
        names.add(name or "")
        is_image = f.get("file_kind") == "image" or guess_mime(name).startswith("image/")
        mime = guess_mime(name, "image/*" if is_image else "application/octet-stream")
        parts.append({"type": "image" if is_image else "file", "mime_type": mime, **({"name": name} if name else {})})
    return parts


def _fallback_id(raw: dict) -> str:
    # No uuid: a hash of what identifies the conversation keeps re-imports idempotent.
    first = next((m.get("uuid") for m in raw.get("chat_messages") or [] if isinstance(m, dict)), None)
    key = json.dumps([raw.get("created_at"), raw.get("name"), first], sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:20]
