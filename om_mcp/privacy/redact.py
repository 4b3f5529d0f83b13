"""Applying the rules: `<private>` spans first, then the detectors, then the user's own hook
(`privacy.before_observation`, messages only).

What is scanned: every string of a value, at any depth, keys included: a message's parts
(text, reasoning, tool-call arguments, tool results, whatever their keys), its metadata,
a title, thread metadata, working memory, what an import brings, and what a model wrote
before it is committed. The one exception is the binary payload of an image or file part
(its `data`, or a `data:` URL): base64, where a key prefix can occur by chance. A text
file's payload (text/*, JSON, XML, YAML...) is text: it is decoded, scanned and encoded
again. In a structured value a key that names a secret (`{"password": ...}`,
`["--token", ...]`) has its string value redacted whatever it looks like.

`<private>` without `</private>` hides everything after it to the end of the message: every
later string of the same value (later parts of the message, later fields of the object).

The settings arrive as a plain dict (`privacy_settings` in config/privacy.py writes
it; the host hook keeps it in its cached settings), so this module needs no pydantic.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import importlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from om_mcp.privacy.prefilter import Prefilter
from om_mcp.privacy.rules import (
    MARKER_PREFIX,
    RULES,
    Lazy,
    Rule,
    extra_rule,
    is_placeholder,
    literal,
    marker,
    secret_word,
)

PRIVATE_MARKER = "[private]"
PRIVATE_RULE = "private"  # the name <private> spans are counted under
_PRIVATE_TAG = re.compile(r"<(/?)private>", re.I)
_AUTHORIZATION = Lazy(r"^(?:basic|bearer|token|digest|apikey|api-key)\s+(?P<secret>\S{8,})$", re.I)
_AUTHORIZATION_KEYS = {"authorization", "proxy-authorization"}
_FLAG = Lazy(r"^-{1,2}[A-Za-z][\w.-]*$")
_TEXT_MIMES = Lazy(r"^(?:text/|application/(?:json|xml|yaml|x-yaml|toml|x-sh|javascript|sql)|.*\+(?:json|xml)$)")
# Shorter than any secret a rule matches, and than `<private>`: nothing to find.
_MIN_CHARS = 8
_MIN_KEY_CHARS = 16
Hook = Callable[[dict[str, Any]], Any]


@dataclass
class Redaction:
    """A message as it will be stored, and how many of each rule's matches it lost."""

    parts: list[dict[str, Any]]
    metadata: dict[str, Any]
    counts: Counter[str] = field(default_factory=Counter)


