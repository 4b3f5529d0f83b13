"""A model client that runs Claude Code headless: `claude -p` with the prompt on stdin.

Model strings `claude-cli/<model>` (`claude-cli/haiku`, `claude-cli/sonnet`, a
full name) use the person's own Claude Code login, so memory works without an
API key. Each call is one nested, stripped-down Claude Code run:

* no tools (`--tools ""`), no MCP servers (`--strict-mcp-config` and none
  given), no hooks (`--settings {"disableAllHooks": true}`, and
  OM_MCP_HOOKS=off for ours in case a hook still fires), no CLAUDE.md
  (CLAUDE_CODE_DISABLE_CLAUDE_MDS=1), no extended thinking
  (MAX_THINKING_TOKENS=0), no side calls such as title generation
  (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1), no retries of its own
  (CLAUDE_CODE_MAX_RETRIES=0: the router retries), nothing written to the
  session history (`--no-session-persistence`), run from an empty temporary
  folder;
* our system prompt replaces Claude Code's (`--system-prompt`, or
  `--system-prompt-file` when it is too long for one argument);
* `--output-format json`: one JSON object with `result`, `usage`,
  `total_cost_usd`, `is_error` and `api_error_status`.

Each of these was checked against Claude Code 2.1.197 with a scripted local
API. Failures: not logged in, a bad key, an unknown option (an old CLI) are
permanent; HTTP 408/429/5xx/529, connection errors and our own timeout (the
process group is killed) are transient.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

import anyio

from om_mcp.config.models import ModelSettings, ModelTarget
from om_mcp.models.base import Completion, Usage
from om_mcp.models.errors import ModelError, is_transient_status

PREFIX = "claude-cli"
HOOKS_ENV = "OM_MCP_HOOKS"  # the switch om_mcp.hosts.common.hooks_disabled reads
DEFAULT_SYSTEM_PROMPT = "You are a careful assistant. Follow the instructions in the user's message."
# Linux refuses a single argument over 128 KiB; longer system prompts go through a file.
MAX_ARG_CHARS = 100_000

NESTED_ENV = {
    HOOKS_ENV: "off",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
    "CLAUDE_CODE_DISABLE_AUTO_MEMORY": "1",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "MAX_THINKING_TOKENS": "0",
}
NO_HOOKS_SETTINGS = '{"disableAllHooks": true}'

_AUTH = re.compile(
    r"not logged in|/login|invalid api key|authenticat|oauth|unauthori[sz]ed|forbidden|credit balance", re.I
)
_TRANSIENT = re.compile(
    r"unable to connect|connection|timed? ?out|overloaded|rate.?limit|econnreset|socket hang up"
    r"|network|temporarily|try again",
    re.I,
)


@dataclass(frozen=True)
class ProcessResult:
    returncode: int
    stdout: bytes
    stderr: bytes


class ClaudeCliClient:
    """ModelClient for `claude-cli/<model>` targets; one `claude -p` run per call."""

    def __init__(self, executable: str = "claude") -> None:
        self.executable = executable

    async def complete(
        self, messages: list[dict[str, Any]], target: ModelTarget, settings: ModelSettings, timeout: float
    ) -> Completion:
        path = shutil.which(self.executable)
        if path is None:
            raise ModelError(
                f"the claude CLI ({self.executable}) is not on PATH; install Claude Code "
                "(npm install -g @anthropic-ai/claude-code) or choose another model",
                transient=False,
                model=target.model,
            )
        system, prompt = split_prompt(messages)
        with tempfile.TemporaryDirectory(prefix="om-mcp-claude-") as workdir:
            args = command(path, cli_model(target.model), system, workdir)
            env = {**os.environ, **NESTED_ENV}
            if settings.max_output_tokens:
                env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(settings.max_output_tokens)
            try:
                done = await run_process(args, prompt.encode("utf-8"), env, workdir, timeout)
            except TimeoutError:
                raise ModelError(
                    f"claude -p timed out after {timeout:.1f}s", transient=True, model=target.model, timed_out=True
                ) from None
        return parse_output(done, target)


def cli_model(model: str) -> str | None:
    """ "claude-cli/haiku" -> "haiku"; "claude-cli" alone -> None (the CLI's default)."""
    name = model.strip()
    if name == PREFIX:
        return None
    if not name.startswith(PREFIX + "/") or not name[len(PREFIX) + 1 :].strip():
        raise ModelError(f"not a claude-cli model string: {model!r} (expected claude-cli/<model>)", model=model)
    return name[len(PREFIX) + 1 :].strip()


def command(executable: str, model: str | None, system: str, workdir: str) -> list[str]:
    args = [
        executable,
        "-p",
        "--output-format",
        "json",
        "--tools",
        "",
        "--strict-mcp-config",
        "--no-session-persistence",
        "--settings",
        NO_HOOKS_SETTINGS,
    ]
    if model:
        args += ["--model", model]
    if len(system) > MAX_ARG_CHARS:
        file = os.path.join(workdir, "system-prompt.txt")
        with open(file, "w", encoding="utf-8") as handle:
            handle.write(system)
        args += ["--system-prompt-file", file]
    else:
        args += ["--system-prompt", system]
    return args


def split_prompt(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(system prompt, stdin text) from OpenAI-style chat messages.

    System messages become the system prompt. A single user message is sent
    as is; a longer exchange is sent as a labelled transcript. Images cannot
    travel over a text pipe and become a placeholder.
    """
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system").strip()
    turns = [m for m in messages if m.get("role") != "system"]
    if len(turns) == 1 and turns[0].get("role") == "user":
        prompt = _text(turns[0].get("content"))
    else:
        prompt = "\n\n".join(f"{str(m.get('role', 'user')).title()}: {_text(m.get('content'))}" for m in turns)
    return system or DEFAULT_SYSTEM_PROMPT, prompt


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    pieces = []
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict) and item.get("type") == "text":
            pieces.append(str(item.get("text", "")))
        elif isinstance(item, dict):
            pieces.append(f"[{item.get('type', 'attachment')} omitted]")
    return "\n".join(pieces)


async def run_process(args: list[str], stdin: bytes, env: dict[str, str], cwd: str, timeout: float) -> ProcessResult:
    """Run `args` with `stdin`, in its own process group; on timeout kill the
    whole group (the CLI may have children) and raise TimeoutError."""
    process = await anyio.open_process(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    out: list[bytes] = []
    err: list[bytes] = []

    async def drain(stream: Any, sink: list[bytes]) -> None:
        async for chunk in stream:
            sink.append(chunk)

    async def feed() -> None:
        assert process.stdin is not None  # opened with stdin=PIPE
        try:
            await process.stdin.send(stdin)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # it exited early; its output says why
        finally:
            await process.stdin.aclose()

    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as group:
                group.start_soon(feed)
                group.start_soon(drain, process.stdout, out)
                group.start_soon(drain, process.stderr, err)
            await process.wait()
    except BaseException:
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.wait()
        raise
    return ProcessResult(process.returncode or 0, b"".join(out), b"".join(err))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):  # gone, or no process groups (Windows)
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, OSError):
            pass


def parse_output(done: ProcessResult, target: ModelTarget) -> Completion:
    """The Completion in `claude -p --output-format json` output, or the ModelError it reports."""
    data = _json_result(done.stdout)
    if data is None:
        detail = (done.stderr or done.stdout).decode("utf-8", "replace").strip().splitlines()
        first = detail[0] if detail else f"exit code {done.returncode}, no output"
        raise ModelError(f"claude -p failed: {first}", transient=bool(_TRANSIENT.search(first)), model=target.model)
    text = str(data.get("result") or "")
    if data.get("is_error") or data.get("subtype") != "success":
        raise _error(data, text, target)
    usage = data.get("usage") or {}
    metadata = {
        "provider": "claude-cli",
        "response_models": sorted((data.get("modelUsage") or {}).keys()),
        "stop_reason": data.get("stop_reason"),
        "duration_ms": data.get("duration_ms"),
        "cached_input_tokens": usage.get("cache_read_input_tokens") or None,
    }
    return Completion(
        text=text,
        model=target.model,
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0)
            + int(usage.get("cache_creation_input_tokens") or 0)
            + int(usage.get("cache_read_input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cost=float(data["total_cost_usd"]) if isinstance(data.get("total_cost_usd"), (int, float)) else None,
            provider_metadata={k: v for k, v in metadata.items() if v not in (None, [])},
        ),
    )


def _json_result(stdout: bytes) -> dict[str, Any] | None:
    for line in reversed(stdout.decode("utf-8", "replace").strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("type") == "result":
            return data
    return None


def _error(data: dict[str, Any], text: str, target: ModelTarget) -> ModelError:
    status = data.get("api_error_status") if isinstance(data.get("api_error_status"), int) else None
    message = text or str(data.get("subtype") or "error")
    if status in (401, 403) or _AUTH.search(message):
        return ModelError(
            f"claude CLI is not usable: {message} (log in by running `claude` once, or set ANTHROPIC_API_KEY)",
            transient=False,
            status_code=status,
            model=target.model,
            reached=status is not None,
        )
    transient = is_transient_status(status) or (status is None and bool(_TRANSIENT.search(message)))
    return ModelError(
        f"claude -p: {message}", transient=transient, status_code=status, model=target.model, reached=status is not None
    )
