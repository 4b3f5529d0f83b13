"""The Reflector: the whole log in, a condensed log out (or edits over its lines,
engine/observation/edits.py), compressing harder while the result is not below its target
(levels 0 to 4, rising only while the output misses it). It touches no storage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from om_mcp.engine.observation import edits
from om_mcp.engine.observation.observer import AgentResult, CycleFailed, agent_result, text_of
from om_mcp.engine.observation.parsing import ParsedOutput, edits_block, excerpt, is_degenerate, parse_output
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

    def build(
        self, observations: str, level: int, guidance: str | None, extracted: dict[str, str], edits: bool = False
    ) -> list[dict]:
        system = prompts.reflector_system_prompt(self.instruction, self.extractors, edits)
        user = prompts.reflector_user_message(observations, level, guidance, extracted, edits)
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
        labelled: edits.Labelled | None = None,
    ) -> AgentResult:
        """Condense the log, raising the compression level while the result is not below
        `target_tokens`. With `labelled` (the log with its line labels) the Reflector answers
        with edits, a rewrite being its fallback. An empty or degenerate (looping) answer is a
        failed attempt too: the next level is asked at once, on the same model (the router's
        `escalate`, each attempt metered), and only an unusable answer at the last level fails
        the call (`UnusableAnswer`). Each failed attempt is reported (`on_attempt_failed`)."""
        if not observations.strip():
            raise CycleFailed("nothing to reflect")
        slugs = [slug for slug, _ in self.extractors]
        max_level = min(4, start_level + 3)
        level, attempts = start_level, 0
        parsed: list[tuple[ParsedOutput, edits.Applied | None]] = []

        def accept(completion: Completion) -> str | None:
            text = completion.text
            if labelled is not None and not is_degenerate(text):
                block, text = edits_block(text)
                found = edits.parse(block) if block is not None else None
                if found is not None and (applied := edits.apply(labelled, found)).text.strip():
                    rest = parse_output(text, slugs)
                    log = ParsedOutput(
                        applied.text, suggested_response=rest.suggested_response, extracted=rest.extracted
                    )
                    parsed.append((log, applied))
                    return None
                text = edits.unlabel(text)
            result = parse_output(text, slugs, multi_thread=self.multi_thread)
            if not result.degenerate and result.observations.strip():
                parsed.append((result, None))
                return None
            problem = "repetitive (degenerate) output" if result.degenerate else "no observations"
            return f"{problem} (it answered {excerpt(completion.text)})"

        shown = labelled.text if labelled is not None else observations
        failed: list[tuple[int, str]] = []

        def escalate(completion: Completion, problem: str) -> list[dict[str, Any]] | None:
            """After an empty or looping answer: the next compression level, while there is one."""
            nonlocal level, attempts
            if level >= max_level:
                return None
            failed.append((level, problem))
            level += 1
            attempts += 1
            return self.build(shown, level, guidance, extracted or {}, labelled is not None)

        async def report() -> None:
            while failed and on_attempt_failed is not None:
                await on_attempt_failed(*failed.pop(0))

        while True:
            attempts += 1
            messages = self.build(shown, level, guidance, extracted or {}, labelled is not None)
            input_tokens = sum(self.counter.count_text(text_of(m)) for m in messages)
            try:
                completion = await self.router.complete(messages, input_tokens, accept, escalate)
            finally:
                await report()
            log, applied = parsed[-1]
            result = agent_result(log, completion, input_tokens, attempts, self.counter, level)
            result.edits = applied
            if result.output_tokens < target_tokens or level >= max_level:
                return result
            if on_attempt_failed is not None:
                reason = f"level {level} output has {result.output_tokens} tokens, target is below {target_tokens}"
                await on_attempt_failed(level, reason)
            level += 1