@dataclass
class _Pass:
    """One value's scan: the counts, and whether an unclosed `<private>` hides the rest."""

    counts: Counter[str]
    private: bool = False
    keys: bool = True  # scan dictionary keys: not inside a model's parsed answer, whose keys are our ids


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
        self.prefilter = Prefilter(rules)
        names = {rule.name for rule in rules}
        self._named_values = "secret-assignment" in names  # {"password": ...} redacted whole
        self._authorization = "bearer-header" in names  # {"Authorization": "Basic ..."}
        self.private_tags = private_tags
        self.hook = hook
        self.hook_name = hook_name

    @property
    def active(self) -> bool:
        return bool(self.rules) or self.private_tags or self.hook is not None

    # -- one string ------------------------------------------------------------------------

    def text(self, value: str, counts: Counter[str]) -> str:
        """One string on its own (an unclosed `<private>` hides the rest of it)."""
        return self._text(value, _Pass(counts))

    def _text(self, value: str, scan: _Pass) -> str:
        if self.private_tags and (scan.private or "<" in value):
            value = self._private(value, scan)
        if len(value) < _MIN_CHARS:
            return value
        lowered = value.lower()
        for rule in self.prefilter.candidates(lowered):
            changed = _apply(rule, value, lowered, scan.counts)
            if changed is not value:
                value, lowered = changed, changed.lower()
        return value

    def findings(self, text: str) -> list[tuple[str, str]]:
        """(rule, the text it replaces) for each secret the detectors find in `text`: for the tests and
        benchmarks that measure the detectors, never for anything stored or shown."""
        found: list[tuple[str, str]] = []
        lowered = text.lower()
        for rule in self.prefilter.candidates(lowered):
            changed = _apply(rule, text, lowered, Counter(), found)
            if changed is not text:
                text, lowered = changed, changed.lower()
        return found

    def _private(self, value: str, scan: _Pass) -> str:
        """`<private>...</private>` becomes [private]; an open one hides the rest of the value."""
        out, position = [], 0
        for tag in _PRIVATE_TAG.finditer(value):
            if value[tag.start() - 1 : tag.start()] == "`" and value[tag.end() : tag.end() + 1] == "`":
                continue  # `<private>` written as code: a mention of the tag, not one
            closing = tag.group(1) == "/"
            if not scan.private and not closing:
                out.append(value[position : tag.start()])
                scan.counts[PRIVATE_RULE] += 1
                scan.private = True
            elif scan.private and closing:
                out.append(PRIVATE_MARKER)
                scan.private = False
            else:
                continue  # a stray </private>, or <private> inside a span
            position = tag.end()
        out.append(PRIVATE_MARKER if scan.private else value[position:])
        return "".join(out)

    # -- any value ---------------------------------------------------------------------------

    def value(self, value: Any, counts: Counter[str]) -> Any:
        """Any JSON value, or a dataclass of them (what a model's answer was parsed into): every
        string scanned, containers walked, a secret-named key's string redacted whole."""
        return self._value(value, _Pass(counts), None)

    def _value(self, value: Any, scan: _Pass, key: str | None) -> Any:
        if isinstance(value, str):
            if key is not None and not scan.private:
                named = self._named(key, value, scan.counts)
                if named is not None:
                    return named
            return self._text(value, scan)
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                # A key is a name; one long enough to hold a token is scanned as text.
                long_key = scan.keys and isinstance(k, str) and len(k) >= _MIN_KEY_CHARS
                clean_key = self._text(k, _Pass(scan.counts)) if long_key else k
                out[clean_key] = self._value(v, scan, k if isinstance(k, str) else None)
            return out
        if isinstance(value, (list, tuple)):
            items, flag = [], None
            for item in value:  # ["--password", "<value>"]: a flag names the value after it
                items.append(self._value(item, scan, flag))
                flag = item if isinstance(item, str) and _FLAG.match(item) else None
            return items if isinstance(value, list) else tuple(items)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            scan.keys = False  # thread ids, extractors' slugs
            fields = [f.name for f in dataclasses.fields(value) if f.init]
            return dataclasses.replace(
                value, **{name: self._value(getattr(value, name), scan, None) for name in fields}
            )
        return value

    def _named(self, key: str, value: str, counts: Counter[str]) -> str | None:
        """The value under a key that names a secret, redacted; None: scan it as any text."""
        authorization = self._authorization and key.lower() in _AUTHORIZATION_KEYS
        if authorization and (found := _AUTHORIZATION.match(value.strip())):
            if is_placeholder(found.group("secret")) or MARKER_PREFIX in found.group("secret"):
                return None
            counts["bearer-header"] += 1
            start, end = found.span("secret")
            return value[:start] + marker("bearer-header") + value[end:]
        word = secret_word(key) if self._named_values else None
        if word is not None and literal(value, word):
            counts["secret-assignment"] += 1
            return marker("secret-assignment")
        return None

    # -- a message ----------------------------------------------------------------------------

    def message(self, role: str, parts: list[dict[str, Any]], metadata: Mapping[str, Any] | None) -> Redaction:
        """The parts and metadata to store; raises HookFailed when the user's hook fails
        (the message is then not stored: storing it unredacted is what the hook is there to stop)."""
        counts: Counter[str] = Counter()
        clean_parts = self.parts(parts, counts)
        clean_metadata = self.value(dict(metadata), counts) if metadata else {}
        if self.hook is not None:
            clean_parts = self._run_hook(role, clean_parts, clean_metadata)
        return Redaction(clean_parts, clean_metadata, counts)

    def parts(self, parts: list[dict[str, Any]], counts: Counter[str]) -> list[dict[str, Any]]:
        """A message's parts as one value: an unclosed `<private>` in one hides the parts after it."""
        scan = _Pass(counts)
        return [self._part(p, scan) for p in parts]

    def _part(self, part: dict[str, Any], scan: _Pass) -> dict[str, Any]:
        out = {}
        attachment = part.get("type") in ("image", "file")
        for k, v in part.items():
            if k == "type":
                out[k] = v
            elif attachment and k in ("data", "url") and isinstance(v, str):
                out[k] = self._attachment(k, v, str(part.get("mime_type") or ""), scan)
            else:
                out[k] = self._value(v, scan, k)
        return out

    def _attachment(self, key: str, value: str, mime: str, scan: _Pass) -> str:
        """An image's or file's data or URL. A URL is text; so is a payload of text (decoded from
        base64, scanned, encoded again); a binary payload is left as it is."""
        if value.startswith("data:"):
            head, comma, payload = value.partition(",")
            mime = head[5:].split(";")[0] or mime
            if ";base64" not in head:  # data:text/plain,a%20note: percent-encoded text
                text = unquote(payload)
                clean = self._text(text, scan)
                return value if clean == text else head + comma + quote(clean, safe="")
        elif key == "url":
            return self._text(value, scan)
        else:
            head, comma, payload = "", "", value
        try:
            decoded = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            return head + comma + self._text(payload, scan)  # not base64: text
        if not _TEXT_MIMES.match(mime.lower()):
            return value  # binary
        try:
            text = decoded.decode("utf-8")
        except UnicodeDecodeError:
            return value
        clean = self._text(text, scan)
        return value if clean == text else head + comma + base64.b64encode(clean.encode("utf-8")).decode("ascii")

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


