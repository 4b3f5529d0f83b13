"""Codex runs a hook only once the user has trusted it: asking Codex which of ours it trusts, and
trusting them, the way Codex's own clients do.

From Codex's documentation and source (openai/codex, 0.171.0):
* developers.openai.com/codex/hooks, "Review and trust hooks": a non-managed command hook runs
  only after its exact definition was reviewed and trusted; trust is recorded against the hook's
  current hash, so a new or changed hook is skipped until trusted again. In the CLI, `/hooks`
  reviews and trusts them (and Codex says so at start when some need review); for one-off
  automation, `--dangerously-bypass-hook-trust` skips the check for one invocation.
* `codex app-server` (codex-rs/app-server; its schema: `codex app-server generate-json-schema`)
  is the interface Codex's own clients use: `hooks/list` returns each hook with its `key`
  (`<hooks.json path>:<event>:<group>:<handler>`), `command`, `sourcePath`, `currentHash` and
  `trustStatus` (trusted | untrusted | modified | managed); trust is user state under
  `hooks.state."<key>".trusted_hash` in the user's `config.toml` (codex-rs/hooks
  config_rules.rs reads it from the user layer only), written through `config/batchWrite`
  (openai/codex#19840: "uses the existing config/batchWrite path for hook state updates").

So `om-mcp setup codex` trusts exactly the hooks it wrote (the ones whose command is its own
hook line, in the hooks.json it wrote), handing back the hash Codex itself reported: om-mcp
never computes one. It checks the result with a second `hooks/list`. `--uninstall` removes those
trust entries (a null value deletes the key). Without `codex` on PATH nothing can be asked, and
the one step left to the user is said instead; `om-mcp doctor` asks the same question.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TIMEOUT_SECONDS = 30.0
TRUSTED = "trusted"
HOW_TO_TRUST = 'start `codex`, choose "Trust all and continue" (or type /hooks and press t)'


class CodexUnavailable(Exception):
    """Codex could not be asked (not installed, or its app server failed); the message says why."""


@dataclass(frozen=True)
class CodexHook:
    key: str
    event: str
    command: str | None
    source_path: str
    trust: str  # trusted | untrusted | modified | managed
    current_hash: str


def list_hooks(codex: str, cwd: Path, env: Mapping[str, str]) -> list[CodexHook]:
    """Every hook Codex finds for `cwd`, with its trust."""
    with AppServer(codex, cwd, env) as server:
        return _hooks(server.request("hooks/list", {"cwds": [str(cwd)]}))


def ours(hooks: list[CodexHook], hooks_file: Path, command: str) -> list[CodexHook]:
    """The hooks om-mcp wrote: in that file, running that command line."""
    return [h for h in hooks if Path(h.source_path) == hooks_file and h.command == command]


def trust(codex: str, cwd: Path, env: Mapping[str, str], hooks_file: Path, command: str) -> list[CodexHook]:
    """Trust om-mcp's hooks that Codex does not trust yet; om-mcp's hooks as Codex then lists them."""
    with AppServer(codex, cwd, env) as server:
        found = ours(_hooks(server.request("hooks/list", {"cwds": [str(cwd)]})), hooks_file, command)
        pending = [h for h in found if h.trust != TRUSTED]
        if not pending:
            return found
        edits = [_edit(h.key, {"trusted_hash": h.current_hash}) for h in pending]
        server.request("config/batchWrite", {"edits": edits})
        return ours(_hooks(server.request("hooks/list", {"cwds": [str(cwd)]})), hooks_file, command)


def forget(codex: str, cwd: Path, env: Mapping[str, str], hooks_file: Path, command: str) -> int:
    """Remove the trust Codex keeps for om-mcp's hooks (before the hooks themselves go); how many."""
    with AppServer(codex, cwd, env) as server:
        found = ours(_hooks(server.request("hooks/list", {"cwds": [str(cwd)]})), hooks_file, command)
        kept = [h for h in found if h.trust in (TRUSTED, "modified")]
        if kept:
            server.request("config/batchWrite", {"edits": [_edit(h.key, None) for h in kept]})
        return len(kept)


def _edit(key: str, value: Any) -> dict[str, Any]:
    return {"keyPath": "hooks.state." + json.dumps(key), "mergeStrategy": "replace", "value": value}


def _hooks(result: Any) -> list[CodexHook]:
    out = []
    for entry in (result or {}).get("data") or []:
        for hook in entry.get("hooks") or []:
            out.append(
                CodexHook(
                    key=str(hook.get("key")),
                    event=str(hook.get("eventName")),
                    command=hook.get("command"),
                    source_path=str(hook.get("sourcePath")),
                    trust=str(hook.get("trustStatus")),
                    current_hash=str(hook.get("currentHash")),
                )
            )
    return out


class AppServer:
    """One `codex app-server` over stdio (JSON-RPC, one JSON object a line), initialized."""

    def __init__(self, codex: str, cwd: Path, env: Mapping[str, str]) -> None:
        self.codex, self.cwd, self.env = codex, cwd, dict(env)
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.next_id = 0

    def __enter__(self) -> AppServer:
        try:
            self.proc = subprocess.Popen(
                [self.codex, "app-server"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=self.cwd if self.cwd.is_dir() else None,
                env=self.env,
            )
        except OSError as error:
            raise CodexUnavailable(f"`{self.codex} app-server` could not start ({error.strerror or error})") from None
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"clientInfo": {"name": "om_mcp", "title": "om-mcp setup", "version": _version()}})
        self._send({"method": "initialized"})
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError as error:
            raise CodexUnavailable(f"`{self.codex} app-server` stopped ({error.strerror or error})") from None

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        ident = self.next_id
        self._send({"id": ident, "method": method, "params": params})
        while True:
            try:
                line = self.lines.get(timeout=TIMEOUT_SECONDS)
            except queue.Empty:
                raise CodexUnavailable(f"`{self.codex} app-server` gave no answer to {method}") from None
            if line is None:
                raise CodexUnavailable(f"`{self.codex} app-server` exited before answering {method}")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or message.get("id") != ident:
                continue  # a notification, or another answer
            if "error" in message:
                error = message["error"]
                text = error.get("message") if isinstance(error, dict) else error
                raise CodexUnavailable(f"Codex refused {method}: {text}")
            return message.get("result")


def _version() -> str:
    from om_mcp import __version__

    return __version__


def codex_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment Codex is asked in: ours, without om-mcp's kill switch (it is not a hook)."""
    return {k: v for k, v in (env or os.environ).items() if k != "OM_MCP_HOOKS"}
