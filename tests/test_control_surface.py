"""`om-mcp forget`, `edit`, `restore`, `show` and `doctor --secrets` through the real entry point
(a subprocess) on a database filled by the scripted model: each selector, the preview and the
question, what is forgotten gone from the file's bytes, and bad input changing nothing (an
unknown id is exit 4 naming it)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import anyio
import pytest
from support.engine import config
from support.files import digest, raw_bytes
from support.processes import PYTHON, REPO, clean_env, run_om
from support.timeouts import scaled

from om_mcp.config import PrivacyConfig
from om_mcp.engine import Memory
from om_mcp.testing import ScriptedModel

pytestmark = pytest.mark.slow

A, B, C = "quokkavelvet", "marmosetamber", "narwhalcopper"
AWS = "AKIA" + "QWERTYUIOPASDFGH"


def observer(messages, target) -> str:
    """A line per marker word, reversed; the Reflector keeps every line."""
    text = messages[-1]["content"]
    text = text if isinstance(text, str) else " ".join(p.get("text", "") for p in text)
    if "## Memory log to rewrite" in text:
        kept = re.findall(r"^\* .*$", text, re.M)
        return "<observations>\nDate: Mar 2, 2026\n" + "\n".join(kept) + "\n</observations>"
    words = list(dict.fromkeys(re.findall(r"\b[a-z]+(?:velvet|amber|copper)\b", text)))
    body = "\n".join(f"* 🔴 (10:00) heard {w[::-1]}" for w in words) or "* 🟢 (10:00) small talk"
    return f"<observations>\nDate: Mar 2, 2026\n{body}\n</observations>"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "om.db"

    async def fill() -> None:
        made = config(observation__message_tokens=100_000)
        made = made.model_copy(update={"privacy": PrivacyConfig(enabled=False)})  # so a secret gets in
        async with await Memory.open(made, db_path=str(path), client=ScriptedModel(observer)) as memory:
            for words in ((A, B), (C,)):
                turns = [{"role": "user", "content": f"remember {w}"} for w in words]
                await memory.append_messages("t", [*turns, {"role": "assistant", "content": "noted"}])
                await memory.observe("t")
            await memory.reflect("t")
            await memory.append_messages("t", [{"role": "user", "content": f"my key is {AWS}"}])

    anyio.run(fill)
    return path


def om(*args: str, db: Path, **env: str) -> subprocess.CompletedProcess:
    return run_om(*args, "--db", str(db), home=db.parent, **{"OM_OBSERVATIONAL_MEMORY__SCOPE": "thread", **env})


def start(*args: str, db: Path) -> subprocess.Popen:
    """`om` without waiting: refusals that change nothing can run side by side."""
    return subprocess.Popen(
        [PYTHON, "-m", "om_mcp", *args, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**clean_env(db.parent), "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread"},
        cwd=REPO,
    )


def line_ids(db: Path) -> dict[str, str]:
    """The active log's lines by the word they hold, from `show --json`."""
    shown = json.loads(om("show", "t", "--json", db=db).stdout)
    return {
        line["text"].split()[-1]: line["id"]
        for group in shown["observations"]["groups"]
        for line in group["lines"]
        if line["id"]
    }


def test_show_lists_every_line_with_its_id(db: Path):
    shown = om("show", "t", db=db)
    assert shown.returncode == 0
    ids = line_ids(db)
    group, short = ids[A[::-1]].split(".")
    assert f"## group {group}" in shown.stdout
    assert re.search(rf"^  {short}  \* 🔴 \(10:00\) heard {A[::-1]}$", shown.stdout, re.M)


