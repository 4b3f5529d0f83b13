"""The shell commands through their real entry point (`python -m om_mcp ...`, a subprocess),
against a database filled through the engine by the scripted model; the model-bound ones
against the scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.testing.fake_server import FakeLLMServer
from om_mcp.testing.status_demo import _config_file, fill

pytestmark = pytest.mark.slow
EXPORTS = REPO / "tests" / "fixtures" / "exports"


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> tuple[Path, Path]:
    """(database, config) of a scripted run: 4 threads in 2 resources, observed and reflected."""
    folder = tmp_path_factory.mktemp("commands")
    db = folder / "filled.db"
    asyncio.run(fill(db, latency=(0.001, 0.005)))
    return db, _config_file(folder)


@pytest.fixture
def db(filled, tmp_path) -> Path:
    """A copy of the filled database that a test may change."""
    copy = tmp_path / "memory.db"
    shutil.copy(filled[0], copy)
    return copy


def om(
    *args: str, db: Path | None = None, config: Path | None = None, env: dict | None = None, tmp: Path | None = None
) -> subprocess.CompletedProcess:
    where = [*(["--db", str(db)] if db else []), *(["--config", str(config)] if config else [])]
    # Never the working directory: that is the checkout, and the child's HOME is made in `folder`.
    folder = tmp or (db.parent if db else Path(tempfile.mkdtemp(prefix="om-cmd-")))
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", *args, *where],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        env={**clean_env(folder), **(env or {})},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def data(done: subprocess.CompletedProcess):
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def data_or_failed(done: subprocess.CompletedProcess):
    """The JSON of a command that may exit 1 (a check failed) but must not crash."""
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_no_model_is_a_warning_not_a_failure(tmp_path):
    """A fresh install with no key and no logged-in claude: doctor warns and exits 0."""
    done = om("doctor", "--json", db=tmp_path / "none.db", tmp=tmp_path, env={"OM_MODEL": "auto"})
    assert done.returncode == 0, done.stdout + done.stderr
    model = next(c for c in json.loads(done.stdout)["checks"] if c["check"] == "model")
    assert model["result"] == "warn" and "not ready" in model["detail"]
    nonsense = om("doctor", "--json", db=tmp_path / "none.db", tmp=tmp_path, env={"OM_MODEL": "nonsense"})
    model = next(c for c in json.loads(nonsense.stdout)["checks"] if c["check"] == "model")
    assert nonsense.returncode == 0 and model["result"] == "warn"
    assert "litellm does not know the model 'nonsense'" in model["detail"]


def fake_model(server: FakeLLMServer) -> dict[str, str]:
    return {"OM_OBSERVATIONAL_MEMORY__MODEL": json.dumps({"model": "openai/fake", "api_base": server.base_url})}


def test_status_threads_show_and_search_read_the_memory(filled):
    db, config = filled
    status = data(om("status", "--json", db=db, config=config))
    assert status["counts"]["threads"] == 4 and status["counts"]["messages"] == 154
    assert status["pending"]["scope"] == "thread" and status["pending"]["unobserved_tokens"] > 0
    assert not status["model"]["enabled"]  # the demo config keeps observation off
    assert [t["thread"] for t in status["threads"]][:1] == ["t-lisbon"]
    assert status["threads"][0]["last_cycle"]["what"] in ("buffered", "observed", "activated", "reflected")
    human = om("status", db=db, config=config)
    assert human.returncode == 0 and "154 messages" in human.stdout and "t-lisbon" in human.stdout

    threads = data(om("threads", "--resource", "alice", "--json", db=db, config=config))
    assert [t["thread"] for t in threads] == ["t-lisbon", "t-postgres", "t-sourdough"]
    assert threads[0]["generation"] >= 1 and threads[0]["observation_tokens"] > 0
    table = om("threads", db=db, config=config).stdout.splitlines()
    assert table[0].split("\t")[:3] == ["thread", "resource", "title"] and len(table) == 5

    shown = data(om("show", "t-lisbon", "--generations", "--messages", "3", "--json", db=db, config=config))
    generations = shown["observations"]["generations"]
    assert len(generations) >= 2 and "_range: `t-lisbon-" in generations[0]["text"]
    assert "vegetarian" in shown["working_memory"]["text"] and shown["current_task"]
    assert [m["id"] for m in shown["recent_messages"]] == ["t-lisbon-93", "t-lisbon-94", "t-lisbon-95"]
    text = om("show", "t-lisbon", db=db, config=config).stdout
    assert "observation log, generation" in text and "working memory (resource alice)" in text

    found = data(om("search", "Sintra Pena", "--json", db=db, config=config))
    assert found and all(r["thread_id"].startswith("t-") for r in found if r["source"] == "message")
    assert {r["source"] for r in found} == {"message", "observation"}  # both kinds in the default view
    assert data(om("search", "deploy", "--resource", "team-infra", "--json", db=db, config=config)) is not None


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("show", "nope"), 4, "unknown thread 'nope'"),
        (("threads", "--resource", "nobody"), 4, "unknown resource 'nobody'"),
        (("search", "x", "--resource", "nobody"), 4, "unknown resource 'nobody'"),
        (("observe", "nope"), 4, "unknown thread 'nope'"),
        (("forget", "--thread", "nope", "--yes"), 4, "unknown thread 'nope'"),
        (("export", "--resource", "nobody"), 4, "unknown resource 'nobody'"),
        (("status", "--threads", "x"), 2, "invalid int value"),
        (("forget",), 2, "give --thread T or --resource R"),
    ],
)
def test_exit_codes_mean_something(filled, args, code, says):
    db, config = filled
    done = om(*args, db=db, config=config)
    assert done.returncode == code and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3 and "Traceback" not in done.stderr


def test_a_missing_database_a_bad_config_and_a_foreign_file_are_refused(tmp_path):
    missing = om("status", db=tmp_path / "none.db", tmp=tmp_path)
    assert missing.returncode == 4 and "no database at" in missing.stderr
    assert not (tmp_path / "none.db").exists()  # looking never creates one
    bad = om("status", db=tmp_path / "none.db", env={"OM_OBSERVATIONAL_MEMORY__SCOPE": "galaxy"}, tmp=tmp_path)
    assert bad.returncode == 2 and "observational_memory.scope" in bad.stderr
    foreign = tmp_path / "foreign.db"
    foreign.write_bytes(b"not a database at all" * 100)
    refused = om("threads", db=foreign, tmp=tmp_path)
    assert refused.returncode == 3 and "not a SQLite database" in refused.stderr
    assert "exit codes: 0 ok, 1 failed, 2 bad arguments" in om("status", "--help").stdout


def test_forget_erases_the_text_from_the_file(db, filled):
    config = filled[1]
    asked = om("forget", "--thread", "t-sourdough", db=db, config=config)
    assert asked.returncode == 2 and "--yes" in asked.stderr  # no terminal to ask on
    done = data(om("forget", "--thread", "t-sourdough", "--yes", "--json", db=db, config=config))
    assert done == {"thread_id": "t-sourdough", "threads": 1, "messages": 8, "erase_pending": False}
    assert om("show", "t-sourdough", db=db, config=config).returncode == 4
    gone = om("forget", "--resource", "team-infra", "--yes", db=db, config=config)
    assert gone.returncode == 0 and "1 thread, 30 messages" in gone.stdout
    raw = b"".join(Path(str(db) + s).read_bytes() for s in ("", "-wal", "-shm") if Path(str(db) + s).exists())
    assert b"t-sourdough-" not in raw and b"t-deploy-" not in raw and b"team-infra" not in raw
    assert b"t-lisbon-" in raw
    assert data(om("status", "--json", db=db, config=config))["counts"]["threads"] == 2


@pytest.mark.timeout(300)  # five commands, each importing litellm: minutes on a loaded machine
def test_doctor_checks_everything_and_tells_what_is_wrong(db, filled, tmp_path):
    config = filled[1]
    report = data(om("doctor", "--json", db=db, config=config))
    assert report["ok"] and [c["check"] for c in report["checks"]] == [
        "config",
        "database",
        "integrity",
        "search index",
        "running totals",
        "model",
    ]
    with FakeLLMServer() as server:
        called = data(om("doctor", "--model", "--json", db=db, env=fake_model(server)))
        assert len(server.requests) == 1
    call = called["checks"][-1]
    assert call["check"] == "model call" and call["result"] == "ok" and "answered" in call["detail"]
    offline = om("doctor", "--model", db=db, env={"OM_MODEL": "gemini/gemini-2.5-flash"})
    assert offline.returncode == 1 and "GEMINI_API_KEY" in offline.stdout
    with FakeLLMServer() as server:
        # A fallback list: each candidate is called and reported on its own line.
        both = json.dumps([{"model": "openai/fake", "api_base": server.base_url}, "nonsense"])
        each = data_or_failed(om("doctor", "--model", "--json", db=db, env={"OM_MODEL": both}))
    rows = {c["check"]: c for c in each["checks"]}
    assert rows["model 1"]["result"] == "ok" and rows["model 2"]["result"] == "warn"
    assert "litellm does not know the model 'nonsense'" in rows["model 2"]["detail"]
    assert rows["model call 1"]["result"] == "ok" and "answered" in rows["model call 1"]["detail"]
    assert rows["model call 2"]["result"] == "FAIL" and "nonsense" in rows["model call 2"]["detail"]

    damaged = tmp_path / "damaged.db"
    raw = bytearray(db.read_bytes())
    page = int.from_bytes(raw[16:18], "big")
    raw[page * 2 : page * 6] = os.urandom(page * 4)
    damaged.write_bytes(bytes(raw))
    broken = om("doctor", db=damaged, config=config)
    assert broken.returncode == 3 and "FAIL" in broken.stdout


def test_observe_and_reflect_run_a_cycle_now(db):
    with FakeLLMServer() as server:
        env = {**fake_model(server), "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread"}
        unobserved = data(om("show", "t-postgres", "--json", db=db, env=env))["unobserved_tokens"]
        observed = data(om("observe", "t-postgres", "--json", db=db, env=env))
        # every unobserved message goes in, over as many cycles as the backlog needs
        assert observed["ran"] and observed["cycles"] >= 1 and observed["tokens_in"] == unobserved > 2000
        shown = data(om("show", "t-postgres", "--json", db=db, env=env))
        assert shown["unobserved_tokens"] == 0 and shown["observations"]["groups"]
        again = om("observe", "t-postgres", db=db, env=env)
        assert again.returncode == 0 and "no unobserved messages" in again.stderr
        reflected = data(om("reflect", "t-postgres", "--json", db=db, env=env))
        assert reflected["ran"] and reflected["operation"] == "reflect"
        assert data(om("show", "t-postgres", "--json", db=db, env=env))["generation"] == 1
    no_model = om(
        "observe",
        "t-sourdough",
        db=db,
        env={"OM_MODEL": "gemini/gemini-2.5-flash", "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread"},
    )
    assert no_model.returncode == 1 and "GEMINI_API_KEY" in no_model.stderr
    off = om("observe", "t-sourdough", db=db, env={"OM_OBSERVATIONAL_MEMORY__ENABLED": "false"})
    assert off.returncode == 2 and "observational_memory.enabled" in off.stderr


APPENDER = """
import sys, anyio
from om_mcp.config import Config
from om_mcp.engine.memory import Memory
async def main():
    memory = await Memory.open(Config(db_path=sys.argv[1], observational_memory={"enabled": False}))
    n = 0
    while True:
        await memory.append_messages("live", [{"id": f"a{n}", "role": "user", "content": f"appended {n} " * 50}],
                                     resource_id="alice")
        n += 1
        if n == 5:
            print("appending", flush=True)
