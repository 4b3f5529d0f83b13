"""The Observer: the conversation in, observations out. It touches no storage; the
cycle selects its input and commits its output, so the same Observer serves
synchronous, manual, buffered and resource-scope runs."""

from __future__ import annotations

import base64
import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from om_mcp.engine import remember
from om_mcp.engine.observation.parsing import ParsedOutput, excerpt, is_degenerate, parse_output
from om_mcp.engine.observation.transcript import format_history, format_thread_sections
from om_mcp.engine.prompts import observer as prompts
from om_mcp.engine.tokens import TokenCounter
from om_mcp.models import Completion, ModelError, ModelRouter, Usage
from om_mcp.store import Message

HIGH_PRIORITY = "🔴"
_TAG = re.compile(r"</?[A-Za-z][\w-]*[^<>]*>")


class CycleFailed(ModelError):
    """A cycle could not finish for a reason of its own (nothing to do, the memory
    changed meanwhile, its time budget ran out). An answer with nothing usable in it is
    the model's failure instead (`UnusableAnswer`, counted by the breaker)."""


@dataclass
class ObserverRequest:
    messages: list[Message]
    previous_observations: str = ""
    current_task: str | None = None
    suggested_response: str | None = None
    extracted: dict[str, str] = field(default_factory=dict)
    threads: dict[str, list[Message]] | None = None  # resource scope: label -> messages
    instruction: str | None = None
    current_title: str | None = None


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
    edits: Any = None  # a Reflector that answered with edits: what they made (edits.Applied)


def truncate_previous(text: str, budget: int | bool, count: Callable[[str], int]) -> str:
    """Fit the previous observations into `budget` tokens for the Observer: keep
    the newest lines, and older 🔴 lines while room remains."""
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
    """True/"auto": images only (what every vision model takes); a list: those mime patterns."""
    if policy is True or policy == "auto":
        return mime.startswith("image/")
    if policy is False:
        return False
    return any(pattern == "*" or fnmatch.fnmatchcase(mime, pattern) for pattern in policy)


TEXT_ATTACHMENT_CHARS = 20_000


def attachment_items(messages: Sequence[Message], policy: bool | str | list[str]) -> list[dict[str, Any]]:
    """Content items for the attachments the policy allows: images as image_url,
    text files as text (clipped), other files as data URLs."""
    items = []
    for message in messages:
        for part in message.parts:
            if part.get("type") not in ("image", "file"):
                continue
            mime = part.get("mime_type", "")
            if not attachment_allowed(mime, policy):
                continue
            url = part.get("url")
            data = part.get("data")
            if data and data.startswith("data:"):  # already a data URL: its payload follows the comma
                url, data = url or data, data.partition(",")[2]
            if mime.startswith("image/"):
                if data and not url:
                    url = f"data:{mime};base64,{data}"
                if url:
                    items.append({"type": "image_url", "image_url": {"url": url}})
            elif data and (mime.startswith("text/") or mime in ("application/json", "application/xml")):
                try:
                    text = base64.b64decode(data, validate=False).decode("utf-8", "replace")
                except ValueError:
                    continue
                name = part.get("name") or mime
                items.append({"type": "text", "text": f"[attachment {name}]\n{text[:TEXT_ATTACHMENT_CHARS]}"})
            elif data:
                items.append(
                    {
                        "type": "file",
                        "file": {
                            "file_data": f"data:{mime};base64,{data}",
                            "filename": part.get("name") or "attachment",
                        },
                    }
                )
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
        threads = request.threads
        multi = threads is not None
        instruction = "\n\n".join(x for x in (self.instruction, request.instruction) if x) or None
        system = prompts.observer_system_prompt(instruction, self.thread_title, self.extractors, multi)
        if threads is not None:
            history = format_thread_sections(
                {label: [as_observed(m) for m in msgs] for label, msgs in threads.items()},
                count_text=self.counter.count_text,
            )
        else:
            history = format_history([as_observed(m) for m in request.messages], count_text=self.counter.count_text)
        previous = truncate_previous(request.previous_observations, self.previous_tokens, self.counter.count_text)
        first, second = prompts.observer_user_messages(
            previous,
            request.current_task,
            request.suggested_response,
            request.extracted,
            history,
            current_title=request.current_title if self.thread_title else None,
        )
        images = attachment_items(request.messages, self.observe_attachments)
        second_content: Any = [{"type": "text", "text": second}, *images] if images else second
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": first},
            {"role": "user", "content": second_content},
        ]

    async def observe(self, request: ObserverRequest) -> AgentResult:
        """One Observer call. An answer without observations for the request (a refusal,
        an empty or repetitive text, the format ignored) fails it with `UnusableAnswer`."""
        messages = self.build(request)
        input_tokens = sum(self.counter.count_text(text_of(m)) for m in messages)
        slugs = [slug for slug, _ in self.extractors]
        parsed: list[ParsedOutput] = []

        def accept(completion: Completion) -> str | None:
            result = parse_output(completion.text, slugs, multi_thread=request.threads is not None)
            problem = unusable(result, request.threads)
            if problem is None:
                parsed.append(result)
                return None
            return f"{problem} (it answered {excerpt(completion.text)})"

        asked = False

        def escalate(completion: Completion, problem: str) -> list[dict[str, Any]] | None:
            # Prose (a refusal, the format ignored) would get the same answer again; a loop or
            # an empty answer is asked once more, for fewer and shorter notes.
            nonlocal asked
            if asked or not looped_or_empty(completion.text):
                return None
            asked = True
            return [*messages, {"role": "user", "content": prompts.observer_retry(problem)}]

        completion = await self.router.complete(messages, input_tokens, accept, escalate)
        return agent_result(parsed[-1], completion, input_tokens, completion.attempts, self.counter)


def looped_or_empty(text: str) -> bool:
    """An answer that repeats itself, or holds nothing but (empty) section tags."""
    return is_degenerate(text) or not _TAG.sub("", text).strip()


def as_observed(message: Message) -> dict[str, Any]:
    """A message as the Observer reads it: a user's `<remember>` spans are in memory already."""
    data = message.as_dict()
    if message.role == "user":
        data["parts"] = [
            {**p, "text": remember.for_observer(p["text"])} if p.get("type") == "text" and p.get("text") else p
            for p in data["parts"]
        ]
    return data


def unusable(parsed: ParsedOutput, threads: dict[str, list[Message]] | None = None) -> str | None:
    """What makes an Observer answer useless (None when it is not): it must hold
    observations; in resource scope, for one of the batch's threads (a batch of one
    may skip the section)."""
    if parsed.degenerate:
        return "repetitive (degenerate) output"
    if threads is None:
        return None if parsed.observations.strip() else "no observations"
    mine = [p for label, p in parsed.threads.items() if label in threads]
    if any(p.observations.strip() for p in mine):
        return None
    if len(threads) == 1 and not mine and parsed.observations.strip():
        return None
    return "no observations for the threads it was given"


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(item.get("text", "") for item in content if item.get("type") == "text")


def agent_result(
    parsed: ParsedOutput,
    completion: Completion,
    input_tokens: int,
    attempts: int,
    counter: TokenCounter,
    level: int | None = None,
) -> AgentResult:
    return AgentResult(
        parsed=parsed,
        text=completion.text,
        input_tokens=input_tokens,
        usage=completion.usage,
        model=completion.model,
        attempts=attempts,
        level=level,
        output_tokens=counter.count_text("\n\n".join(p for p in (parsed.observations, parsed.unsectioned) if p)),
    )
