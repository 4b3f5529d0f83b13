"""Applying the rules to a message: `<private>` spans first, then the detectors, then the
user's own hook (`privacy.before_observation`).

What is scanned: every string of the parts (text, reasoning, tool-call arguments,
tool results, at any depth) and of the metadata, except inline file data (base64,
where a key prefix can occur by chance). In a structured value a key that names a
secret (`{"password": ...}`) has its string value redacted whatever it looks like.

The settings arrive as a plain dict (`privacy_settings` in config/privacy.py writes
it; the host hook keeps it in its cached settings), so this module needs no pydantic.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from om_mcp.privacy.rules import MARKER_PREFIX, RULES, SECRET_NAME, Rule, extra_rule, is_placeholder, literal, marker

PRIVATE_MARKER = "[private]"
PRIVATE_RULE = "private"  # the name <private> spans are counted under
_PRIVATE = re.compile(r"<private>.*?</private>", re.I | re.S)
_BINARY_FIELDS = {"data", "url"}  # image/file parts: base64 or data: URLs
Hook = Callable[[dict[str, Any]], Any]


@dataclass
class Redaction:
    """A message as it will be stored, and how many of each rule's matches it lost."""

    parts: list[dict[str, Any]]
    metadata: dict[str, Any]
    counts: Counter[str] = field(default_factory=Counter)


class Redactor:
    def __init__(
        self,
        rules: tuple[Rule, ...] = RULES,
        *,
        private_tags: bool = True,
        hook: Hook | None = None,
        hook_name: str | None = None,
    ):
        self.rules = rules
        self.private_tags = private_tags
        self.hook = hook
        self.hook_name = hook_name

    @property
    def active(self) -> bool:
        return bool(self.rules) or self.private_tags or self.hook is not None

    def text(self, value: str, counts: Counter[str]) -> str:
        if self.private_tags and "<" in value:
            value, n = _PRIVATE.subn(PRIVATE_MARKER, value)
            if n:
                counts[PRIVATE_RULE] += n
        lowered = None
        for rule in self.rules:
            if rule.hints:
                lowered = lowered if lowered is not None else value.lower()
                if not any(h in lowered for h in rule.hints):
                    continue
            before = counts[rule.name]
            value = _apply(rule, value, counts)
            if counts[rule.name] != before:
                lowered = None  # the text changed
        return value

    def value(self, value: Any, counts: Counter[str], key: str | None = None) -> Any:
        """Any JSON value: strings scanned, containers walked; a secret-named key's string goes whole."""
        if isinstance(value, str):
            if key is not None and SECRET_NAME.match(key) and literal(value):
                counts["secret-assignment"] += 1
                return marker("secret-assignment")
            return self.text(value, counts)
        if isinstance(value, dict):
            return {k: (v if k in _BINARY_FIELDS else self.value(v, counts, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, counts) for v in value]
        return value

    def message(self, role: str, parts: list[dict[str, Any]], metadata: Mapping[str, Any] | None) -> Redaction:
        """The parts and metadata to store; raises HookFailed when the user's hook fails
        (the message is then not stored: storing it unredacted is what the hook is there to stop)."""
        counts: Counter[str] = Counter()
        clean_parts = [self._part(p, counts) for p in parts]
        clean_metadata = self.value(dict(metadata or {}), counts) if metadata else {}
        if self.hook is not None:
            clean_parts = self._run_hook(role, clean_parts, clean_metadata)
        return Redaction(clean_parts, clean_metadata, counts)

    def _part(self, part: dict[str, Any], counts: Counter[str]) -> dict[str, Any]:
        if part.get("type") in ("image", "file"):
            return {k: (v if k in _BINARY_FIELDS else self.value(v, counts)) for k, v in part.items()}
        return {k: (v if k == "type" else self.value(v, counts)) for k, v in part.items()}

    def _run_hook(self, role: str, parts: list[dict[str, Any]], metadata: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            out = self.hook({"role": role, "parts": json.loads(json.dumps(parts)), "metadata": metadata})  # type: ignore[misc]
        except Exception as error:  # noqa: BLE001 - named in the refusal
            raise HookFailed(f"privacy.before_observation ({self.hook_name}) failed: {error}") from None
        if out is None:
            return parts
        if isinstance(out, dict):
            out = out.get("parts", parts)
        if isinstance(out, str):
            return [{"type": "text", "text": out}]
        if not isinstance(out, list) or not all(isinstance(p, dict) and "type" in p for p in out):
            raise HookFailed(
                f"privacy.before_observation ({self.hook_name}) must return None, a list of parts, a message dict"
                " with 'parts', or a string"
            )
        return out


class HookFailed(Exception):
    """The before_observation hook raised or returned something unusable."""


def _apply(rule: Rule, text: str, counts: Counter[str]) -> str:
    def replace(match: re.Match[str]) -> str:
        if rule.check is not None and not rule.check(match):
            return match.group(0)
        start, end = rule.secret_span(match)
        if MARKER_PREFIX in text[start:end] or is_placeholder(text[start:end]):
            return match.group(0)
        counts[rule.name] += 1
        whole_start = match.start()
        whole = match.group(0)
        return whole[: start - whole_start] + marker(rule.name) + whole[end - whole_start :]

    return rule.pattern.sub(replace, text)


def import_hook(path: str) -> Hook:
    """'package.module:function' (or 'package.module.function')."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"privacy.before_observation: cannot import {path!r}: {error}") from None


_CACHE: dict[str, Redactor] = {}


def redactor_for(settings: Mapping[str, Any] | None) -> Redactor:
    """The redactor for plain settings (`{"enabled", "private_tags", "rules", "extra",
    "before_observation"}`); built once per distinct settings. None means the defaults."""
    settings = dict(settings or {})
    key = json.dumps(settings, sort_keys=True, default=str)
    found = _CACHE.get(key)
    if found is not None:
        return found
    if not settings.get("enabled", True):
        redactor = Redactor((), private_tags=False)
    else:
        switches = settings.get("rules") or {}
        rules = tuple(r for r in RULES if switches.get(r.name, True))
        rules += tuple(extra_rule(name, pattern) for name, pattern in (settings.get("extra") or {}).items())
        path = settings.get("before_observation")
        redactor = Redactor(
            rules,
            private_tags=settings.get("private_tags", True),
            hook=import_hook(path) if path else None,
            hook_name=path,
        )
    _CACHE[key] = redactor
    return redactor


REDACTION_EVENT = "data-om-redaction"


def redaction_event(thread_id: str, resource_id: str, counts: Mapping[str, int]) -> dict[str, Any]:
    """The event an append with redactions records: rule names and counts, never the text."""
    return {
        "type": REDACTION_EVENT,
        "thread_id": thread_id,
        "resource_id": resource_id,
        "redactions": dict(sorted(counts.items())),
        "total": sum(counts.values()),
    }