def test_forget_each_selector_from_the_shell(db: Path):
    ids = line_ids(db)
    dry = om("forget", "--observation", ids[A[::-1]], "--dry-run", db=db)
    assert dry.returncode == 0 and f"heard {A[::-1]}" in dry.stdout and "would forget" in dry.stdout
    before = digest(db)
    asked = om("forget", "--observation", ids[A[::-1]], db=db)  # no terminal, no --yes: refused
    assert asked.returncode == 2 and "add --yes" in asked.stderr and digest(db) == before
    done = om("forget", "--observation", ids[A[::-1]], "--yes", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "done": True,
        "selector": "observation",
        "messages": 0,
        "lines": 1,
        "earlier_lines": 1,
        "groups": 0,
        "derived": 0,
        "more": False,
        "erase_pending": False,
    }
    assert A[::-1].encode() not in raw_bytes(db)
    shown = json.loads(om("show", "t", "--json", "--messages", "50", db=db).stdout)
    message = next(m for m in shown["recent_messages"] if B in json.dumps(m))
    gone = om("forget", "--message", message["id"], "--thread", "t", "--yes", db=db)
    assert gone.returncode == 0 and "forgot 1 message" in gone.stdout
    assert B.encode() not in raw_bytes(db)
    matched = om("forget", "--match", C, "--yes", db=db)
    assert matched.returncode == 0 and "forgot 1 message" in matched.stdout
    assert C.encode() not in raw_bytes(db)
    assert C[::-1].encode() in raw_bytes(db)  # the observation says it backwards: not a match


def test_bad_input_changes_nothing_and_names_what_is_unknown(db: Path):
    before = digest(db)
    cases = [
        (
            ("forget", "--observation", "0123456789abcdef.abcdef", "--yes"),
            4,
            "unknown observation '0123456789abcdef.abcdef'",
        ),
        (("forget", "--observation", "not-an-id", "--yes"), 2, "give a line id"),
        (("forget", "--message", "m-nope", "--thread", "t", "--yes"), 4, "unknown message 'm-nope' in thread 't'"),
        (("forget", "--match", "nothing-holds-this", "--yes"), 4, "nothing stored holds 'nothing-holds-this'"),
        (("forget", "--message", "x"), 2, "--message needs --thread"),
        (("edit", "0123456789abcdef.abcdef", "new text"), 4, "unknown observation '0123456789abcdef.abcdef'"),
        (("restore", "t", "--generation", "9"), 4, "unknown generation 9 of thread:t (it has 0, 1)"),
    ]
    running = [(argv, code, message, start(*argv, db=db)) for argv, code, message in cases]  # side by side
    for argv, code, message, proc in running:
        _, err = proc.communicate(timeout=scaled(180))
        assert (proc.returncode, message in err) == (code, True), (argv, err)
    assert digest(db) == before


def test_edit_and_restore_from_the_shell(db: Path):
    ids = line_ids(db)
    edited = om("edit", ids[B[::-1]], "User keeps bees", "--json", db=db)
    assert edited.returncode == 0, edited.stderr
    new = json.loads(edited.stdout)
    assert new["text"] == "* 🔴 (10:00) User keeps bees [user-stated]" and line_ids(db)["[user-stated]"] == new["id"]
    restored = om("restore", "t", "--generation", "0", db=db)
    assert restored.returncode == 0 and "restored generation 0 of 't' as generation 3" in restored.stdout
    # Generation 0 had the line before it was corrected: the correction made since is kept, and said.
    assert "kept, as you stated them since (1):\n  * 🔴 (10:00) User keeps bees [user-stated]" in restored.stdout
    assert B[::-1] not in line_ids(db) and line_ids(db)["[user-stated]"]


def short_ids(shown: str) -> dict[str, str]:
    """The short ids `om-mcp show` prints, by the word their line holds."""
    return {m.group(2): m.group(1) for m in re.finditer(r"^  ([0-9a-f]{6})  \* .* (\S+)$", shown, re.M)}


