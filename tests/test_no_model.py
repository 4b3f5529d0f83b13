"""No model is a calm state: the real server process, with no key for its model, through the MCP client.

Timing is measured by benchmarks/no_key.py, not asserted here; these tests check the causes instead:
no model call is attempted, no turn is made to wait, nothing noisy reaches stderr or the model.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.mcp import call, ok, read_json
from support.processes import REPO, clean_env, server_command
from support.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TURNS = 30
WORDS = "the deployment notes mention regions, budgets and the rollback plan " * 3


def no_key_server(tmp_path: Path, model: str, **env: str) -> tuple[StdioServerParameters, Path]:
    """The server as a host starts it, stderr kept in a file so the test can read every line."""
    stderr = tmp_path / "stderr.log"
    command = " ".join(shlex.quote(part) for part in server_command("--db", str(tmp_path / "om.db")))
    options = clean_env(
        tmp_path,
        OM_OBSERVATIONAL_MEMORY__MODEL=model,
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="400",  # block_after (1.2x) passes by turn 4
        **env,
    )
    return StdioServerParameters(
        command="sh", args=["-c", f"exec {command} 2>{shlex.quote(str(stderr))}"], env=options, cwd=str(REPO)
    ), stderr


async def run_turns(client: Client, thread_id: str) -> list[str]:
    """TURNS exchanges, each followed by the context read a host makes before replying; every result's text."""
    results = []
    for turn in range(TURNS):
        results.append(
            await call(
                client,
                "append_messages",
                thread_id=thread_id,
                user=f"turn {turn}: {WORDS}",
                assistant=f"reply {turn}: {WORDS}",
            )
        )
        results.append(await call(client, "get_context", thread_id=thread_id))
    return results


@pytest.mark.parametrize(
    "model, reason", [("gemini/gemini-2.5-flash", "GEMINI_API_KEY"), ("openai/gpt-4o-mini", "OPENAI_API_KEY")]
)
async def test_thirty_turns_past_block_after_with_no_key(tmp_path, model, reason):
    params, stderr = no_key_server(tmp_path, model, GEMINI_API_KEY="your-key-here")  # a placeholder is no key
    with anyio.fail_after(scaled(120)):
        async with Client(params) as client:
            results = await run_turns(client, "t")
            context = await ok(client, "get_context", thread_id="t", include_status=True)
            status = await read_json(client, "om://threads/t/status")
            events = await read_json(client, "om://threads/t/events")
            observed = await ok(client, "observe", thread_id="t")
    # Every message is there, raw: nothing was lost, nothing observed.
    assert context["omitted_messages"] + len(context["messages"]) == 2 * TURNS
    assert context["status"]["model_ready"] is False
    assert reason in context["status"]["reason"]
    assert context["status"]["unobserved_tokens"] > 1.2 * 400  # past block_after, and no turn waited for it
    assert status["observation"]["model_ready"] is False and reason in status["observation"]["reason"]
    # No model call was attempted, so nothing failed and nothing waited.
    assert not [e for e in events if "failed" in e["type"] or e["type"].startswith("cycle")], events
    assert observed["ran"] is False and reason in observed["reason"]
    for text in results + [json.dumps(context), json.dumps(observed)]:
        assert "Traceback" not in text and "litellm" not in text.lower()
    lines = stderr.read_text().splitlines()
    assert len(lines) <= 5, lines
    assert not [line for line in lines if "Traceback" in line or "LiteLLM" in line]
    assert any(reason in line for line in lines), lines  # start-up said why observation is paused


async def test_observation_off_is_quiet_and_says_so(tmp_path):
    params, stderr = no_key_server(tmp_path, "gemini/gemini-2.5-flash", OM_OBSERVATIONAL_MEMORY__ENABLED="false")
    with anyio.fail_after(scaled(60)):
        async with Client(params) as client:
            await run_turns(client, "t")
            status = await read_json(client, "om://threads/t/status")
    assert status["observation"]["enabled"] is False
    assert len(stderr.read_text().splitlines()) <= 2
