"""One meter for every request to a model (issue 33, item 4): each request a model's side receives is one
call in the spend table (`om_spend`), whatever asked for it: a first attempt, a transient error's retry, the
next model after a permanent error, a timeout's retry, the Observer asking again after a looping or empty
answer, the Reflector's compression levels (after an unusable answer, and while its output is too long), a
structured extractor's follow-up, a by-size tier; through litellm to a scripted OpenAI-compatible server on
loopback (which counts what it receives), MCP sampling (the client counts what it is asked) and the claude
CLI (the fake executable counts its runs). The cases: tests/support/meter.py.

The promise is structural: a router reaches a client only through `models.base.Metered`, so these tests
hold for a retry nobody has written yet. The review's attack was the Observer's retry after a looping
answer going around the meter (22,020 provider tokens against 10,906 recorded under a 15,000 cap).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.engine import config, msg, observer_reply
from support.mcp import connect, ok
from support.meter import CASES, LOOPING, metered, run

from om_mcp.engine import Memory
from om_mcp.models.claude_cli import ClaudeCliClient
from om_mcp.models.clients import BACKENDS
from om_mcp.server import build_server
from om_mcp.server.sampling import SamplingBroker
from om_mcp.testing.fake_server import FakeLLMServer

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as s:
        yield s


@pytest.mark.parametrize("name", list(CASES))
async def test_every_request_the_provider_receives_is_metered(name: str, server: FakeLLMServer, tmp_path: Path):
    made, counted = await run(name, server, tmp_path)
    assert made >= CASES[name].least, f"{name}: {made} request(s), the case needs {CASES[name].least}"
    assert counted == made, f"{name}: {made} request(s) received"


# -- the other backends: MCP sampling and the claude CLI ---------------------------------------------------


async def test_every_sampling_request_is_metered(tmp_path: Path):
    """A looping answer (asked again), a refusal (a request the client answered: retried), an answer."""
    from mcp.types import CreateMessageResult, ErrorData, TextContent

    made = config(
        model=json.dumps({"model": "sampling", "max_retries": 2}), observation__message_tokens=100000
    ).model_copy(update={"db_path": tmp_path / "om.db"})
    broker = SamplingBroker()
    memory = await Memory.open(made, sampling=broker)
    replies = iter([LOOPING, None, observer_reply(["a fact"])])
    asked = 0

    async def sampler(context: Any, params: Any) -> Any:
        nonlocal asked
        asked += 1
        text = next(replies)
        if text is None:
            return ErrorData(code=-1, message="User rejected sampling request")
        return CreateMessageResult(role="assistant", model="host-model", content=TextContent(type="text", text=text))

    try:
        async with connect(build_server(made, memory), mode="legacy", sampling_callback=sampler) as client:
            await ok(client, "append_messages", thread_id="t", messages=[msg(0), msg(1)])
            assert (await ok(client, "observe", thread_id="t"))["ran"]
        assert asked == 3 and await metered(memory) == asked
    finally:
        await memory.close()


FAKE_CLAUDE = textwrap.dedent(
    """\
    #!{python}
    import json, sys
    sys.stdin.read()
    with open({log!r}, "a") as log:
        log.write("run\\n")
    runs = sum(1 for _ in open({log!r}))
    text = {looping!r} if runs == 1 else {answer!r}
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": text,
                      "usage": {{"input_tokens": 1200, "output_tokens": 40}}, "total_cost_usd": 0.001}}))
    """
)


@pytest.mark.slow  # two runs of a fake `claude` executable
async def test_every_claude_cli_run_is_metered(tmp_path: Path):
    log = tmp_path / "runs"
    script = tmp_path / "claude"
    script.write_text(
        FAKE_CLAUDE.format(python=sys.executable, log=str(log), looping=LOOPING, answer=observer_reply(["a fact"]))
    )
    script.chmod(0o755)
    made = config(model="claude-cli/haiku", observation__message_tokens=100000)
    memory = await Memory.open(made, db_path=str(tmp_path / "om.db"), client=ClaudeCliClient(str(script)))
    try:
        await memory.append_messages("t", [msg(0), msg(1)])
        assert (await memory.observe("t")).ran
        runs = len(log.read_text().splitlines())
        assert runs == 2 and await metered(memory) == runs
    finally:
        await memory.close()


def test_every_backend_has_a_meter_test():
    """A new kind of client lands with its own count of requests against the spend table."""
    tested = {
        "litellm": test_every_request_the_provider_receives_is_metered,
        "sampling": test_every_sampling_request_is_metered,
        "claude-cli": test_every_claude_cli_run_is_metered,
    }
    assert set(tested) == set(BACKENDS)
