"""What a newcomer hit on the way in, each held by a test: the default scope the docs state, the example
config listing every option, server.json's model, `show --generations` on a thread with no log,
`status | head`, a backup into a missing folder, ids cut in terminal tables, and a search that looked
in one resource only."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.config import Config

pytestmark = pytest.mark.slow
SESSION = "0f9e8d7c-6b5a-4321-9876-fedcba987654"


def om(tmp: Path, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", *args], capture_output=True, text=True, timeout=scaled(180), env=clean_env(tmp), **kw
    )


@pytest.fixture
def hooked(tmp_path: Path) -> Path:
    """A database holding one session the Claude Code hook recorded (no model: nothing observed)."""
    db = tmp_path / "memory.db"
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    transcript = tmp_path / "t.jsonl"
    from om_mcp.testing.transcripts import ClaudeTranscript

    ClaudeTranscript(transcript, SESSION, str(project)).turn("Where do the Lisbon hotel notes live?", "In notes/.")
    event = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(project), "hook_event_name": "Stop"}
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "hook", "claude-code", "--db", str(db), "--no-worker"],
        input=json.dumps(event),
        text=True,
        capture_output=True,
        env=clean_env(tmp_path),
        timeout=scaled(60),
    )
    assert done.returncode == 0
    return db


def test_the_configuration_page_states_the_default_scope() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    default = Config().observational_memory.scope
    assert f"`observational_memory.scope`: `{default}` (the default)" in page


def test_the_example_config_lists_every_option() -> None:
    text = (REPO / "configs" / "om-mcp.toml").read_text()
    Config.model_validate(tomllib.loads(text))  # it loads as-is
    keys: dict[str, set[str]] = {}
    section = ""
    for line in text.splitlines():
        if header := re.match(r"^#?\s*\[\[?([^\]]+)\]\]?\s*$", line):
            section = header.group(1)
            keys.setdefault(section, set())
        elif key := re.match(r"^#?\s*([A-Za-z_]\w*)\s*=", line):
            keys.setdefault(section, set()).add(key.group(1))
    missing = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if field.exclude:  # set from the environment only (OM_HTTP_TOKEN)
                continue
            key = field.alias or name
            path = f"{prefix}.{key}" if prefix else key
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                walk(kind, path)
            elif key not in keys.get(prefix, set()) and path not in keys:
                missing.append(path)

    walk(Config, "")
    assert missing == []


def test_server_json_describes_the_auto_model() -> None:
    described = json.loads((REPO / "server.json").read_text())
    variables = {v["name"]: v["description"] for v in described["packages"][0]["environmentVariables"]}
    assert "auto" in variables["OM_MODEL"] and "default gemini" not in variables["OM_MODEL"].lower()


def test_show_generations_on_a_thread_with_no_log(hooked: Path, tmp_path: Path) -> None:
    done = om(tmp_path, "show", SESSION, "--generations", "--db", str(hooked))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "nothing observed yet" in done.stdout
    as_json = json.loads(om(tmp_path, "show", SESSION, "--generations", "--json", "--db", str(hooked)).stdout)
    assert as_json["thread"] == SESSION


def test_a_closed_pipe_and_a_missing_folder_are_one_line_and_an_exit_code(hooked: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [PYTHON, "-m", "om_mcp", "status", "--db", str(hooked)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(tmp_path),
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head` that has read enough
    said = proc.stderr.read().decode()
    assert proc.wait(60) == 141 and len(said.strip().splitlines()) == 1 and "Traceback" not in said
    done = om(tmp_path, "backup", "/nonexistent/dir/x.db", "--db", str(hooked))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "om-mcp: /nonexistent/dir does not exist: create it first, or give another path"
    ]


def test_terminal_tables_keep_ids_whole(hooked: Path, tmp_path: Path) -> None:
    main, follower = pty.openpty()
    env = {**clean_env(tmp_path), "TERM": "xterm", "COLUMNS": "70"}
    proc = subprocess.Popen(
        [PYTHON, "-m", "om_mcp", "threads", "--db", str(hooked)], stdout=follower, stderr=subprocess.PIPE, env=env
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
    os.close(main)
    assert proc.wait(60) == 0
    assert SESSION in drawn.decode(errors="replace")  # whole, on a 70-column terminal


def test_search_without_resource_finds_hook_sessions(hooked: Path, tmp_path: Path) -> None:
    found = json.loads(om(tmp_path, "search", "Lisbon hotel", "--json", "--db", str(hooked)).stdout)
    assert found and found[0]["thread_id"] == SESSION and found[0]["resource_id"].endswith("/p")


# Words after `om-mcp` in the plugin's files, the status page and --help that are prose, not a command.
PROSE = {"long-term", "not", "is", "that", "found", "to", "on", "contributors", "installed"}


def _code(markdown: str) -> list[str]:
    """A Markdown page's shell lines: code blocks (continued lines joined) and inline code."""
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"```[a-z]*\n(.*?)```", markdown, re.DOTALL)]
    return [line for block in blocks for line in block.splitlines()] + re.findall(r"`([^`\n]+)`", markdown)


