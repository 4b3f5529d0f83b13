"""The hook reads a bounded amount per run, run as Claude Code runs it.

Before: a 1 GiB line without a newline cost 2.1 GB and seconds on every prompt,
`/dev/zero` grew until MemoryError, and a FIFO hung the hook (and the prompt).
Now: only a regular file is read, a line over 16 MiB is skipped, a run reads at most
64 MiB and the next one resumes; what went wrong is one line in hook.log, exit 0.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.hooks import SESSION_ID, Box

from om_mcp.hosts import reader


def entry(n: int, text: str) -> bytes:
    line = {
        "type": "user",
        "uuid": f"u{n}",
        "sessionId": SESSION_ID,
        "timestamp": f"2026-03-02T09:0{n}:00Z",
        "message": {"role": "user", "content": text},
    }
    return json.dumps(line).encode() + b"\n"


def stored(box: Box) -> list[str]:
    return [row[0] for row in box.query("SELECT id FROM messages ORDER BY seq")] if box.db.exists() else []


def prompt(box: Box, transcript: Path | str):
    done = box.hook(box.event("UserPromptSubmit", Path(transcript)), "--no-worker")
    assert done.returncode == 0 and done.stdout == b"" and b"Traceback" not in done.stderr, done
    return done


@pytest.mark.slow
def test_a_line_too_long_is_skipped_and_the_rest_is_stored(tmp_path):
    box = Box(tmp_path)
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(entry(1, "first") + entry(2, "x" * (reader.MAX_LINE_BYTES + 10)) + entry(3, "third"))
    prompt(box, transcript)
    assert stored(box) == ["u1", "u3"]
    assert any("skipped a" in line and "transcript line" in line for line in box.log_lines()), box.log_lines()


@pytest.mark.slow
def test_an_unterminated_huge_line_costs_each_run_a_bounded_read_and_reading_resumes(tmp_path):
    box = Box(tmp_path)
    transcript = tmp_path / "session.jsonl"
    with open(transcript, "wb") as f:
        f.write(entry(1, "before the flood"))
        f.truncate(2 * reader.MAX_RUN_BYTES + 1000)  # a line of zeros, no newline (sparse: cheap to make)
    prompt(box, transcript)
    assert stored(box) == ["u1"]
    assert "the rest comes next time" in box.log_lines()[-1]
    with open(transcript, "ab") as f:  # the line ends at last, and the session goes on
        f.write(b"\n" + entry(2, "after the flood"))
    runs = 1
    while "u2" not in stored(box):
        runs += 1
        assert runs <= 4, box.log_lines()  # 64 MiB a run: three runs get past 128 MiB
        prompt(box, transcript)
    assert stored(box) == ["u1", "u2"]
    assert any("skipped a" in line for line in box.log_lines())


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
@pytest.mark.slow
def test_a_transcript_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    box = Box(tmp_path)
    path = {"device": Path("/dev/zero"), "directory": tmp_path}.get(kind, tmp_path / "fifo")
    if kind == "fifo":
        os.mkfifo(path)
    prompt(box, path)
    (line,) = box.log_lines()
    assert "only a regular file is read" in line


def test_hook_input_is_read_only_up_to_a_bound(tmp_path):
    box = Box(tmp_path)
    event = box.event("UserPromptSubmit", tmp_path / "none.jsonl", prompt="y" * (17 * 1024 * 1024))
    done = box.hook(event, "--no-worker")
    assert done.returncode == 0 and done.stdout == b""
    assert "more than 16,777,216 bytes on stdin" in box.log_lines()[-1]


def test_a_run_reads_its_bound_then_the_line_that_straddles_it(tmp_path):
    """`om-mcp ingest` reads a long file a small piece at a time: a run stops at its bound unless a line
    is open there, which it reads to its end (and no further), so the next run starts on a line."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(b"%03d" % n + b"x" * 97 + b"\n" for n in range(10)))  # 101 bytes a line
    got = reader.read_lines(path, max_run=150)
    assert [line[:3] for _, line in got.lines] == [b"000", b"001"] and (got.end, got.more) == (202, True)
    rest = reader.read_lines(path, got.end, max_run=150)
    assert [line[:3] for _, line in rest.lines] == [b"002", b"003"] and rest.end == 404
    whole = reader.read_lines(path, max_run=101)  # a bound on a line's end: nothing left open
    assert len(whole.lines) == 1 and whole.end == 101
