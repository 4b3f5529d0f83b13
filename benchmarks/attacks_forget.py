"""Attack row "forget": forgotten text back after `om-mcp ingest`, the hook and `om-mcp import` (goal 0 of 3
each), and what `forget --match` misses or pretends (metadata, a file's data, NFD spellings, a reader open).

A session is recorded by the real Claude Code hook (`om-mcp hook claude-code`, no worker, no model) in a
throwaway project, home and database; an export is taken; three secrets are forgotten with
`om-mcp forget --match`. Then, as a user would:
- `om-mcp ingest` of the same transcript;
- the hook re-reading it rewritten (shortened, so it starts from the top, then grown by a turn), and a resumed
  session copying the conversation under new ids;
- `om-mcp import` of the export made before the forget.
After each, the secrets still in the bytes of the database file and its -wal are counted. Then the match
surfaces (a secret in message metadata, in a file part's base64 data, spelled in NFD) and the erase with a
reader holding an older snapshot (the command's exit code, and the bytes after `forget --finish`).

Then the copies a forget used to miss (`copies`), each on a database of its own (goal 0 back each):
- text only the working-memory history holds (a thread's, a resource's, the person layer's): the exit code of
  `om-mcp forget --match` (goal 0, not 4 "nothing stored holds") and the words in `om-mcp show --as-of`'s
  output and in the bytes after it;
- a tool call and a tool result forgotten by id (`forget --message`), then the same session ingested under
  another thread id and recorded as a resumed copy with new ids by the hook;
- a line the Reflector merged from two (a fake model on loopback), forgotten by its id, with and without
  `--with-sources`: the words of the lines it was merged from in recall's search, `restore --line` of each
  (goal: refused, exit 4), `restore --generation 0`, and the bytes;
- a phrase forgotten with `--match`, then a new message holding it under another thread and session id, and
  a title holding it.

    .venv/bin/python benchmarks/attacks.py forget
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

from om_mcp.testing.fake_server import FakeLLMServer, request_text
from om_mcp.testing.transcripts import ClaudeTranscript

SECRETS = ["quokkavelvet", "marmosetamber", "narwhalcopper"]


class Sandbox:
    def __init__(self, root: Path):
        self.root = root
        self.project = root / "project"
        (self.project / ".git").mkdir(parents=True)
        self.db = root / "memory.db"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
        self.env.update(
            HOME=str(root),
            XDG_DATA_HOME=str(root / "data"),
            XDG_CACHE_HOME=str(root / "cache"),
            OM_DB_PATH=str(self.db),
            OM_MODEL="openai/gpt-4o-mini",  # no key: nothing is ever sent to a model
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )

    def om(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "om_mcp", *args], input=stdin, capture_output=True, text=True, env=self.env
        )

    def hook(self, transcript: Path, session: str) -> None:
        event = {"session_id": session, "transcript_path": str(transcript), "cwd": str(self.project)}
        self.om("hook", "claude-code", "--no-worker", stdin=json.dumps({**event, "hook_event_name": "Stop"}))

    def back(self, words: list[str]) -> int:
        """How many of the words are in the bytes of the database file and its -wal."""
        wal = Path(f"{self.db}-wal")
        data = (self.db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).lower()
        return sum(1 for w in words if w.encode() in data)


def ways_in(box: Sandbox) -> dict[str, int]:
    transcript = ClaudeTranscript(box.root / "s1.jsonl", "s1", str(box.project))
    for word in SECRETS:
        transcript.turn(f"remember this: my code word is {word}", "noted")
    transcript.turn("and nothing else matters", "fine")
    box.hook(transcript.path, "s1")
    earlier = box.root / "before.jsonl"
    box.om("export", "-o", str(earlier))
    for word in SECRETS:
        box.om("forget", "--match", word, "--yes")
    out = {"after forget": box.back(SECRETS)}
    box.om("ingest", str(transcript.path), "--no-worker")
    out["om-mcp ingest"] = box.back(SECRETS)
    lines = transcript.path.read_text().splitlines(keepends=True)
    transcript.path.write_text("".join(lines[:-1]))
    box.hook(transcript.path, "s1")
    transcript.path.write_text("".join(lines))
    transcript.turn("one more question", "one more answer")
    box.hook(transcript.path, "s1")
    resumed = ClaudeTranscript(box.root / "s2.jsonl", "s2", str(box.project))
    for word in SECRETS:
        resumed.turn(f"Remember this: my code word is {word.upper()}", "noted")
    box.hook(resumed.path, "s2")
    out["hook (rewritten, resumed)"] = box.back(SECRETS)
    box.om("import", str(earlier))
    out["om-mcp import"] = box.back(SECRETS)
    status = json.loads(box.om("status", "--json").stdout)["forgotten"]
    out["refused by tombstones"] = status["refused"]
    return out


def match_surfaces(box: Sandbox) -> dict[str, tuple[int, int]]:
    """(left in the bytes, 1) per surface after `forget --match`."""
    nfc = unicodedata.normalize("NFC", "Zoë Ångströmvelvet")
    script = (
        "import anyio, json, sys\nfrom om_mcp.config import load_config\nfrom om_mcp.engine import Memory\n"
        "async def main():\n    async with await Memory.open(load_config()) as m:\n"
        "        await m.append_messages('m', json.loads(sys.argv[1]))\nanyio.run(main)\n"
    )
    messages = [
        {"role": "user", "content": "see attached", "metadata": {"from": {"name": "pangolinmeta"}}},
        {
            "role": "user",
            "content": [
                {
                    "type": "file",
                    "mime_type": "text/plain",
                    "name": "notes.txt",
                    "data": base64.b64encode(b"the vault code is pangolinfile").decode(),
                }
            ],
        },
        {"role": "user", "content": f"write to {unicodedata.normalize('NFD', nfc)}"},
    ]
    subprocess.run([sys.executable, "-c", script, json.dumps(messages)], env=box.env, capture_output=True)
    out = {}
    for label, phrase, probe in (
        ("message metadata", "pangolinmeta", b"pangolinmeta"),
        ("a file part's data", "pangolinfile", base64.b64encode(b"the vault code is pangolinfile")[:20]),
        ("NFD text, NFC phrase", nfc.lower(), b"Zoe"),
    ):
        box.om("forget", "--match", phrase, "--yes")
        wal = Path(f"{box.db}-wal")
        data = (box.db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")).lower()
        out[label] = (int(probe.lower() in data), 1)
    return out


def reader_open(box: Sandbox) -> dict[str, object]:
    transcript = ClaudeTranscript(box.root / "r.jsonl", "r", str(box.project))
    transcript.turn("the safe code is ocelotgarnet", "noted")
    box.hook(transcript.path, "r")
    reader = sqlite3.connect(box.db)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM messages").fetchone()
    forgot = box.om("forget", "--match", "ocelotgarnet", "--yes")
    pending = json.loads(box.om("status", "--json").stdout)["forgotten"]["erase_pending_since"] is not None
    reader.rollback()
    reader.close()
    finished = box.om("forget", "--finish")
    return {
        "exit code with a reader open (goal 5)": forgot.returncode,
        "status shows it pending": pending,
        "exit code of forget --finish after (goal 0)": finished.returncode,
        "left in the bytes after (goal 0)": box.back(["ocelotgarnet"]),
    }


def _run(box: Sandbox, code: str, *args: str) -> None:
    """`code` in a process of its own on the sandbox's database (`memory`: the engine, opened)."""
    script = (
        "import anyio, json, sys\nfrom om_mcp.config import load_config\nfrom om_mcp.engine import Memory\n"
        "async def main():\n    async with await Memory.open(load_config()) as memory:\n"
        + "".join(f"        {line}\n" for line in code.splitlines())
        + "anyio.run(main)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, *args], env=box.env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)


def history(box: Sandbox) -> dict[str, object]:
    """Three words each held only by earlier values of a working memory: a thread's, a resource's, the
    person layer's."""
    words = ["ibexcobalt", "tapirsaffron", "okapiumber"]
    box.env.update(OM_OBSERVATIONAL_MEMORY__USER__ENABLED="true", OM_WORKING_MEMORY__SCOPE="thread")
    _run(
        box,
        "await memory.append_messages('t', [{'role': 'user', 'content': 'hello'}], resource_id='proj')\n"
        "await memory.update_working_memory('t', '# Notes\\n- the code is ' + sys.argv[1])\n"
        "await memory.update_working_memory('t', '# Notes\\n- moved on')\n"
        "await memory.set_user_working_memory('- my word is ' + sys.argv[3])\n"
        "await memory.set_user_working_memory('- nothing')",
        *words,
    )
    box.env.update(OM_WORKING_MEMORY__SCOPE="resource")
    _run(
        box,
        "await memory.update_working_memory('t', '# Notes\\n- the word is ' + sys.argv[2])\n"
        "await memory.update_working_memory('t', '# Notes\\n- gone')",
        *words,
    )
    with sqlite3.connect(box.db) as conn:  # each time a value was saved: the memory as of then showed it
        times = [r[0] for r in conn.execute("SELECT saved_at FROM om_working_memory_history ORDER BY id")]
    codes = [box.om("forget", "--match", word, "--yes").returncode for word in words]
    shown = "".join(box.om("show", "t", "--as-of", when).stdout for when in times) + box.om("show", "--user").stdout
    return {
        "forget --match exit codes (goal 0 0 0)": " ".join(map(str, codes)),
        "in show --as-of / show --user after (goal 0)": f"{sum(w in shown for w in words)}/{len(words)}",
        "left in the bytes (goal 0)": f"{box.back(words)}/{len(words)}",
    }


def tool_parts(box: Sandbox) -> dict[str, object]:
    """A tool call and its result forgotten by id; the session back under another thread id, and as a
    resumed copy with new ids."""
    words = ["wombatsilver", "lemurcrimson"]  # the call's argument, the result's output
    transcript = ClaudeTranscript(box.root / "s1.jsonl", "s1", str(box.project))
    transcript.user("look at the notes")
    call = transcript.tool_call("Bash", {"command": f"grep {words[0]} notes.txt"})
    transcript.tool_result(call, f"the vault code is {words[1]} behind the painting")
    transcript.assistant("done")
    box.hook(transcript.path, "s1")
    stored = json.loads(box.om("show", "s1", "--json", "--messages", "20").stdout)
    for message in stored["recent_messages"]:
        if any(w in json.dumps(message) for w in words):
            box.om("forget", "--message", message["id"], "--thread", "s1", "--yes")
    out: dict[str, object] = {"after forget --message": f"{box.back(words)}/{len(words)}"}
    box.om("ingest", str(transcript.path), "--thread", "another-thread", "--no-worker")
    out["om-mcp ingest --thread another-thread"] = f"{box.back(words)}/{len(words)}"
    resumed = ClaudeTranscript(box.root / "s2.jsonl", "s2", str(box.project))
    resumed.user("again: look at the notes")
    call = resumed.tool_call("Bash", {"command": f"grep {words[0]} notes.txt"})  # new ids
    resumed.tool_result(call, f"the vault code is {words[1]} behind the painting")
    box.hook(resumed.path, "s2")
    out["hook, a resumed copy with new ids"] = f"{box.back(words)}/{len(words)}"
    return out


MERGED = "User likes kumquat, in jam and in tea"  # the lines' word, which no message holds


def _reflecting(request: dict) -> str:
    if "<observer-rules>" in request_text({"messages": (request.get("messages") or [])[:1]}):
        lines = f"* 🔴 (10:01) {MERGED}\n* 🔴 (10:02) User keeps a tortoise"
        return f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>"
    return (
        "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) User prefers kumquat jam at breakfast\n"
        "* 🔴 (10:01) User drinks kumquat tea\n* 🔴 (10:02) User keeps a tortoise\n</observations>"
    )


def merged_lines(box: Sandbox, with_sources: bool) -> dict[str, object]:
    """A line the Reflector merged from two, forgotten by its id: what of the two comes back."""
    with FakeLLMServer(_reflecting) as llm:
        box.env.update(OM_MODEL=json.dumps({"model": "openai/fake", "api_base": llm.base_url}))
        box.env.update(OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS="false")
        transcript = ClaudeTranscript(box.root / "m.jsonl", "m", str(box.project))
        transcript.turn("the orange jam at breakfast, and the orange tea after", "noted")
        box.hook(transcript.path, "m")
        box.om("observe", "m")
        box.om("reflect", "m")
    log = json.loads(box.om("show", "m", "--json").stdout)
    line = next(
        f"{g['id']}.{line['id'].rsplit('.', 1)[1]}" if "." in line["id"] else line["id"]
        for g in log["observations"]["groups"]
        for line in g["lines"]
        if line.get("id") and MERGED in line["text"]
    )
    sources = [g["lines"][-1]["id"] for g in log["observations"].get("retired", []) if "kumquat" in json.dumps(g)]
    args = ["forget", "--observation", line, "--yes", *(["--with-sources"] if with_sources else [])]
    box.om(*args)
    restored = [box.om("restore", "m", "--line", source).returncode for source in sources]
    box.om("restore", "m", "--generation", "0")
    shown = box.om("show", "m", "--generations").stdout
    return {
        "retired source lines (merged into it)": len(sources),
        "restore --line of each (goal 4 each)": " ".join(map(str, restored)) or "-",
        "'kumquat' in every generation after restore --generation 0 (goal 0)": shown.lower().count("kumquat"),
        "'kumquat' in the bytes (goal 0)": box.back(["kumquat"]),
    }


def phrase_back(box: Sandbox) -> dict[str, object]:
    """A phrase forgotten with --match, then new text holding it under other ids."""
    word = "civetlavender"
    transcript = ClaudeTranscript(box.root / "p.jsonl", "p1", str(box.project))
    transcript.turn(f"my locker code is {word}", "noted")
    box.hook(transcript.path, "p1")
    box.om("forget", "--match", word, "--yes")
    fresh = ClaudeTranscript(box.root / "p2.jsonl", "p2", str(box.project))
    fresh.turn(f"Again, the locker code: {word.upper()}!", "noted")
    box.hook(fresh.path, "p2")
    _run(box, "await memory.update_thread('p2', title='about ' + sys.argv[1])", word)
    return {"new session, new message, a title (goal 0)": f"{box.back([word])}/1"}


def copies() -> dict[str, dict[str, object]]:
    out = {}
    for label, attack in (
        ("working-memory history (thread, resource, person layer)", history),
        ("tool call and result back under another id or thread", tool_parts),
        ("a merged line forgotten by id", lambda box: merged_lines(box, False)),
        ("a merged line forgotten by id, --with-sources", lambda box: merged_lines(box, True)),
        ("a phrase forgotten with --match, back in new text", phrase_back),
    ):
        with tempfile.TemporaryDirectory(prefix="om-attacks-forget-") as tmp:
            out[label] = attack(Sandbox(Path(tmp) / "box"))
    return out


def forgotten_text_back() -> None:
    with tempfile.TemporaryDirectory(prefix="om-attacks-forget-") as tmp:
        ways = ways_in(Sandbox(Path(tmp) / "ways"))
    print(f"\nforgotten text back: {len(SECRETS)} secrets recorded by the hook, then forgotten (goal 0 each)")
    for label, value in ways.items():
        shown = f"{value}" if label == "refused by tombstones" else f"{value}/{len(SECRETS)}"
        print(f"  {label:<28} {shown}")
    with tempfile.TemporaryDirectory(prefix="om-attacks-forget-") as tmp:
        surfaces = match_surfaces(Sandbox(Path(tmp) / "match"))
    print("forget --match, left in the file's bytes (goal 0)")
    for label, (left, total) in surfaces.items():
        print(f"  {label:<28} {left}/{total}")
    with tempfile.TemporaryDirectory(prefix="om-attacks-forget-") as tmp:
        erase = reader_open(Sandbox(Path(tmp) / "reader"))
    print("forget while another connection reads an older snapshot")
    for label, value in erase.items():
        print(f"  {label:<44} {value}")
    print("copies a forget must take too, each on its own database")
    for label, figures in copies().items():
        print(f"  {label}")
        for what, value in figures.items():
            print(f"    {what:<66} {value}")


if __name__ == "__main__":
    forgotten_text_back()