def named_commands() -> list[tuple[str, str, str]]:
    """(where, command, `om-mcp ...`) for each om-mcp command the project's words name, from the command to the
    end of its shell command, without comments: the README and the docs pages (their code), the
    Claude Code plugin's files (its launcher `om-mcp-hook ARGS` runs `om-mcp ARGS`), the status page
    and every command's --help."""
    from om_mcp import cli

    texts: list[tuple[str, list[str]]] = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        texts.append((page.name, _code(page.read_text(encoding="utf-8"))))
    folder = REPO / "om_mcp" / "hosts" / "claude_code" / "plugin"
    plugin = [REPO / ".claude-plugin" / "marketplace.json", *sorted(p for p in folder.rglob("*") if p.is_file())]
    ui = sorted(p for p in (REPO / "om_mcp" / "server" / "http" / "ui").iterdir() if p.suffix in (".html", ".js"))
    for path in [*plugin, *ui]:
        text = re.sub(r'[^\s"]*om-mcp-hook\\?"?', "om-mcp", path.read_text(encoding="utf-8"))
        texts.append((str(path.relative_to(REPO)), text.splitlines()))
    launcher = json.loads((folder / ".mcp.json").read_text())["mcpServers"]["om-mcp"]["args"]
    texts.append(("the plugin's .mcp.json", [" ".join(["om-mcp", *launcher[1:]])]))
    for name in cli.COMMANDS:
        (sub,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
        texts.append((f"om-mcp {name} --help", sub.choices[name].format_help().splitlines()))
    found = []
    for where, lines in texts:
        for line in lines:
            if "inspector" in line:
                continue  # the Inspector's own flags follow the server command it starts
            shell = line.split("  #")[0]
            for match in re.finditer(r"(?:^|[\s;&|(\"'])(om-mcp ([a-z][a-z-]*)(?![\w:/.-])[^#;&|)\"'`]*)", shell):
                found.append((where, match.group(2), match.group(1)))
    return found


def test_every_command_named_anywhere_exists_with_those_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """The README, the docs pages, the plugin, the status page and --help name only commands, flags
    and hosts that exist (the plugin's description once named a `--plugin-only` that did not)."""
    from om_mcp import cli
    from om_mcp.hosts import ADAPTERS as HOOK_HOSTS
    from om_mcp.hosts.setup import HOSTS

    def options(parser: argparse.ArgumentParser) -> set[str]:
        found = {o for action in parser._actions for o in action.option_strings}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # `token create`
                for nested in action.choices.values():
                    found |= options(nested)
        return found

    (commands,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    named = named_commands()
    wheres = {where for where, _, _ in named}
    plugin = "om_mcp/hosts/claude_code/plugin"
    assert {"README.md", f"{plugin}/.claude-plugin/plugin.json", f"{plugin}/hooks/hooks.json"} <= wheres
    assert "the plugin's .mcp.json" in wheres
    flags = 0
    for where, command, line in named:
        words = line.split()
        if command in PROSE:
            continue
        assert command in commands.choices, f"{where} names `{line.strip()}`: there is no `om-mcp {command}`"
        taken = options(commands.choices[command])
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line):
            flags += 1
            assert flag in taken, f"{where} names `{line.strip()}`, but `om-mcp {command}` has no {flag}"
        hosts = {"setup": HOSTS, "hook": HOOK_HOSTS}.get(command)
        if hosts and len(words) > 2 and re.fullmatch(r"[a-z][a-z-]*", words[2]):
            assert words[2] in hosts, f"{where} names `{line.strip()}`: {words[2]} is no host of `om-mcp {command}`"
    assert flags >= 20  # the flags were found at all
    for command in sorted({command for _, command, _ in named} - PROSE):
        with pytest.raises(SystemExit) as done:
            cli.parser().parse_args([command, "--help"])
        assert done.value.code == 0, command
    capsys.readouterr()


def test_an_installed_claude_without_a_login_is_not_a_model(hooked: Path, tmp_path: Path) -> None:
    """`status` and `doctor` with a `claude` on PATH that answers `auth status` as logged out (2.1.197's shape)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text('#!/bin/sh\necho \'{"loggedIn": false, "authMethod": "none"}\'\nexit 1\n')
    claude.chmod(0o755)
    env = {**clean_env(tmp_path), "PATH": f"{bin_dir}:{os.environ['PATH']}", "OM_MODEL": "auto"}
    status = subprocess.run(
        [PYTHON, "-m", "om_mcp", "status", "--json", "--db", str(hooked)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    model = json.loads(status.stdout)["model"]
    assert model["model_ready"] is False
    assert "claude is installed but not logged in: run `claude auth login`" in model["reason"]
    doctor = subprocess.run(
        [PYTHON, "-m", "om_mcp", "doctor", "--db", str(hooked)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert doctor.returncode == 0 and "run `claude auth login`" in doctor.stdout and "warn" in doctor.stdout