def _apply(
    rule: Rule, text: str, lowered: str, counts: Counter[str], found: list[tuple[str, str]] | None = None
) -> str:
    """The text with each of the rule's secrets replaced by its marker (the same object when none);
    `found` collects (rule, secret) for the measurements of the detectors themselves."""
    if rule.lowered and len(lowered) == len(text):  # (a few characters change length in lower case)
        matches = rule.lower_pattern.finditer(lowered)
    else:
        matches = rule.pattern.finditer(text)
    out, position = [], 0
    for match in matches:
        if rule.starts_word and not _word_starts(text, match.start()):
            continue
        if rule.check is not None and not rule.check(match, text):
            continue
        start, end = rule.secret_span(match)
        secret = text[start:end]
        if MARKER_PREFIX in secret or is_placeholder(secret):
            continue
        counts[rule.name] += 1
        if found is not None:
            found.append((rule.name, secret))
        out += [text[position:start], marker(rule.name)]
        position = end
    if not out:
        return text
    out.append(text[position:])
    return "".join(out)


def _word_starts(text: str, at: int) -> bool:
    """No letter, digit or `_` before `at`, unless it ends a percent escape (`token%3Dghp_...`)."""
    before = text[at - 1 : at]
    if not (before.isalnum() or before == "_"):
        return True
    return at >= 3 and text[at - 3] == "%" and all(c in "0123456789abcdefABCDEF" for c in text[at - 2 : at])


def import_hook(path: str, option: str = "privacy.before_observation") -> Any:
    """A user's hook by its dotted path, 'package.module:function' (or 'package.module.function'): the one
    loader for every option that names one (this one, `observational_memory.hooks`); ValueError naming
    the option when it cannot be imported."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"{option}: cannot import {path!r}: {error}") from None


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


def scrub(settings: Mapping[str, Any] | None, value: Any) -> tuple[Any, Counter[str]]:
    """Any stored value that is not a message (a title, metadata, working memory, an import's
    records, a model's answer): the same rules and `<private>` spans, never the message hook."""
    counts: Counter[str] = Counter()
    return redactor_for({**(settings or {}), "before_observation": None}).value(value, counts), counts


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
