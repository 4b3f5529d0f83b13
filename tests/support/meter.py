"""The ways the engine asks a model again, each a case a scripted OpenAI-compatible server on loopback
answers, and what it received against what the spend table counts: run by tests/test_meter.py (equal,
case by case) and benchmarks/attacks_meter.py (the totals)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.engine.prompts.reflector import COMPRESSION_LEVELS
from om_mcp.models.errors import TRANSIENT_STATUS
from om_mcp.models.litellm_client import load_litellm
from om_mcp.testing.fake_server import FakeLLMServer, FakeReply, default_responder
from support.engine import msg, role_of
from support.timeouts import scaled

LOOPING = "<observations>\n" + "* 🔴 (10:00) the very same line, again and again and again\n" * 80 + "</observations>"
EMPTY = "<observations>\n</observations>"
PROSE = "I could not do that."
SHORT = "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) condensed\n</observations>"
LONG = (
    "<observations>\nDate: Mar 2, 2026\n"
    + "\n".join(f"* 🟡 (10:{n:02d}) still long, entry {n} of the old log, kept word for word" for n in range(40))
    + "\n</observations>"
)

# What a reply is: a text, (status, body), or a FakeReply.
Answer = Callable[[str, int], Any]  # (role, how many requests of that role so far, this one included)


async def metered(memory: Memory) -> int:
    """Calls the spend table holds: the requests the meter counted."""
    return sum(day.calls for day in await memory.store.spend_since("2000-01-01"))


def answers(observer: Callable[[int], Any] | None = None, reflector: Callable[[int], Any] | None = None) -> Answer:
    def answer(role: str, n: int) -> Any:
        if role == "observer":
            return observer(n) if observer else None
        if role == "reflector":
            return reflector(n) if reflector else SHORT
        return '{"amount": 1500}'  # an extractor's follow-up

    return answer


@dataclass(frozen=True)
class Case:
    answer: Answer
    least: int  # requests the case must make at least, so the way it names was taken
    model: str = '{{ model = "openai/m", api_base = "{base}", max_retries = 1 }}'
    reflect: bool = False
    toml: str = ""
    timeout: float | None = None


def observer_then(first: Any) -> Answer:
    """The Observer answers `first` once, then well."""
    return answers(observer=lambda n: first if n == 1 else None)


EXTRACTOR = """
[[observational_memory.observation.extract]]
name = "Budget"
instructions = "The trip budget."
schema = { type = "object", properties = { amount = { type = "number" } }, required = ["amount"] }
"""


def cases() -> Iterator[tuple[str, Case]]:
    yield "first attempt", Case(answers(), 1)
    # The Observer's second try: a looping or empty answer is asked once more; prose is not.
    for name, text in (("looping", LOOPING), ("empty", EMPTY)):
        yield f"observer asked again after one {name} answer", Case(observer_then(text), 2)
        yield f"observer {name} twice (asked again, then failed)", Case(answers(observer=lambda n, t=text: t), 2)
    yield "observer prose (failed, not asked again)", Case(answers(observer=lambda n: PROSE), 1)
    # The router's retries: every status the errors module calls transient, and a server error.
    for status in sorted(TRANSIENT_STATUS | {500, 503}):
        yield f"HTTP {status} retried", Case(observer_then((status, "busy, try again")), 2)
    for status in (400, 401):  # permanent: the next model of the choice
        first = f'{{{{ model = "openai/refused-{status}", api_base = "{{base}}" }}}}'
        second = '{{ model = "openai/m", api_base = "{base}" }}'
        yield f"HTTP {status}: the next model", Case(answers(), 2, model=f"[{first}, {second}]")
    yield "a timeout retried", Case(observer_then(FakeReply(SHORT, delay_seconds=scaled(3.0))), 2, timeout=scaled(1.0))
    yield (
        "a by-size tier",
        Case(answers(), 1, model='{{ up_to = {{ "100000" = {{ model = "openai/m", api_base = "{base}" }} }} }}'),
    )
    yield "a structured extractor's follow-up", Case(answers(), 2, toml=EXTRACTOR)
    # The Reflector's compression levels (every level a manual run climbs), after each kind of unusable
    # answer, and while its output stays above the target.
    levels = 1 + min(3, len(COMPRESSION_LEVELS))
    for name, text in (("looping", LOOPING), ("empty", EMPTY), ("prose", PROSE), ("too long", LONG)):
        yield f"reflector {name} at every level", Case(answers(reflector=lambda n, t=text: t), 1 + levels, reflect=True)
    yield (
        "reflector looping once, then the next level",
        Case(answers(reflector=lambda n: LOOPING if n == 1 else SHORT), 3, reflect=True),
    )


CASES = dict(cases())


def refusing(request: dict[str, Any]) -> Any:
    """A model named refused-<status> answers every request with that status."""
    model = request["model"]
    return (int(model.rsplit("-", 1)[1]), "refused") if model.startswith("refused-") else None


async def warm(server: FakeLLMServer) -> None:
    """litellm's first request in a process sets itself up for seconds on a loaded machine: made here, so
    the attempts under test get their own time."""
    litellm = load_litellm()
    server.responder = lambda request: "hi"
    await litellm.acompletion(
        model="openai/warm-up", api_base=server.base_url, api_key="none", messages=[{"role": "user", "content": "hi"}]
    )


async def run(name: str, server: FakeLLMServer, root: Path) -> tuple[int, int]:
    """Run one case on a database of its own in `root`: (requests the server received, calls metered)."""
    case = CASES[name]
    await warm(server)
    server.requests.clear()
    seen: Counter[str] = Counter()

    def responder(request: dict[str, Any]) -> Any:
        refused = refusing(request)
        if refused is not None:
            return refused
        role = role_of(request["messages"])
        seen[role] += 1
        reply = case.answer(role, seen[role])
        return default_responder(request) if reply is None else reply

    server.responder = responder
    path = root / "om.toml"
    timeout = case.timeout or scaled(5.0)
    path.write_text(
        '[observational_memory]\nscope = "thread"\n'
        f"model = {case.model.format(base=server.base_url)}\n"
        "[observational_memory.observation]\nbuffer_tokens = false\nmessage_tokens = 100000\n"
        + case.toml
        + "\n[observational_memory.reflection]\nobservation_tokens = 60\n"
        "[observational_memory.call_policy]\n"
        f"timeout_seconds = {timeout}\ntotal_budget_seconds = {timeout * 3 + scaled(5.0)}\n"
        "backoff_initial_seconds = 0.01\nbackoff_max_seconds = 0.02\n"
    )
    memory = await Memory.open(load_config(path, env={}), db_path=str(root / "om.db"))
    try:
        await memory.append_messages("t", [msg(n, words=20) for n in range(4)])
        await memory.observe("t")
        if case.reflect:
            await memory.reflect("t")
        return len(server.requests), await metered(memory)
    finally:
        await memory.close()
