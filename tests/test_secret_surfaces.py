"""Secrets planted on every surface an attacker (or a careless paste) can reach, through the real
ways in: the MCP tools, the host hook, `om-mcp ingest`, `om-mcp import` of an export made with
privacy off, and a model that writes a secret it decoded; then the bytes of the SQLite file and
its -wal are searched for each one. `om-mcp doctor --secrets` finds what was stored before.
The same planting, counted, is `benchmarks/attacks.py`'s secret rows."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.engine import role_of, text_of
from support.files import raw_bytes
from support.hooks import SESSION_ID, Box
from support.mcp import connect, ok
from support.processes import PYTHON, clean_env

from om_mcp.config import load_config
from om_mcp.engine import Memory
from om_mcp.server import build_server
from om_mcp.testing import ScriptedModel
from om_mcp.testing.transcripts import ClaudeTranscript

# One secret per surface, each of a class the detectors know, none a placeholder.
GH = "ghp_" + "Zq8Lm2Nx4Vb6Cd1Fg3Hj5Kp7Rt9Wy0Ua2Se4"
GH_DECODED = "ghp_" + "Dd3Ee4Ff5Gg6Hh7Ii8Jj9Kk0Ll1Mm2Nn3Oo4"
SLACK = "xoxb-" + "298347291034-2983472910345-QwErTyUiOpAsDfGhJkLzXcVb"
STRIPE = "sk_live_" + "51HqL8dKq2mN4pR6sT8vX0yZ"
OPENAI = "sk-proj-" + "Qm3Np5Rs7Tu9Vw1Xy3Za5Bc7De9Fg1Hi3Jk5Lm7"
AWS = "AKIA" + "J7ZQ4XK2M9PL3VWN"
URL_PASSWORD = "Wr0ngH0rse"
PG_PASSWORD = "Pgp4ssw0rd7"
ENV_SECRET = "envS3cretValue9"
CLI_PASSWORD = "D0ckerPass42"
PRIVATE = "the unclosed private diagnosis"


def assert_absent(db: Path, *secrets: str) -> None:
    data = raw_bytes(db)
    leaked = [s for s in secrets if s.encode() in data]
    assert leaked == [], f"stored in {db.name} or its -wal: {leaked}"


def memory_config(db: Path, **env: str):
    return load_config(env={"OM_DB_PATH": str(db), "OM_OBSERVATIONAL_MEMORY__ENABLED": "false", **env})


def observing(db: Path, **env: str):
    """Observation in thread scope, synchronously (no buffering), on the scripted model."""
    return load_config(
        env={
            "OM_DB_PATH": str(db),
            "OM_MODEL": "default",
            "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
            "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
            **env,
        }
    )


@pytest.mark.anyio
async def test_every_field_the_tools_store_is_scanned(tmp_path: Path):
    db = tmp_path / "om.db"
    memory = await Memory.open(memory_config(db))
    image = "AKIA" + "B" * 16 + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"  # an image's bytes, a key prefix by chance
    try:
        async with connect(build_server(memory.config, memory)) as client:
            batch = [
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool-call",
                            "tool_name": "WebFetch",
                            "tool_call_id": "c1",
                            "args": {"url": f"https://admin:{URL_PASSWORD}@intranet.example/report"},
                        },
                        {"type": "image", "mime_type": "image/png", "data": image},
                    ],
                    "metadata": {"url": f"https://bot:{URL_PASSWORD}x@hooks.example", "data": {"token": STRIPE}},
                },
                {
                    "role": "tool",
                    "content": [
                        {
                            "type": "tool-result",
                            "tool_name": "WebFetch",
                            "tool_call_id": "c1",
                            "result": {
                                "data": {"url": f"postgres://app:{PG_PASSWORD}@db/app", "body": f"SLACK={SLACK}"}
                            },
                        }
                    ],
                },
                {"role": "user", "content": f"keep this <private>{PRIVATE}, and {OPENAI}"},
            ]
            await ok(
                client,
                "append_messages",
                thread_id="t",
                messages=batch,
                thread_metadata={"title": f"deploy {GH}", "ci": {"url": f"https://ci:{ENV_SECRET}@ci.example"}},
            )
            await ok(client, "update_thread", thread_id="t", title=f"rotate {AWS}", metadata={"data": {"key": AWS}})
            await ok(
                client, "update_working_memory", thread_id="t", memory=f"# Notes\n- docker --password {CLI_PASSWORD}"
            )
            context = await ok(client, "get_context", thread_id="t")
            assert "[redacted:" in json.dumps(context)
        found = await memory.messages("t")
        assert found[0].parts[1]["data"] == image  # the binary payload of an image is stored as sent
    finally:
        await memory.close()
    assert_absent(db, GH, SLACK, STRIPE, OPENAI, AWS, URL_PASSWORD, PG_PASSWORD, ENV_SECRET, CLI_PASSWORD, PRIVATE)
    doctor = subprocess.run(
        [PYTHON, "-m", "om_mcp", "doctor", "--secrets", "--json"],
        env=clean_env(tmp_path, OM_DB_PATH=str(db)),
        capture_output=True,
        timeout=120,
    )
    assert json.loads(doctor.stdout)["secrets"] == [], doctor.stdout  # nothing stored, the image's bytes not taken


def _session(path: Path, project: str, session: str) -> ClaudeTranscript:
    transcript = ClaudeTranscript(path, session, project)
    transcript.user(f"check the report, my key is {OPENAI} <private>{PRIVATE}")
    call = transcript.tool_call("WebFetch", {"url": f"https://admin:{URL_PASSWORD}@intranet.example/r", "prompt": "x"})
    transcript.tool_result(call, "200 OK")
    call = transcript.tool_call("Bash", {"command": f"PGPASSWORD={PG_PASSWORD} psql -h db -c 'select 1'"})
    transcript.tool_result(call, f"# .env\nAPP_SECRET={ENV_SECRET}\nSLACK_TOKEN={SLACK}\n")
    call = transcript.tool_call("Bash", {"command": f"docker login --username ci --password {CLI_PASSWORD}"})
    transcript.tool_result(call, "Login Succeeded")
    transcript.assistant(f"done; the token {GH} works")
    return transcript


def test_what_the_hook_reads_and_ingest_brings_store_no_secret(tmp_path: Path):
    box = Box(tmp_path)
    hooked = _session(tmp_path / f"{SESSION_ID}.jsonl", str(box.project), SESSION_ID)
    done = box.hook(box.event("UserPromptSubmit", hooked.path), "--no-worker")
    assert done.returncode == 0 and box.log_lines() == []
    ingested = _session(tmp_path / "other.jsonl", str(box.project), "other-session")
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "ingest", str(ingested.path), "--no-worker"],
        env=box.env,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert box.query("SELECT COUNT(*) FROM messages")[0][0] >= 14
    assert_absent(box.db, GH, SLACK, OPENAI, URL_PASSWORD, PG_PASSWORD, ENV_SECRET, CLI_PASSWORD, PRIVATE)
    bodies = " ".join(r[0] for r in box.query("SELECT body FROM messages"))
    assert "[redacted:url-password]" in bodies and "[private]" in bodies


# -- what a model writes -----------------------------------------------------------------------------------


def _decoding_model(extra: str = "") -> ScriptedModel:
    """An Observer that decodes the base64 the user pasted (which no detector can read) and writes the
    token it finds into every section it has; a Reflector that keeps it."""

    def reply(messages: list[dict[str, Any]], target: Any) -> str:
        role = role_of(messages)
        if role == "reflector":
            return f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) user's token {GH_DECODED}\n</observations>"
        token = base64.b64decode(text_of(messages[2]).split("encoded:")[1].split()[0]).decode()
        return (
            f"<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) user's GitHub token is {token}\n</observations>\n"
            f"<current-task>use {token}</current-task>\n<suggested-response>try {token}</suggested-response>\n"
            f"<thread-title>token {token}</thread-title>\n<secret>{token}</secret>\n"
            f"<working-memory>\n# About the User\n- token: {token}\n</working-memory>"
        )

    return ScriptedModel(reply)


@pytest.mark.anyio
async def test_what_the_observer_and_reflector_write_is_scanned_before_it_is_committed(tmp_path: Path):
    db = tmp_path / "om.db"
    config = observing(
        db,
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__THREAD_TITLE="true",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__MANAGE_WORKING_MEMORY="true",
        OM_OBSERVATIONAL_MEMORY__OBSERVATION__EXTRACT=json.dumps(
            [{"name": "secret", "metadata_key_path": "facts.secret"}]
        ),
        OM_WORKING_MEMORY__SCOPE="thread",
    )
    encoded = base64.b64encode(GH_DECODED.encode()).decode()
    async with await Memory.open(config, client=_decoding_model()) as memory:
        await memory.append_messages(
            "t", [{"role": "user", "content": f"encoded: {encoded} keep it"}, {"role": "assistant", "content": "ok"}]
        )
        outcome = await memory.observe("t")
        assert outcome.ran, outcome
        (end,) = [e for e in outcome.events if e["type"].endswith("-end")]
        assert end["redactions"]["github-token"] >= 5
        log = (await memory.observations("t"))["text"]
        assert "user's GitHub token is [redacted:github-token]" in log
        assert (await memory.thread("t")).title == "token [redacted:github-token]"
        assert "[redacted:github-token]" in str((await memory.get_working_memory("t")).memory)
        assert (await memory.reflect("t")).ran
    assert encoded.encode() in raw_bytes(db)  # what the user pasted is stored: no detector reads base64
    assert_absent(db, GH_DECODED)


@pytest.mark.anyio
async def test_a_failure_quoting_the_model_stores_no_secret(tmp_path: Path):
    db = tmp_path / "om.db"
    config = observing(db, OM_OBSERVATIONAL_MEMORY__CALL_POLICY__BACKOFF_INITIAL_SECONDS="0")
    refusal = f"I cannot keep {GH_DECODED} or {SLACK} in a log."  # no observations: an unusable answer
    async with await Memory.open(config, client=ScriptedModel(lambda messages, target: refusal)) as memory:
        await memory.append_messages("t", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
        outcome = await memory.observe("t")
        assert not outcome.ran and "[redacted:github-token]" in (outcome.error or ""), outcome
    assert_absent(db, GH_DECODED, SLACK)


# -- an import --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_export_made_with_privacy_off_imports_no_secret(tmp_path: Path):
    """Every record of om-mcp's own export: messages, and besides them titles, thread metadata,
    working memory (thread and resource), observation text, tasks and extracted values."""
    old = tmp_path / "old.db"
    config = observing(
        old, OM_PRIVACY__ENABLED="false", OM_OBSERVATIONAL_MEMORY__OBSERVATION__EXTRACT=json.dumps([{"name": "secret"}])
    )
    encoded = base64.b64encode(GH_DECODED.encode()).decode()
    export = tmp_path / "memory.jsonl"
    async with await Memory.open(config, client=_decoding_model()) as memory:
        await memory.append_messages(
            "t",
            [{"role": "user", "content": f"encoded: {encoded} and {OPENAI}"}, {"role": "assistant", "content": "ok"}],
            thread_metadata={"title": f"about {SLACK}", "ci": {"url": f"https://ci:{URL_PASSWORD}@ci.example"}},
        )
        await memory.update_working_memory("t", f"# Notes\n- stripe {STRIPE}")
        assert (await memory.observe("t")).ran
        with export.open("w", encoding="utf-8") as out:
            await memory.export_to(out)
    text = export.read_text()
    for secret in (GH_DECODED, OPENAI, SLACK, URL_PASSWORD, STRIPE):
        assert secret in text, secret  # the export holds them all
    new = tmp_path / "new.db"
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "import", str(export)],
        env=clean_env(tmp_path, OM_DB_PATH=str(new)),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert_absent(new, GH_DECODED, OPENAI, SLACK, URL_PASSWORD, STRIPE)
    conn_text = raw_bytes(new)
    assert b"[redacted:github-token]" in conn_text and b"[redacted:slack-token]" in conn_text


# -- found after the fact ---------------------------------------------------------------------------------


def test_doctor_finds_a_secret_under_any_key_of_a_message_or_a_thread(tmp_path: Path):
    db = tmp_path / "om.db"
    env = clean_env(tmp_path, OM_DB_PATH=str(db), OM_PRIVACY__ENABLED="false", OM_OBSERVATIONAL_MEMORY__ENABLED="false")
    chat = tmp_path / "chat.jsonl"
    call = {"id": "c1", "type": "function", "function": {"name": "WebFetch", "arguments": ""}}
    call["function"]["arguments"] = json.dumps({"url": f"https://admin:{URL_PASSWORD}@intranet/x"})
    chat.write_text(json.dumps({"role": "assistant", "content": None, "tool_calls": [call]}) + "\n")
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "ingest", str(chat), "--no-worker"], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert URL_PASSWORD.encode() in raw_bytes(db)
    doctor = subprocess.run(
        [PYTHON, "-m", "om_mcp", "doctor", "--secrets", "--json"], env=env, capture_output=True, timeout=120
    )
    (finding,) = json.loads(doctor.stdout)["secrets"]
    assert finding["where"] == "message" and finding["rules"] == {"url-password": 1}
    assert URL_PASSWORD not in doctor.stdout.decode()
