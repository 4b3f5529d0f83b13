"""`om-mcp hook claude-code` as Claude Code runs it: a process, the hook JSON on
stdin, transcripts in Claude Code's own format, exit code 0 whatever happens.

The last tests are the point of it all: a session recorded only by the hooks is
observed in the background (a worker the hook starts, talking to the scripted
OpenAI-compatible server; or the `claude` CLI; or a client's MCP sampling through
a running server), and the next session starts with what was decided.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from support.hooks import FAKE_CLAUDE, SESSION_ID, Box, decisions_observer
from support.mcp import connect
from support.processes import PYTHON
from support.timeouts import scaled

from om_mcp.config import Config
from om_mcp.engine import Memory
from om_mcp.hook.run import HookOptions, run_hook
from om_mcp.server import build_server
from om_mcp.server.sampling import SamplingBroker
from om_mcp.store import observations
from om_mcp.store.keys import resource_key
from om_mcp.store.sessions import WORKER_LEASE
from om_mcp.store.sqlite import direct
from om_mcp.store.sqlite.driver import run
from om_mcp.testing.fake_server import FakeLLMServer
from om_mcp.testing.transcripts import ClaudeTranscript

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"


def copy_fixture(box: Box) -> Path:
    transcript = box.tmp / f"{SESSION_ID}.jsonl"
    shutil.copy(FIXTURES / "session.jsonl", transcript)
    return transcript


# --------------------------------------------------------------------------------------
# Recording a session
# --------------------------------------------------------------------------------------


def test_the_hook_records_the_session_once(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = copy_fixture(box)
    first = box.hook(box.event("UserPromptSubmit", transcript), "--no-worker")
    assert (first.returncode, first.stdout, first.stderr) == (0, b"", b"")
    rows = box.query("SELECT id, thread_id, resource_id, role FROM messages ORDER BY seq")
    assert len(rows) == 22 and {r[1] for r in rows} == {SESSION_ID}
    assert {r[2] for r in rows} == {str(box.project)}  # the git root of the working directory
    uuids = [json.loads(line).get("uuid") for line in transcript.read_text().splitlines()]
    assert all(r[0] in uuids for r in rows)
    assert box.hook(box.event("Stop", transcript), "--no-worker").returncode == 0
    assert box.query("SELECT COUNT(*) FROM messages") == [(22,)]  # nothing twice
    assert box.query("SELECT source, offset FROM ingest_state") == [
        (f"claude-code:{SESSION_ID}", transcript.stat().st_size)
    ]
    assert box.log_lines() == []


def test_new_turns_a_truncated_and_a_rewritten_transcript(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = ClaudeTranscript(tmp_path / "s.jsonl", "s", str(box.project))
    transcript.turn("first question", "first answer")
    assert box.hook(box.event("UserPromptSubmit", transcript.path, "s"), "--no-worker").returncode == 0
    transcript.turn("second question", "second answer", tool=("Bash", {"command": "ls"}, "a.txt"))
    box.hook(box.event("Stop", transcript.path, "s"), "--no-worker")
    assert box.query("SELECT COUNT(*) FROM messages") == [(6,)]
    lines = transcript.path.read_text().splitlines(keepends=True)
    transcript.path.write_text("".join(lines[:3]))  # truncated below the saved offset
    assert box.hook(box.event("Stop", transcript.path, "s"), "--no-worker").returncode == 0
    other = ClaudeTranscript(tmp_path / "o.jsonl", "s", str(box.project))
    other.turn("a question from the rewrite", "its answer")
    transcript.path.write_text(other.path.read_text() + "".join(lines))  # rewritten from the top
    assert box.hook(box.event("Stop", transcript.path, "s"), "--no-worker").returncode == 0
    texts = [body.strip() for (body,) in box.query("SELECT body FROM messages WHERE role = 'user' ORDER BY seq")]
    assert box.query("SELECT COUNT(*) FROM messages") == [(8,)]
    assert texts == ["first question", "second question", "a question from the rewrite"]
    assert box.log_lines() == []


def test_session_start_prints_the_context_within_its_bound(tmp_path: Path) -> None:
    box = Box(tmp_path)
    start = box.event("SessionStart", None, "new-session", source="startup")
    empty = box.hook(start)
    assert empty.returncode == 0  # no memory yet: one line saying so, and the ids recall needs
    said = json.loads(empty.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "no earlier session is recorded yet" in said and '"new-session"' in said and len(said) < 400
    conn = direct.open_database(str(box.db))
    key = resource_key(str(box.project))
    groups = [
        {
            "kind": "observation",
            "thread_id": "old",
            "first_seq": d,
            "last_seq": d,
            "first_message_id": None,
            "last_message_id": None,
            "tokens": 900,
            "observed_at": None,
            "text": "\n".join(
                [f"Date: Mar {d}, 2026"]
                + [f"* {'🔴' if n % 50 == 0 else '🟡'} (10:00) day {d} decision {n}." for n in range(200)]
            ),
        }
        for d in range(1, 11)
    ]  # 2,010 lines
    direct.write(
        conn,
        lambda c: (
            run(c, observations.ensure_record, key, str(box.project), "old"),
            run(c, observations.insert_groups, key, 0, groups),
        ),
    )
    conn.close()
    printed = box.hook(start)
    assert printed.returncode == 0 and printed.stderr == b""
    output = json.loads(printed.stdout)["hookSpecificOutput"]
    context = output["additionalContext"]
    assert output["hookEventName"] == "SessionStart" and 7000 < len(context) <= 8000
    assert "day 10 decision 199." in context and "day 10 decision 0." in context  # the newest day...
    # ...then the old 🔴 lines, newest first, as far as the room goes (how far depends on the length of the
    # project's path, printed with the ids: a test's temporary folder is longer on a worker)
    old_reds = [f"day {d} decision {n}." in context for d in range(9, 0, -1) for n in (150, 100, 50, 0)]
    assert old_reds[:24] == [True] * 24 and old_reds == sorted(old_reds, reverse=True)
    assert "day 1 decision 51." not in context and "day 9 decision 149." not in context  # no old 🟡 line
    assert "`recall`" in context
    smaller = json.loads(box.hook(start, "--max-chars", "2500").stdout)["hookSpecificOutput"]["additionalContext"]
    assert len(smaller) <= 2500 and "day 10 decision 199." in smaller


def test_gemini_cli_sessions_are_recorded_the_same_way(tmp_path: Path) -> None:
    box = Box(tmp_path)
    fixtures = FIXTURES.parent / "gemini_cli"
    transcript = tmp_path / "session-gemini.jsonl"
    shutil.copy(fixtures / "session.jsonl", transcript)
    hook = json.loads((fixtures / "hooks" / "AfterAgent.json").read_text())
    hook.update(transcript_path=str(transcript), cwd=str(box.project))
    for _ in range(2):
        done = box.hook(hook, "--no-worker", host="gemini-cli")
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    found = box.query("SELECT thread_id, resource_id, COUNT(*) FROM messages GROUP BY 1, 2")
    assert found == [(hook["session_id"], str(box.project), found[0][2])] and found[0][2] >= 4
    assert '"host":"gemini-cli"' in box.query("SELECT metadata FROM threads")[0][0]
    assert box.log_lines() == []


# --------------------------------------------------------------------------------------
# Failing open
# --------------------------------------------------------------------------------------


def test_a_locked_database_costs_the_agent_nothing(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = copy_fixture(box)
    box.hook(box.event("UserPromptSubmit", transcript), "--no-worker")
    holder = sqlite3.connect(box.db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        done = box.hook(box.event("SessionStart", transcript, source="resume"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (line,) = box.log_lines()
    assert "SessionStart" in line and "locked" in line


def test_with_no_model_session_start_names_the_recent_sessions(tmp_path: Path) -> None:
    """No observations (no model): the next session still learns what earlier sessions were, and their ids."""
    box = Box(tmp_path)
    for n, (session, prompts) in enumerate(
        [
            ("s-backup", ["Fix the flaky backup test", "now run the whole suite"]),
            ("s-deploy", ["Deploy the staging server to fly.io", "roll back the release"]),
        ]
    ):
        transcript = ClaudeTranscript(tmp_path / f"{session}.jsonl", session, str(box.project))
        for prompt in prompts:
            transcript.turn(prompt, f"done: {prompt}")
        assert box.hook(box.event("Stop", transcript.path, session), "--no-worker").returncode == 0
        box.query("SELECT 1")  # the second session is the newer one
        conn = sqlite3.connect(box.db)
        conn.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (f"2026-11-0{n + 1}T10:00:00+00:00", session))
        conn.commit()
        conn.close()
    done = box.hook(box.event("SessionStart", None, "s-new", source="startup"), "--no-worker")
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    deploy, backup = context.index("Deploy the staging server"), context.index("Fix the flaky backup test")
    assert deploy < backup  # newest first
    assert "roll back the release" in context and "now run the whole suite" in context  # the last prompts
    assert "4 messages" in context and '"s-deploy"' in context and '"s-backup"' in context
    assert '"s-new"' in context and json.dumps(str(box.project)) in context  # this session's ids, for recall
    assert len(context) < 1000 and box.log_lines() == []


@pytest.mark.parametrize("content", [b"this is not a database at all" * 100, b"SQLite format 3\x00" + b"\x00" * 300])
def test_a_corrupt_database_costs_the_agent_nothing(tmp_path: Path, content: bytes) -> None:
    box = Box(tmp_path)
    box.db.write_bytes(content)
    done = box.hook(box.event("SessionStart", copy_fixture(box), source="startup"))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (line,) = box.log_lines()
    assert "DatabaseRefused" in line or "DatabaseError" in line
    assert box.db.read_bytes() == content  # left as it was


def test_bad_input_is_one_log_line_and_exit_0(tmp_path: Path) -> None:
    box = Box(tmp_path)
    for data, args, expected in [
        ("{not json", (), "not JSON"),
        ('{"hook_event_name": "Stop", "cwd": "/"}', (), "session_id"),
        (box.event("Stop", None), ("--frobnicate",), "bad arguments"),
    ]:
        done = box.hook(data, *args)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), data
        assert expected in box.log_lines()[-1]
    done = subprocess.run([PYTHON, "-m", "om_mcp", "hook", "windsurf"], input=b"{}", capture_output=True, env=box.env)
    assert done.returncode == 0 and "bad arguments" in box.log_lines()[-1]


def test_the_prompt_is_stored_from_user_prompt_submit_once_and_kept_by_an_unfinished_turn(tmp_path: Path) -> None:
    """Claude Code may write the prompt to the transcript after UserPromptSubmit (the hook can still
    block it): the payload's prompt is stored at once, under its prompt_id, and the transcript's copy
    is not stored again; a turn that never ends keeps its prompt."""
    from om_mcp.testing.transcripts import ClaudeTranscript

    box = Box(tmp_path)
    transcript = ClaudeTranscript(tmp_path / "s.jsonl", "s", str(box.project))
    transcript.turn("Hello.", "Hi.")
    first = "Decision: the cache lives in Redis.\n"
    submit = box.event("UserPromptSubmit", transcript.path, "s", prompt=first, prompt_id="p-1")
    assert box.hook(submit, "--no-worker").returncode == 0
    stored = box.query("SELECT id, role, body FROM messages ORDER BY seq")
    assert [r[1] for r in stored] == ["user", "assistant", "user"] and stored[-1][0] == "p-1:prompt"
    assert box.hook(submit, "--no-worker").returncode == 0  # the plugin's and the settings' hook both
    transcript.user(first.strip())
    transcript.assistant("Noted: Redis.")
    assert box.hook(box.event("Stop", transcript.path, "s"), "--no-worker").returncode == 0
    bodies = [r[2] for r in box.query("SELECT id, role, body FROM messages ORDER BY seq")]
    assert sum("cache lives in Redis" in b for b in bodies) == 1 and "Noted: Redis." in bodies[-1]
    unfinished = box.event(
        "UserPromptSubmit", transcript.path, "s", prompt="Decision: ship on Friday.", prompt_id="p-2"
    )
    assert box.hook(unfinished, "--no-worker").returncode == 0  # and the session is killed here
    assert box.hook(box.event("SessionEnd", transcript.path, "s", reason="other"), "--no-worker").returncode == 0
    last = box.query("SELECT id, role, body FROM messages ORDER BY seq")[-1]
    assert last[:2] == ("p-2:prompt", "user") and "ship on Friday" in last[2]
    assert box.hook(box.event("UserPromptSubmit", transcript.path, "s", prompt="/clear"), "--no-worker").returncode == 0
    assert box.query("SELECT id FROM messages ORDER BY seq DESC LIMIT 1") == [("p-2:prompt",)]  # housekeeping
    assert box.log_lines() == []


def test_a_transcript_that_vanished_is_logged_one_never_written_is_not(tmp_path: Path) -> None:
    """`claude mcp list` starts and ends a session that never writes its transcript: no log line for it."""
    box = Box(tmp_path)
    never = box.event("SessionEnd", tmp_path / "never.jsonl", "s-probe", reason="other")
    assert box.hook(never, "--no-worker").returncode == 0 and box.log_lines() == []
    transcript = copy_fixture(box)
    assert box.hook(box.event("Stop", transcript), "--no-worker").returncode == 0
    transcript.unlink()
    done = box.hook(box.event("Stop", transcript), "--no-worker")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    (line,) = box.log_lines()
    assert f"transcript not found: {transcript}" in line


def test_a_postgresql_memory_is_named_not_split(tmp_path: Path) -> None:
    """The hooks write SQLite only: with OM_DB_URL they record nothing elsewhere and say why, unless --db
    names the file."""
    box = Box(tmp_path)
    box.env.pop("OM_DB_PATH")
    box.env["OM_DB_URL"] = "postgresql://om@127.0.0.1:1/memory"
    transcript = copy_fixture(box)
    done = box.hook(box.event("Stop", transcript), "--no-worker")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert "db_url" in box.log_lines()[-1] and not box.db.exists()
    done = box.hook(box.event("Stop", transcript), "--no-worker", "--db", str(box.db))
    assert done.returncode == 0 and box.db.exists()


def test_switched_off_and_uninteresting_events_touch_nothing(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = copy_fixture(box)
    box.env["OM_MCP_HOOKS"] = "off"
    assert box.hook(box.event("UserPromptSubmit", transcript)).returncode == 0
    del box.env["OM_MCP_HOOKS"]
    assert box.hook(box.event("PreToolUse", transcript, tool_name="Bash")).returncode == 0
    assert not box.db.exists() and box.log_lines() == []


def test_the_hook_process_imports_no_model_mcp_or_pydantic_code(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = copy_fixture(box)
    box.hook(box.event("UserPromptSubmit", transcript), "--no-worker")  # creates the database and the cache
    gemini = json.loads((FIXTURES.parent / "gemini_cli" / "hooks" / "AfterAgent.json").read_text())
    gemini.update(transcript_path=str(FIXTURES.parent / "gemini_cli" / "session.jsonl"), cwd=str(box.project))
    for host, event in (
        ("claude-code", box.event("UserPromptSubmit", transcript)),
        ("claude-code", box.event("SessionStart", transcript, source="resume")),
        ("gemini-cli", gemini),
    ):
        done = subprocess.run(
            [PYTHON, "-X", "importtime", "-m", "om_mcp", "hook", host],
            input=json.dumps(event).encode(),
            capture_output=True,
            env=box.env,
            timeout=scaled(60),
        )
        assert done.returncode == 0
        imported = {line.split("|")[-1].strip() for line in done.stderr.decode().splitlines() if "|" in line}
        assert "om_mcp.hook.run" in imported
        heavy = {
            m
            for m in imported
            if m.split(".")[0] in ("mcp", "litellm", "pydantic", "pydantic_core", "anyio", "tiktoken", "httpx", "rich")
        }
        assert heavy == set()
    assert box.log_lines() == []


# --------------------------------------------------------------------------------------
# Observation in the background, and the next session
# --------------------------------------------------------------------------------------


def a_day_of_work(box: Box, transcript: ClaudeTranscript, *hook_args: str, end: bool = True) -> None:
    """A realistic session: prompts, tool calls, replies, each turn recorded by the hooks only."""
    turns = [
        (
            "Where should memories live? Decision: use SQLite in WAL mode, not Postgres.",
            "Agreed. I'll create the schema.",
            ("Write", {"file_path": "schema.sql", "content": "CREATE TABLE m (...)"}, "File created"),
        ),
        (
            "The hook runs on every prompt. Decision: hooks never call a model.",
            "Understood: observation runs in a background worker.",
            ("Bash", {"command": "pytest -q tests/test_hook.py"}, "7 passed in 0.4s"),
        ),
        ("One more. Decision: the worker exits after 60 seconds idle.", "Done; the worker now exits when idle.", None),
    ]
    start = box.hook(box.event("SessionStart", transcript.path, transcript.session_id, source="startup"), *hook_args)
    assert start.returncode == 0 and b"no earlier session is recorded yet" in start.stdout
    for prompt, reply, tool in turns:
        transcript.user(prompt)
        assert (
            box.hook(
                box.event("UserPromptSubmit", transcript.path, transcript.session_id, prompt=prompt), *hook_args
            ).returncode
            == 0
        )
        if tool:
            call = transcript.tool_call(tool[0], tool[1])
            transcript.tool_result(call, tool[2])
        transcript.assistant(reply)
        assert box.hook(box.event("Stop", transcript.path, transcript.session_id), *hook_args).returncode == 0
    if end:
        done = box.hook(
            box.event("SessionEnd", transcript.path, transcript.session_id, reason="prompt_input_exit"), *hook_args
        )
        assert done.returncode == 0


def next_session_context(box: Box) -> str:
    done = box.hook(box.event("SessionStart", None, "tomorrow", source="startup"), "--no-worker")
    assert done.returncode == 0 and done.stdout, box.log_lines()
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]


def assert_remembers_the_decisions(context: str) -> None:
    assert "User decided: use SQLite in WAL mode, not Postgres" in context
    assert "User decided: hooks never call a model" in context
    assert "User decided: the worker exits after 60 seconds idle" in context
    assert "<current-task>\nwire the hook into CI" in context


def test_a_day_in_claude_code_is_remembered_the_next_morning(tmp_path: Path) -> None:
    with FakeLLMServer(decisions_observer) as llm:
        box = Box(tmp_path, OM_MODEL=json.dumps({"model": "openai/fake", "api_base": llm.base_url}))
        transcript = ClaudeTranscript(tmp_path / "day1.jsonl", "day-1", str(box.project / "src"))
        a_day_of_work(box, transcript, "--worker-idle-exit", "2")
        box.wait_for_worker()
        context = next_session_context(box)
        assert len(llm.requests) >= 1
    assert_remembers_the_decisions(context)
    assert f'`recall` tool with thread_id "tomorrow" and resource_id "{box.project}"' in context
    assert box.log_lines() == []
    worker_log = box.worker_log.read_text()
    assert "observing the end of session day-1" in worker_log and "idle for 2s, exiting" in worker_log
    assert box.query("SELECT COUNT(*) FROM messages WHERE thread_id = 'day-1'") == [(10,)]
    assert box.query("SELECT DISTINCT t.name FROM messages m JOIN om_tokenizers t ON t.id = m.counted_by") == [
        ("o200k_base@" + box.query("SELECT name FROM om_tokenizers WHERE name LIKE 'o200k%'")[0][0].split("@")[1],)
    ]


def test_a_long_session_is_observed_while_it_goes_on(tmp_path: Path) -> None:
    """Past the buffer interval the hook starts a worker mid-session; a session started
    alongside already sees what the running one decided."""
    with FakeLLMServer(decisions_observer) as llm:
        box = Box(
            tmp_path,
            OM_MODEL=json.dumps({"model": "openai/fake", "api_base": llm.base_url}),
            OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS="150",
        )
        transcript = ClaudeTranscript(tmp_path / "day1.jsonl", "day-1", str(box.project))
        a_day_of_work(box, transcript, "--worker-idle-exit", "2", end=False)
        box.wait_for_worker()
        assert llm.requests
    done = box.hook(box.event("SessionStart", None, "alongside", source="startup"), "--no-worker")
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "User decided: use SQLite in WAL mode, not Postgres" in context
    assert "observing the end of session" not in box.worker_log.read_text()  # it has not ended
    assert box.log_lines() == []


def test_with_no_key_the_worker_observes_through_the_claude_cli(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "claude").write_text(FAKE_CLAUDE.format(python=sys.executable))
    (folder / "claude").chmod(0o755)
    box = Box(tmp_path)
    del box.env["OM_MODEL"]  # "auto": no key here, so the `claude` CLI (the fake one, first on PATH)
    box.env["PATH"] = f"{folder}{os.pathsep}{box.env['PATH']}"
    transcript = ClaudeTranscript(tmp_path / "day1.jsonl", "day-1", str(box.project))
    a_day_of_work(box, transcript, "--worker-idle-exit", "2")
    box.wait_for_worker()
    assert_remembers_the_decisions(next_session_context(box))
    assert "claude-cli/haiku" in box.query("SELECT payload FROM om_events WHERE type LIKE '%end%' LIMIT 1")[0][0]


@pytest.mark.anyio
async def test_a_running_server_observes_hook_sessions_through_sampling(tmp_path: Path) -> None:
    """The server holds the worker lease, so the hooks start no worker; its poll loop picks up
    the session the hooks recorded and observes it through the client's sampling."""
    box = Box(tmp_path)
    config = Config.model_validate({"db_path": str(box.db), "observational_memory": {"model": "sampling"}})
    broker = SamplingBroker()
    memory = await Memory.open(config, sampling=broker)
    requests: list = []

    async def sampler(context, params):
        from mcp.types import CreateMessageResult, TextContent

        requests.append(params)
        text = "\n".join(m.content.text for m in params.messages if hasattr(m.content, "text"))
        return CreateMessageResult(
            role="assistant",
            model="host-model",
            content=TextContent(type="text", text=decisions_observer({"messages": [{"content": text}]})),
        )

    try:
        async with memory.running(poll_seconds=0.2):
            async with connect(build_server(config, memory), mode="legacy", sampling_callback=sampler) as client:
                await client.call_tool("get_context", {"thread_id": "probe"})  # the client offers sampling
                for _ in range(50):
                    if box.query("SELECT owner FROM om_leases WHERE key = ? AND op = ?", *WORKER_LEASE):
                        break
                    await anyio.sleep(0.1)
                assert box.query("SELECT owner FROM om_leases WHERE key = ? AND op = ?", *WORKER_LEASE) == [
                    (memory.observation.owner,)
                ]
                observed = anyio.Event()

                async def on_event(event: dict) -> None:
                    if event["type"] == "data-om-observation-end":
                        observed.set()

                memory.events.listeners.append(on_event)
                transcript = ClaudeTranscript(tmp_path / "day1.jsonl", "day-1", str(box.project))
                await anyio.to_thread.run_sync(a_day_of_work, box, transcript)
                await observed.wait()  # the server's poll found the session and observed it
                assert box.query("SELECT COUNT(*) FROM om_groups") != [(0,)]
        assert requests
        options = HookOptions("claude-code", worker=False)
        event = json.dumps(box.event("SessionStart", None, "tomorrow", source="startup")).encode()
        output = await anyio.to_thread.run_sync(lambda: run_hook(options, event, box.env))
        assert_remembers_the_decisions(json.loads(output)["hookSpecificOutput"]["additionalContext"])
        assert box.query("SELECT owner FROM om_leases WHERE owner = ?", memory.observation.owner) == []  # released
        # The server drained. Only SessionEnd starts a worker while the lease is held (the server may be going
        # down with the host); this one has no model it can use (OM_MODEL names one without a key): it bows out.
        log = await anyio.to_thread.run_sync(box.wait_for_worker_log, "observation cannot run")
        assert "draining" not in log
    finally:
        await memory.close()
