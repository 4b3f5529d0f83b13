"""The Reflector: the whole log in, a condensed log out, compressing harder while the
result is not below its target (levels 0 to 4, rising only while the output misses it). It touches no storage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from om_mcp.engine.context.escape import excerpt
from om_mcp.engine.observation.observer import AgentResult, CycleFailed, agent_result, text_of
from om_mcp.engine.observation.parsing import ParsedOutput, parse_output
from om_mcp.engine.prompts import reflector as prompts
from om_mcp.engine.tokens import TokenCounter
from om_mcp.models import Completion, ModelRouter


class Reflector:
    def __init__(
        self,
        router: ModelRouter,
        counter: TokenCounter,
        *,
        instruction: str | None = None,
        extractors: Sequence[tuple[str, str]] = (),
        multi_thread: bool = False,
    ):
        self.multi_thread = multi_thread  # resource scope: the log keeps one section per thread
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
        below `target_tokens`. An empty or degenerate answer fails the call (`UnusableAnswer`)."""
        if not observations.strip():
            raise CycleFailed("nothing to reflect")
        slugs = [slug for slug, _ in self.extractors]
        max_level = min(4, start_level + 3)
        level, attempts = start_level, 0
        parsed: list[ParsedOutput] = []

        def accept(completion: Completion) -> str | None:
            result = parse_output(completion.text, slugs, multi_thread=self.multi_thread)
            if not result.degenerate and result.observations.strip():
                parsed.append(result)
                return None
            problem = "repetitive (degenerate) output" if result.degenerate else "no observations"
            return f"{problem} (it answered {excerpt(completion.text)})"

        while True:
            attempts += 1
            messages = self.build(observations, level, guidance, extracted or {})
            input_tokens = sum(self.counter.count_text(text_of(m)) for m in messages)
            completion = await self.router.complete(messages, input_tokens, accept)
            result = agent_result(parsed[-1], completion, input_tokens, attempts, self.counter, level)
            if result.output_tokens < target_tokens or level >= max_level:
                return result
            if on_attempt_failed is not None:
                reason = f"level {level} output has {result.output_tokens} tokens, target is below {target_tokens}"
                await on_attempt_failed(level, reason)
            level += 1
