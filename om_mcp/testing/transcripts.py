"""Writing Claude Code session transcripts, for tests and benchmarks.

The entries have the shape Claude Code 2.1.197 writes (see
tests/fixtures/claude_code/session.jsonl): one JSON object per line, `user` and
`assistant` entries with uuid/parentUuid chains, one assistant entry per content
block sharing the API message id, tool results as `user` entries, plus the
harness's bookkeeping lines (queue operations, last-prompt) that carry no
conversation.

    transcript = ClaudeTranscript(path, session_id="s1", cwd="/home/me/project")
    transcript.turn("use SQLite?", "Yes: one file, WAL for concurrency.")
    call = transcript.tool_call("Bash", {"command": "ls"})
    transcript.tool_result(call, "a.txt\\nb.txt")
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


class ClaudeTranscript:
    def __init__(
        self,
        path: str | Path,
        session_id: str,
        cwd: str,
        *,
        start: datetime | None = None,
        model: str = "claude-sonnet-4-5",
        step: timedelta = timedelta(seconds=7),
    ):
        self.path = Path(path)
        self.session_id = session_id
        self.cwd = cwd
        self.model = model
        self.clock = start or datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
        self.step = step
        self.parent: str | None = None
        self._message = 0

    # -- conversation ---------------------------------------------------------------

    def user(self, text: str) -> str:
        self._raw({"type": "queue-operation", "operation": "enqueue", "content": text + "\n"})
        return self._entry("user", {"role": "user", "content": text + "\n"})

    def assistant(self, text: str) -> str:
        return self._assistant([{"type": "text", "text": text}], stop="end_turn")

    def thinking(self, text: str) -> str:
        return self._assistant([{"type": "thinking", "thinking": text, "signature": "c2ln"}], stop=None)

    def tool_call(self, name: str, arguments: dict[str, Any]) -> str:
        """An assistant tool_use block; returns its tool-use id for `tool_result`."""
        call_id = f"toolu_{uuid.uuid4().hex[:20]}"
        self._assistant([{"type": "tool_use", "id": call_id, "name": name, "input": arguments}], stop="tool_use")
        return call_id

    def tool_result(self, call_id: str, output: str, *, is_error: bool = False) -> str:
        block: dict[str, Any] = {"tool_use_id": call_id, "type": "tool_result", "content": output}
        if is_error:
            block["is_error"] = True
        return self._entry("user", {"role": "user", "content": [block]})

    def turn(self, prompt: str, reply: str, *, tool: tuple[str, dict[str, Any], str] | None = None) -> None:
        """A user prompt and the reply, optionally with one tool call (name, arguments, output) between."""
        self.user(prompt)
        self._message += 1
        if tool is not None:
            call = self.tool_call(tool[0], tool[1])
            self.tool_result(call, tool[2])
            self._message += 1
        self.assistant(reply)
        self._raw({"type": "last-prompt", "lastPrompt": prompt, "leafUuid": self.parent})

    # -- lines -------------------------------------------------------------------------

    def _assistant(self, content: list[dict[str, Any]], stop: str | None) -> str:
        message = {
            "id": f"msg_{self._message:04d}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 20},
        }
        return self._entry("assistant", message)

    def _entry(self, kind: str, message: dict[str, Any]) -> str:
        ident = str(uuid.uuid4())
        self._write(
            {
                "parentUuid": self.parent,
                "isSidechain": False,
                "userType": "external",
                "cwd": self.cwd,
                "sessionId": self.session_id,
                "version": "2.1.197",
                "gitBranch": "main",
                "type": kind,
                "message": message,
                "uuid": ident,
                "timestamp": self._tick(),
            }
        )
        self.parent = ident
        return ident

    def _raw(self, entry: dict[str, Any]) -> None:
        self._write({**entry, "timestamp": self._tick(), "sessionId": self.session_id})

    def _tick(self) -> str:
        self.clock += self.step
        return self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _write(self, entry: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