def test_the_short_id_show_prints_is_taken_by_edit_and_forget(db: Path):
    short = short_ids(om("show", "t", db=db).stdout)
    edited = om("edit", short[B[::-1]], "User keeps bees", "--json", db=db)
    assert edited.returncode == 0, edited.stderr
    assert json.loads(edited.stdout)["id"] == line_ids(db)["[user-stated]"]
    forgot = om("forget", "--observation", short[A[::-1]].upper(), "--thread", "t", "--yes", db=db)
    assert forgot.returncode == 0, forgot.stderr
    assert A[::-1] not in line_ids(db) and A[::-1].encode() not in raw_bytes(db)
    before = digest(db)
    missing = om("edit", "abcdef", "x", db=db)
    assert missing.returncode == 4 and "unknown observation 'abcdef': no line has that id" in missing.stderr
    assert digest(db) == before


def test_a_short_id_two_threads_share_is_refused_naming_both(tmp_path: Path):
    path = tmp_path / "om.db"

    async def fill() -> None:
        async with await Memory.open(config(), db_path=str(path), client=ScriptedModel(observer)) as memory:
            for thread in ("t", "u"):
                await memory.append_messages(thread, [{"role": "user", "content": f"remember {A}"}])
                await memory.observe(thread)

    anyio.run(fill)
    short = short_ids(om("show", "t", db=path).stdout)[A[::-1]]
    assert short == short_ids(om("show", "u", db=path).stdout)[A[::-1]]
    before = digest(path)
    refused = om("edit", short, "User keeps bees", db=path)
    assert refused.returncode == 2 and f"observation_id {short!r} names lines in 2 groups" in refused.stderr
    full = sorted(re.findall(rf"([0-9a-f]{{16}}\.{short}) \(thread:(\w)\)", refused.stderr))
    assert sorted(thread for _, thread in full) == ["t", "u"] and digest(path) == before
    chosen = om("edit", short, "User keeps bees", "--thread", "u", db=path)
    assert chosen.returncode == 0, chosen.stderr
    assert "User keeps bees" in om("show", "u", db=path).stdout
    assert "User keeps bees" not in om("show", "t", db=path).stdout

    async def by_tool() -> None:  # the MCP tools take the short form too
        from support.mcp import connect, ok

        from om_mcp.server import build_server

        async with await Memory.open(config(), db_path=str(path), client=ScriptedModel(observer)) as memory:
            async with connect(build_server(memory.config, memory)) as client:
                out = await ok(client, "update_thread", thread_id="t", observation_id=short, text="User keeps owls")
                assert out["corrected"]["text"].endswith("User keeps owls [user-stated]")
                gone = await ok(client, "delete_thread", thread_id="u", observation_id=short_of(memory, "u"))
                assert gone["lines"] == 1

    def short_of(memory: Memory, thread: str) -> str:
        return short_ids(om("show", thread, db=path).stdout)["[user-stated]"]

    anyio.run(by_tool)


def test_doctor_finds_a_stored_secret_and_the_forget_it_names_removes_it(db: Path):
    found = om("doctor", "--secrets", "--json", db=db)
    assert found.returncode == 1
    report = json.loads(found.stdout)
    (secret,) = report["secrets"]
    assert secret["where"] == "message" and secret["rules"] == {"aws-access-key": 1} and AWS not in found.stdout
    assert secret["remove"].startswith("om-mcp forget --message ")
    removed = om(*secret["remove"].split()[1:], "--yes", db=db)
    assert removed.returncode == 0, removed.stderr
    again = om("doctor", "--secrets", db=db)
    assert again.returncode == 0 and re.search(r"secrets\s+ok\s+none", again.stdout)
    assert AWS.encode() not in raw_bytes(db)


def test_the_readme_section_names_commands_that_answer_help():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Forget, correct, keep private", 1)[1].split("\n## ", 1)[0]
    commands = sorted(set(re.findall(r"om-mcp ([a-z]+)", section)))
    assert {"forget", "edit", "restore", "doctor", "show", "status", "ingest", "import"} <= set(commands)
    for command in commands:
        done = subprocess.run(
            [PYTHON, "-m", "om_mcp", command, "--help"], capture_output=True, text=True, timeout=scaled(60)
        )
        assert done.returncode == 0 and "usage: om-mcp" in done.stdout, command
