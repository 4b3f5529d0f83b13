"""Builders for engine tests: config from OM_ variables, messages with ids in their
text, and a scripted model that tells Observer, Reflector and extractor calls apart
by their system prompt."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from om_mcp.config import Config, load_config
from om_mcp.engine import Memory as _Memory
from om_mcp.engine.prompts import agent as _agent_prompts
from om_mcp.engine.prompts import observer as _observer_prompts
from om_mcp.engine.prompts import reflector as _reflector_prompts
from om_mcp.engine.prompts.observer import EXTRACT_SYSTEM
from om_mcp.testing import ScriptedModel

PREFIX = "OM_OBSERVATIONAL_MEMORY__"
ID_RE = re.compile(r"\bm(\d+)\b")
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def om_env(**options: Any) -> dict[str, str]:
    """OM_ variables from keyword paths: observation__message_tokens=200 -> OM_..._OBSERVATION__MESSAGE_TOKENS."""
    out = {}
    for key, value in options.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        out[PREFIX + key.upper()] = text
    return out


def config(buffering: bool = False, scope: str = "thread", **options: Any) -> Config:
    """Engine test config: thread scope and no buffering unless asked, no backoff pauses."""
    options.setdefault("scope", scope)
    if not any(key == "model" or key.endswith("__model") for key in options):
        options["model"] = "default"  # gemini-2.5-flash: one target, whatever this machine has
    if not buffering:
        options.setdefault("observation__buffer_tokens", False)
    options.setdefault("call_policy__backoff_initial_seconds", 0)
    options.setdefault("call_policy__backoff_max_seconds", 0)
    return load_config(env=om_env(**options))


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(item.get("text", "") for item in content if item.get("type") == "text")


def role_of(messages: list[dict[str, Any]]) -> str:
    """'observer', 'reflector' or 'extractor', from the system prompt."""
    system = text_of(messages[0])
    if system.startswith(EXTRACT_SYSTEM[:40]):
        return "extractor"
    if system.startswith(_reflector_prompts.REFLECTOR_PERSONA[:40]):
        return "reflector"
    if system.startswith(_observer_prompts.OBSERVER_PERSONA[:40]):
        return "observer"
    raise AssertionError(f"unknown call: {system[:80]!r}")


def conversation_of(messages: list[dict[str, Any]]) -> str:
    """The fenced <conversation> in an Observer call's second user message."""
    second = text_of(messages[2])
    match = re.search(r"<conversation>\n(.*)\n</conversation>", second, re.DOTALL)
    assert match, "the Observer's second user message has no <conversation> fence"
    return match.group(1)


def memory_log_of(messages: list[dict[str, Any]]) -> str:
    match = re.search(r"<memory-log>\n(.*)\n</memory-log>", text_of(messages[1]), re.DOTALL)
    assert match, "the Reflector's user message has no <memory-log> fence"
    return match.group(1)


def level_of(messages: list[dict[str, Any]]) -> int:
    match = re.search(r"## Size \(level (\d)", text_of(messages[1]))
    return int(match.group(1)) if match else 0


def observer_reply(ids: list[str], extra: str = "") -> str:
    lines = "\n".join(f"* 🔴 (10:00) saw {i}" for i in ids) or "* 🟡 (10:00) nothing new"
    return (
        f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>\n"
        f"<current-task>answer the user</current-task>\n<suggested-response>reply briefly</suggested-response>\n{extra}"
    )


SECTION_RE = re.compile(r'<thread id="([^"]+)">\n(.*?)\n</thread>', re.S)


def tracing_observer(messages: list[dict[str, Any]]) -> str:
    """Names every message id it saw; in a multi-thread (resource scope) call, section by section."""
    conversation = conversation_of(messages)
    sections = SECTION_RE.findall(conversation)
    if not sections:
        ids = [f"m{n}" for n in dict.fromkeys(ID_RE.findall(conversation))]
        return observer_reply(ids)
    out = []
    for label, body in sections:
        ids = [f"m{n}" for n in dict.fromkeys(ID_RE.findall(body))]
        lines = "\n".join(f"* 🔴 (10:00) saw {i}" for i in ids) or "* 🟡 (10:00) nothing new"
        out.append(
            f'<thread id="{label}">\nDate: Mar 2, 2026\n{lines}\n<current-task>answer {label}</current-task>\n</thread>'
        )
    return "<observations>\n" + "\n".join(out) + "\n</observations>"


def keep_ids_reflector(messages: list[dict[str, Any]]) -> str:
    ids = [f"m{n}" for n in dict.fromkeys(ID_RE.findall(memory_log_of(messages)))]
    return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) reflected " + " ".join(ids) + "\n</observations>"


class Script:
    """A ScriptedModel whose replies come from per-role functions; records calls by role."""

    def __init__(
        self,
        observer: Callable[[list[dict]], Any] = tracing_observer,
        reflector: Callable[[list[dict]], Any] = keep_ids_reflector,
        extractor: Callable[[list[dict]], Any] | None = None,
        delay: float = 0.0,
    ):
        self.handlers = {"observer": observer, "reflector": reflector, "extractor": extractor}
        self.by_role: dict[str, list[list[dict]]] = {"observer": [], "reflector": [], "extractor": []}
        self.model = ScriptedModel(self._reply, delay=delay)

    def _reply(self, messages, target):
        role = role_of(messages)
        self.by_role[role].append(messages)
        handler = self.handlers[role]
        if handler is None:
            raise AssertionError(f"unexpected {role} call")
        return handler(messages)

    @property
    def observer_calls(self) -> list[list[dict]]:
        return self.by_role["observer"]

    @property
    def reflector_calls(self) -> list[list[dict]]:
        return self.by_role["reflector"]


def msg(n: int, role: str | None = None, words: int = 20, at: datetime | None = None, text: str | None = None) -> dict:
    role = role or ("user" if n % 2 == 0 else "assistant")
    out = {"id": f"m{n}", "role": role, "content": text if text is not None else f"m{n} " + "words " * words}
    if at is not None:
        out["created_at"] = at.isoformat()
    return out


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


DEGENERATE_REPLY = (
    "<observations>\n" + "* 🔴 (10:00) the very same line, again and again and again\n" * 80 + "</observations>"
)


class Memory(_Memory):
    """The engine, with the status in every append and context result (tests assert on it)."""

    async def append_messages(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("with_status", True)
        return await super().append_messages(*args, **kwargs)

    async def get_context(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("with_status", True)
        return await super().get_context(*args, **kwargs)


# Every prompt constant in one namespace, for assertions on what a model was shown.
prompts = SimpleNamespace(
    **{
        name: value
        for module in (_observer_prompts, _reflector_prompts, _agent_prompts)
        for name, value in vars(module).items()
        if name.isupper()
    }
)


async def stored_events(mem: _Memory, thread_id: str = "t", type_: str | None = None) -> list[dict]:
    rows = await mem.store.events(thread_id=thread_id, limit=1000)
    return [e.payload for e in rows if type_ is None or e.type == type_]


async def cursor(mem: _Memory, thread_id: str = "t", resource_id: str = "default") -> int:
    record = await mem.store.record(mem.record_key(thread_id, resource_id))
    return record.cursors.get(thread_id, 0) if record else 0
