"""`om-mcp ingest FILE`: transcripts of three formats into memory, idempotently,
and in agreement with what the hooks recorded."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.processes import PYTHON, clean_env
from support.timeouts import scaled

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
SESSION_ID = "cc9270be-2e3e-4e60-aa7f-4af09db5ee17"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path, OM_DB_PATH=str(tmp_path / "memory.db"), XDG_CACHE_HOME=str(tmp_path / "cache"))


def ingest(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", "ingest", *args], capture_output=True, text=True, env=env, timeout=scaled(120), cwd=cwd
    )


def rows(tmp_path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(tmp_path / "memory.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_claude_code_transcript_twice_and_after_the_hook(tmp_path: Path, env) -> None:
    transcript = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "claude_code" / "session.jsonl", transcript)
    hook = {
        "session_id": SESSION_ID,
        "transcript_path": str(transcript),
        "cwd": "/home/user/project",
        "hook_event_name": "Stop",
    }
    subprocess.run(
        [PYTHON, "-m", "om_mcp", "hook", "claude-code", "--no-worker"],
        input=json.dumps(hook),
        text=True,
        env=env,
        check=True,
        timeout=scaled(60),
    )
    first = ingest(env, str(transcript), "--json", "--no-worker")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary == {
        "thread_id": SESSION_ID,
        "resource_id": "/home/user/project",
        "appended": 0,
        "skipped": 22,
        "refused": 0,
        "forgotten": 0,
        "unreadable": 0,
        "worker": None,
    }  # the hook had stored every one of them already
    assert rows(tmp_path, "SELECT COUNT(*) FROM messages") == [(22,)]
    other = ingest(env, str(transcript), "--thread", "copy", "--resource", "elsewhere", "--no-worker")
    assert (
        other.returncode == 0
        and "22 new message(s), 0 already stored, in thread copy of resource elsewhere" in other.stdout
    )
    assert rows(tmp_path, "SELECT metadata FROM threads WHERE id = 'copy'")[0][0].count('"ended_at"') == 1


def test_with_no_model_it_says_nothing_is_observed_and_starts_no_worker(tmp_path: Path, env) -> None:
    transcript = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "claude_code" / "session.jsonl", transcript)
    # No OPENAI_API_KEY: not ready, whatever is on PATH; and a threshold the transcript passes, so work is due.
    no_key = {**env, "OM_MODEL": "openai/gpt-4o-mini", "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "100"}
    done = ingest(no_key, str(transcript))
    assert done.returncode == 0, done.stderr
    assert "22 new message(s)" in done.stdout and "observing in the background" not in done.stdout
    assert "not observed now: openai/gpt-4o-mini needs OPENAI_API_KEY" in done.stdout
    assert rows(tmp_path, "SELECT COUNT(*) FROM om_leases") == [(0,)]  # no worker was started for it
    again = json.loads(ingest(no_key, str(transcript), "--json").stdout)
    assert again["worker"] is None and again["not_observed"].startswith("openai/gpt-4o-mini needs OPENAI_API_KEY")


def test_openai_messages_and_gemini_sessions(tmp_path: Path, env) -> None:
    chat = tmp_path / "support-chat.jsonl"
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "My order 1234 never arrived."},
                {"role": "assistant", "content": "Sorry! I have re-sent order 1234."},
            ]
        )
        + "\n"
    )
    done = ingest(env, str(chat), "--json", "--no-worker")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["appended"] == 3
    assert rows(tmp_path, "SELECT thread_id, resource_id, COUNT(*) FROM messages GROUP BY 1, 2") == [
        ("support-chat", "default", 3)
    ]
    again = json.loads(ingest(env, str(chat), "--json", "--no-worker").stdout)
    assert (again["appended"], again["skipped"]) == (0, 3)

    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    gemini = ingest(env, str(FIXTURES / "gemini_cli" / "session.jsonl"), "--json", "--no-worker", cwd=project)
    assert gemini.returncode == 0, gemini.stderr
    summary = json.loads(gemini.stdout)
    assert summary["thread_id"] == "9b29d17c-6ddd-4d9a-9d70-d1742264f4fb" and summary["resource_id"] == str(project)
    assert summary["appended"] > 2


def test_what_cannot_be_read_is_said_in_one_line(tmp_path: Path, env) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    done = ingest(env, str(odd))
    assert done.returncode == 1 and done.stderr.strip().endswith(
        "format not recognised: give --format claude-code|gemini-cli|copilot-cli|openai-messages"
    )  # each host whose adapter reads a transcript file, and the OpenAI-style messages
    missing = ingest(env, str(tmp_path / "nope.jsonl"), "--format", "claude-code")
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_long_tool_output_is_trimmed_by_the_configured_rule(tmp_path: Path, env) -> None:
    transcript = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "claude_code" / "session.jsonl", transcript)
    for thread, extra in (("default", []), ("short", ["--tool-output-chars", "400"])):
        done = ingest(env, str(transcript), "--thread", thread, "--no-worker", *extra)
        assert done.returncode == 0, done.stderr
    sql = "SELECT body, metadata FROM messages WHERE thread_id = '{}' AND body LIKE '%0000 the quick brown fox%'"
    [(default, default_meta)] = rows(tmp_path, sql.format("default"))
    [(short, short_meta)] = rows(tmp_path, sql.format("short"))
    assert len(short) < 600 < 1500 < len(default) < 2600
    for body in (short, default):  # the start of the output and its end are both kept
        assert "0000 the quick brown fox" in body and "0149 the quick brown fox" in body
    for meta, kept in ((short_meta, 400), (default_meta, 2000)):  # each cut is recorded
        [cut] = json.loads(meta)["trimmed"]
        assert cut["kept_chars"] == kept and cut["original_chars"] > 2600


def test_ingest_goes_on_past_an_entry_it_cannot_take_and_counts_it(tmp_path: Path, env) -> None:
    """A line that is not JSON, a line that is not a message, and an entry changed since it was stored
    are each counted and skipped; every other message of the file is stored."""
    bad = tmp_path / "chat.jsonl"
    bad.write_text(
        '{"role": "user", "content": "hi"}\n{"role": "wizard", "content": "x"}\nnot json at all\n'
        '{"role": "assistant", "content": "hello"}\n'
    )
    done = ingest(env, str(bad), "--json", "--no-worker")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["appended"], summary["unreadable"]) == (2, 2)
    said = done.stderr.strip().splitlines()
    assert len(said) == 2 and "line 2: role" in said[0] and "line 3: not JSON" in said[1], said
    transcript = tmp_path / "session.jsonl"
    lines = (FIXTURES / "claude_code" / "session.jsonl").read_text().splitlines()
    transcript.write_text("\n".join(lines) + "\n")
    first = json.loads(ingest(env, str(transcript), "--json", "--no-worker").stdout)
    assert first["appended"] == 22
    # The same session, a transcript line cut in half and one prompt's text changed since it was stored:
    at = next(
        n
        for n, line in enumerate(lines)
        if json.loads(line).get("message", {}).get("content") == "please run ls for me\n"
    )
    entry = json.loads(lines[at])
    entry["message"]["content"] = "a prompt edited after it was stored"
    edited = [json.dumps(entry) if n == at else line for n, line in enumerate(lines)]
    edited.insert(5, lines[5][: len(lines[5]) // 2])
    transcript.write_text("\n".join(edited) + "\n")
    again = ingest(env, str(transcript), "--json", "--no-worker")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert (summary["appended"], summary["refused"], summary["unreadable"], summary["skipped"]) == (0, 1, 1, 21)
    cut_at = sum(len(line.encode()) + 1 for line in edited[:5])
    assert again.stderr.strip() == f"om-mcp: {transcript}: the transcript line at byte {cut_at:,} is not JSON; skipped"
    assert rows(tmp_path, "SELECT COUNT(*) FROM messages WHERE thread_id = '" + SESSION_ID + "'") == [(22,)]
    plain = ingest(env, str(transcript), "--no-worker")
    assert "1 kept as stored (changed since)" in plain.stdout and "1 unreadable line(s) skipped" in plain.stdout
