"""The hook and `om-mcp ingest` held to their work, by counts that cannot flake on a loaded machine:
the modules a hook call loads (a ceiling: its spawn time is mostly imports), and the bytes of a
transcript `om-mcp ingest` holds at once (one bounded read, never the whole file).

Figures when written: with the settings cached, UserPromptSubmit loads 210 modules (76 of om-mcp's)
and SessionStart 218 (84), `om_mcp.lazy` (the lazy faces' one helper) among them; before the recorder
and the adapters both loaded 216 (76), and 219 (79) and 224 (84) before the log's wording
(`observation.lines`, `observation.transcript`, zoneinfo) was imported only where a `<remember>` span
is found. `om-mcp ingest` reads `READ_BYTES` (4 MiB) and the line that
straddles it at a time, in batches of `BATCH` messages (before: the whole file, 1.0 GB of memory for
1M messages).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.hooks import SESSION_ID, Box
from support.processes import PYTHON, REPO
from support.timeouts import scaled

from om_mcp.commands import ingest

TRANSCRIPT = Path(__file__).parent / "fixtures" / "claude_code" / "session.jsonl"
# Everything in sys.modules at the hook's exit, and of them om_mcp's, for each event.
CEILINGS = {"UserPromptSubmit": (210, 76), "SessionStart": (218, 84)}


def modules_of_a_hook(box: Box, event: dict, out: Path) -> tuple[set[str], subprocess.CompletedProcess]:
    probe = (
        "import atexit, json, sys;"
        f" atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))));"
        "from om_mcp.cli import main; raise SystemExit(main(['hook', 'claude-code', '--no-worker']))"
    )
    done = subprocess.run(
        [PYTHON, "-c", probe],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=box.env,
        cwd=REPO,
        timeout=scaled(120),
    )
    return set(json.loads(out.read_text())), done


@pytest.mark.slow
def test_a_hook_call_loads_no_more_modules_than_it_did(tmp_path: Path) -> None:
    box = Box(tmp_path)
    transcript = tmp_path / f"{SESSION_ID}.jsonl"
    shutil.copy(TRANSCRIPT, transcript)
    modules_of_a_hook(box, box.event("Stop", transcript), tmp_path / "first.json")  # the settings cached
    for name, extra in (("UserPromptSubmit", {"prompt": "and the tests?"}), ("SessionStart", {"source": "resume"})):
        modules, done = modules_of_a_hook(box, box.event(name, transcript, **extra), tmp_path / f"{name}.json")
        assert done.returncode == 0, done.stderr
        ours = {m for m in modules if m.split(".")[0] == "om_mcp"}
        most, most_ours = CEILINGS[name]
        assert len(modules) <= most and len(ours) <= most_ours, (name, len(modules), sorted(ours))
        assert "pydantic" not in modules and "asyncio" not in modules, name
        if name == "UserPromptSubmit":  # recording: no log text is written, so none of its wording loads
            assert not {"om_mcp.engine.observation.transcript", "zoneinfo"} & modules
    assert box.query("SELECT COUNT(*) FROM messages")[0][0] > 0  # it did record


def test_ingest_holds_one_bounded_read_of_a_transcript_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """Each read takes `READ_BYTES` and the line that straddles it, every message comes out once, in
    batches of at most `BATCH`: what ingest holds does not grow with the file."""
    monkeypatch.setattr(ingest, "READ_BYTES", 64 * 1024)
    monkeypatch.setattr(ingest, "BATCH", 100)
    path = tmp_path / "session.jsonl"
    longest = 0
    with path.open("w") as out:
        for n in range(3000):
            role = "user" if n % 2 == 0 else "assistant"
            entry = {
                "type": role,
                "sessionId": "s",
                "uuid": f"u{n}",
                "timestamp": "2026-01-05T10:00:00.000Z",
                "message": {"role": role, "content": f"message {n} " + "words " * (n % 40)},
            }
            line = json.dumps(entry) + "\n"
            longest = max(longest, len(line))
            out.write(line)
    size = path.stat().st_size
    spans: list[int] = []
    from om_mcp.hosts.claude_code import adapter

    read = adapter.ClaudeCode.read

    def counted(self, source, position, **kw):  # type: ignore[no-untyped-def]
        reading = read(self, source, position, **kw)
        spans.append(reading.position.offset - position.offset)
        return reading

    monkeypatch.setattr(adapter.ClaudeCode, "read", counted)
    problems: list[str] = []
    batches = list(ingest.read(path, "claude-code", 2000, problems))
    assert problems == []
    assert sum(len(batch) for batch, _ in batches) == 3000 and max(len(batch) for batch, _ in batches) <= 100
    assert sum(spans) == size and max(spans) <= 64 * 1024 + longest  # a bounded piece, the whole file in the end
    assert len(spans) >= size // (64 * 1024)
