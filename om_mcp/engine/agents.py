"""The Observer and the Reflector: prompt in, model call, parsed result out.

They touch no storage. The cycle (cycles.py) selects their input and commits
their output, so the same agents serve sync, manual and background runs.
"""

from __future__ import annotations

import base64
import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from om_mcp.engine import prompts
from om_mcp.engine.formatting import format_history, format_thread_sections
from om_mcp.engine.parsing import ParsedOutput, parse_output
from om_mcp.engine.tokens import TokenCounter
from om_mcp.models import Completion, ModelError, ModelRouter, Usage
from om_mcp.store import Message

HIGH_PRIORITY = "🔴"


class CycleFailed(ModelError):
    """The model answered, but nothing usable came back (degenerate or empty)."""


@dataclass
class ObserverRequest:
    messages: list[Message]
    previous_observations: str = ""
    current_task: str | None = None
    suggested_response: str | None = None
    extracted: dict[str, str] = field(default_factory=dict)
    threads: dict[str, list[Message]] | None = None  # resource scope: label -> messages
    skip_hints: bool = False
    instruction: str | None = None


@dataclass
class AgentResult:
    parsed: ParsedOutput
    text: str
    input_tokens: int
    usage: Usage
    model: str
    attempts: int = 1
    level: int | None = None
    output_tokens: int = 0


def truncate_previous(text: str, budget: int | bool, count: Callable[[str], int]) -> str:
    """Fit the previous observations into `budget` tokens for the Observer: keep
    the newest lines, and older 🔴 lines while room remains (OM-21)."""
    if budget is False or not text:
        return text
    if budget == 0:
        return ""
    if count(text) <= budget:
        return text
    lines = text.splitlines()
    kept: list[int] = []
    used = 0
    # Newest first, then the older high-priority lines.
    for index in range(len(lines) - 1, -1, -1):
        cost = count(lines[index]) + 1
        if used + cost > budget * 0.75:
            break
        kept.append(index)
        used += cost
    for index in range(min(kept, default=len(lines)) - 1, -1, -1):
        line = lines[index]
        if HIGH_PRIORITY in line or line.lstrip().lower().startswith("date:"):
            cost = count(line) + 1
            if used + cost > budget:
                break
            kept.append(index)
            used += cost
    kept.sort()
    out, previous = [], -1
    for index in kept:
        if index != previous + 1:
            out.append(f"[{index - previous - 1} older lines omitted]")
        out.append(lines[index])
        previous = index
    return "\n".join(out)


def attachment_allowed(mime: str, policy: bool | str | list[str]) -> bool:
    if policy is True or policy == "auto":
        return True
    if policy is False:
        return False
    return any(pattern == "*" or fnmatch.fnmatchcase(mime, pattern) for pattern in policy)


def _image_items(messages: Sequence[Message], policy: bool | str | list[str]) -> list[dict[str, Any]]:
    items = []
    for message in messages:
        for part in message.parts:
            if part.get("type") not in ("image", "file"):
                continue
            mime = part.get("mime_type", "")
            if not mime.startswith("image/") or not attachment_allowed(mime, policy):
                continue
            if part.get("url"):
                url = part["url"]
            elif part.get("data"):
                try:
                    base64.b64decode(part["data"][:64] + "==", validate=False)
                except ValueError:
                    continue
                url = f"data:{mime};base64,{part['data']}"
            else:
                continue
            items.append({"type": "image_url", "image_url": {"url": url}})
    return items


