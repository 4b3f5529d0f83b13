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


if __name__ == "__main__":
    forgotten_text_back()