anyio.run(main)
"""


def more_than(db: Path, count: int) -> None:
    """Until the database holds more than `count` messages."""
    deadline = time.monotonic() + scaled(60)
    while True:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=scaled(5))
        try:
            if conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] > count:
                return
        finally:
            conn.close()
        assert time.monotonic() < deadline, f"the writer never went past {count} messages"
        time.sleep(0.02)


def test_backup_is_consistent_while_another_process_appends(db, tmp_path):
    writer = subprocess.Popen(
        [PYTHON, "-c", APPENDER, str(db)], stdout=subprocess.PIPE, text=True, cwd=REPO, env=clean_env(tmp_path)
    )
    try:
        assert writer.stdout.readline().strip() == "appending"
        copies = []
        for n in range(3):
            target = tmp_path / f"copy{n}.db"
            done = data(om("backup", str(target), "--json", db=db))
            assert done["file"] == str(target) and done["bytes"] == target.stat().st_size
            copies.append((target, done["messages"]))
            more_than(db, done["messages"])  # the writer went on past this copy before the next one
    finally:
        writer.terminate()
        writer.wait(10)
    counts = [messages for _, messages in copies]
    assert counts == sorted(counts) and counts[-1] > counts[0] > 154  # taken while the writer went on
    for target, messages in copies:
        conn = sqlite3.connect(target)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        live = conn.execute("SELECT message_count FROM threads WHERE id = 'live'").fetchone()[0]
        ids = conn.execute("SELECT COUNT(*) FROM messages WHERE thread_id = 'live'").fetchone()[0]
        conn.close()
        assert stored == messages and live == ids  # one snapshot: counters agree with rows
        assert data(om("doctor", "--json", db=target))["ok"]
    exists = om("backup", str(copies[0][0]), db=db)
    assert exists.returncode == 2 and "--force" in exists.stderr
    assert om("backup", str(copies[0][0]), "--force", db=db).returncode == 0


def test_export_then_import_moves_the_memory(filled, tmp_path):
    db, config = filled
    exported = om("export", db=db, config=config)
    assert exported.returncode == 0 and "exported" in exported.stderr
    lines = exported.stdout.splitlines()
    assert json.loads(lines[0])["type"] == "om-mcp-export" and json.loads(lines[-1])["type"] == "end"
    dump = tmp_path / "memory.jsonl"
    dump.write_text(exported.stdout)
    assert om("export", "-o", str(tmp_path / "other.jsonl"), db=db, config=config).returncode == 0
    assert (tmp_path / "other.jsonl").read_text().splitlines()[1:] == lines[1:]

    new = tmp_path / "new" / "memory.db"
    first = data(om("import", str(dump), "--json", db=new, config=config))
    assert first["format"] == "om-mcp" and first["added"]["message"] == 154 and not first["skipped"]
    for thread in ("t-lisbon", "t-deploy"):  # observed and reflected; another resource
        before = data(om("show", thread, "--generations", "--messages", "50", "--json", db=db, config=config))
        after = data(om("show", thread, "--generations", "--messages", "50", "--json", db=new, config=config))
        assert after == {**before, "last_cycle": None}  # events are a log of what happened: not exported
    for query, resource in (("Sintra train", "alice"), ("runbook deploy", "team-infra")):
        args = ("search", query, "--resource", resource, "--json")
        assert data(om(*args, db=new, config=config)) == data(om(*args, db=db, config=config))
    second = data(om("import", str(dump), "--json", db=new, config=config))
    assert not second["added"] and second["skipped"]["message"] == 154

    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-1]) + "\n")
    empty = tmp_path / "empty" / "memory.db"
    refused = om("import", str(cut), db=empty, config=config)
    assert refused.returncode == 1 and "cut short" in refused.stderr and "nothing was imported" in refused.stderr
    assert data(om("status", "--json", db=empty, config=config))["counts"]["messages"] == 0


def test_claude_and_chatgpt_exports_become_threads_with_their_dates(tmp_path):
    new = tmp_path / "memory.db"
    claude = data(om("import", str(EXPORTS / "claude" / "conversations.json"), "--resource", "ada", "--json", db=new))
    assert claude["format"] == "claude" and claude["added"] == {"message": 7, "thread": 2}
    assert claude["skipped"] == {"empty conversation": 1}
    threads = {t["thread"]: t for t in data(om("threads", "--json", db=new))}
    sourdough = threads["claude-5f1d8a3e-2c4b-4e8f-9a61-0b7c3d2e1f40"]
    assert (sourdough["title"], sourdough["resource"], sourdough["messages"]) == (
        "Sourdough starter schedule",
        "ada",
        3,
    )
    assert (sourdough["created_at"], sourdough["updated_at"]) == (
        "2024-03-02T08:14:22.918734+00:00",
        "2024-03-02T08:31:05.112233+00:00",
    )
    again = data(om("import", str(EXPORTS / "claude" / "conversations.json"), "--resource", "ada", "--json", db=new))
    assert again["added"] == {} and again["skipped"]["message"] == 7

    chatgpt = om("import", str(EXPORTS / "chatgpt" / "conversations.json"), db=new)
    assert chatgpt.returncode == 0 and "10 messages, 2 threads" in chatgpt.stdout
    listed = {t["thread"]: t for t in data(om("threads", "--resource", "default", "--json", db=new))}
    assert listed["chatgpt-66a1b2c3-d4e5-8f00-a1b2-c3d4e5f60718"]["created_at"] == "2024-06-10T06:13:20+00:00"
    found = data(om("search", "index time ranges", "--json", db=new))
    assert found[0]["thread_id"] == "chatgpt-66a1b2c3-d4e5-8f00-a1b2-c3d4e5f60718"
    # A file that is not what it should be failed (1); 2 is for bad arguments only.
    assert om("import", str(EXPORTS / "chatgpt" / "conversations.json"), "--format", "om-mcp", db=new).returncode == 1
    not_export = tmp_path / "x.json"
    not_export.write_text('[{"hello": 1}]')
    assert om("import", str(not_export), db=new).returncode == 1
    assert om("import", str(not_export), "--max-conversation-mb", "0", db=new).returncode == 2


def test_import_can_observe_now(tmp_path):
    new = tmp_path / "memory.db"
    with FakeLLMServer() as server:
        env = {**fake_model(server), "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread"}
        done = data(
            om("import", str(EXPORTS / "chatgpt" / "conversations.json"), "--observe", "--json", db=new, env=env)
        )
        assert done["observed_tokens"] > 0 and done["observe_failures"] == [] and server.requests
        shown = data(om("show", "chatgpt-77b2c3d4-e5f6-9011-b2c3-d4e5f6071829", "--json", db=new, env=env))
        assert shown["unobserved_tokens"] == 0 and shown["observations"]["groups"]


def test_import_draws_a_progress_bar_on_a_terminal(tmp_path):
    """Stdout stays data; the bar (rich) goes to stderr, a terminal here."""
    main, follower = pty.openpty()
    proc = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "om_mcp",
            "import",
            str(EXPORTS / "claude" / "conversations.json"),
            "--db",
            str(tmp_path / "memory.db"),
        ],
        stdout=subprocess.PIPE,
        stderr=follower,
        text=True,
        cwd=REPO,
        env={**clean_env(tmp_path), "TERM": "xterm", "COLUMNS": "100"},
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    out, _ = proc.communicate(timeout=scaled(60))
    os.close(main)
    assert proc.returncode == 0 and out.startswith("imported 7 messages, 2 threads")
    text = drawn.decode(errors="replace")
    size = (EXPORTS / "claude" / "conversations.json").stat().st_size  # the bar follows the bytes read
    assert "importing conversations" in text and f"{size}/{size}" in text and "━" in text