class Observer:
    def __init__(
        self,
        router: ModelRouter,
        counter: TokenCounter,
        *,
        instruction: str | None = None,
        thread_title: bool = False,
        extractors: Sequence[tuple[str, str]] = (),
        previous_tokens: int | bool = 2000,
        observe_attachments: bool | str | list[str] = True,
    ):
        self.router = router
        self.counter = counter
        self.instruction = instruction
        self.thread_title = thread_title
        self.extractors = list(extractors)
        self.previous_tokens = previous_tokens
        self.observe_attachments = observe_attachments

    def build(self, request: ObserverRequest) -> list[dict[str, Any]]:
        multi = request.threads is not None
        instruction = "\n\n".join(x for x in (self.instruction, request.instruction) if x) or None
        system = prompts.observer_system_prompt(instruction, self.thread_title, self.extractors, multi)
        if multi:
            history = format_thread_sections(
                {label: [m.as_dict() for m in msgs] for label, msgs in request.threads.items()},
                count_text=self.counter.count_text,
            )
        else:
            history = format_history([m.as_dict() for m in request.messages], count_text=self.counter.count_text)
        previous = truncate_previous(request.previous_observations, self.previous_tokens, self.counter.count_text)
        first, second = prompts.observer_user_messages(
            previous, request.current_task, request.suggested_response, request.extracted, history,
            skip_hints=request.skip_hints,
        )
        images = _image_items(request.messages, self.observe_attachments)
        second_content: Any = [{"type": "text", "text": second}, *images] if images else second
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": first},
            {"role": "user", "content": second_content},
        ]

    async def observe(self, request: ObserverRequest) -> AgentResult:
        """One Observer call; a repetition loop gets one retry, then the cycle fails."""
        messages = self.build(request)
        input_tokens = sum(self.counter.count_text(_text_of(m)) for m in messages)
        slugs = [slug for slug, _ in self.extractors]
        for attempt in (1, 2):
            completion = await self.router.complete(messages, input_tokens)
            parsed = parse_output(completion.text, slugs, multi_thread=request.threads is not None)
            if not parsed.degenerate:
                return _result(parsed, completion, input_tokens, attempt, self.counter)
        raise CycleFailed("the Observer produced repetitive (degenerate) output twice")


class Reflector:
    def __init__(
        self,
        router: ModelRouter,
        counter: TokenCounter,
        *,
        instruction: str | None = None,
        extractors: Sequence[tuple[str, str]] = (),
    ):
        self.router = router
        self.counter = counter
        self.instruction = instruction
        self.extractors = list(extractors)

    def build(self, observations: str, level: int, guidance: str | None, extracted: dict[str, str]) -> list[dict]:
        system = prompts.reflector_system_prompt(self.instruction, self.extractors)
        user = prompts.reflector_user_message(observations, level, guidance, extracted)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def reflect(
        self,
        observations: str,
        *,
        target_tokens: int,
        start_level: int = 0,
        guidance: str | None = None,
        extracted: dict[str, str] | None = None,
        on_attempt_failed: Callable[[int, str], Any] | None = None,
    ) -> AgentResult:
        """Rewrite the log, raising the compression level while the result is not
        below `target_tokens`. An empty or degenerate result is never accepted."""
        if not observations.strip():
            raise CycleFailed("nothing to reflect")
        slugs = [slug for slug, _ in self.extractors]
        max_level = min(4, start_level + 3)
        level, attempts, last_good = start_level, 0, None
        while True:
            attempts += 1
            messages = self.build(observations, level, guidance, extracted or {})
            input_tokens = sum(self.counter.count_text(_text_of(m)) for m in messages)
            completion = await self.router.complete(messages, input_tokens)
            parsed = parse_output(completion.text, slugs)
            usable = not parsed.degenerate and parsed.observations.strip()
            if usable:
                result = _result(parsed, completion, input_tokens, attempts, self.counter, level)
                if result.output_tokens < target_tokens or level >= max_level:
                    return result
                last_good = result
                reason = f"level {level} output has {result.output_tokens} tokens, target is below {target_tokens}"
            else:
                reason = "degenerate output" if parsed.degenerate else "empty output"
            if on_attempt_failed is not None:
                await on_attempt_failed(level, reason)
            if level >= max_level:
                if last_good is not None:
                    return last_good
                raise CycleFailed(f"the Reflector gave no usable output up to level {level} ({reason})")
            level += 1


def _text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(item.get("text", "") for item in content if item.get("type") == "text")


def _result(
    parsed: ParsedOutput, completion: Completion, input_tokens: int, attempts: int, counter: TokenCounter,
    level: int | None = None,
) -> AgentResult:
    return AgentResult(
        parsed=parsed, text=completion.text, input_tokens=input_tokens, usage=completion.usage,
        model=completion.model, attempts=attempts, level=level,
        output_tokens=counter.count_text(parsed.observations),
    )
