"""What a newcomer hit on the way in, each held by a test: the README's default scope, the example
config listing every option, server.json's model, `show --generations` on a thread with no log,
`status | head`, a backup into a missing folder, ids cut in terminal tables, and a search that looked
in one resource only."""

from __future__ import annotations

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


def test_the_readme_states_the_default_scope() -> None:
    readme = (REPO / "README.md").read_text()
    default = Config().observational_memory.scope
    assert f"`observational_memory.scope`: `{default}` (the default)" in readme


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


def test_every_command_the_readme_names_answers_help(capsys: pytest.CaptureFixture[str]) -> None:
    from om_mcp import cli

    readme = (REPO / "README.md").read_text()
    code = "\n".join(re.findall(r"```[a-z]*\n(.*?)```", readme, re.DOTALL) + re.findall(r"`([^`\n]+)`", readme))
    named = set(re.findall(r"(?:^|[\s;&|(])om-mcp ([a-z][a-z-]*)\b(?!:)", code, re.MULTILINE))
    named -= {"long-term"}  # "om-mcp long-term memory for this project": the text a hook prints
    assert {"setup", "hook", "serve", "doctor", "search"} <= named
    for command in sorted(named):
        assert command in cli.COMMANDS, f"the README names `om-mcp {command}`, which does not exist"
        with pytest.raises(SystemExit) as done:
            cli.parser().parse_args([command, "--help"])
        assert done.value.code == 0, command
    capsys.readouterr()


def readme_command_lines(page: str = "README.md") -> list[str]:
    """Each `om-mcp ...` the README (or a docs page) shows (code blocks, continued lines joined, and
    inline code), from the command to the end of its shell command, without comments."""
    readme = (REPO / page).read_text()
    blocks = [b.replace("\\\n", " ") for b in re.findall(r"```[a-z]*\n(.*?)```", readme, re.DOTALL)]
    lines = [line for block in blocks for line in block.splitlines()] + re.findall(r"`([^`\n]+)`", readme)
    found = []
    for line in lines:
        if "inspector" in line:
            continue  # the Inspector's own flags follow the server command it starts
        for match in re.finditer(r"(?:^|[\s;&|(])(om-mcp [a-z][^#;&|)]*)", line.split("  #")[0]):
            found.append(match.group(1))
    return found


@pytest.mark.parametrize(("page", "least"), [("README.md", 20), ("docs/memory.md", 10)])
def test_every_flag_the_readme_shows_is_one_its_command_takes(page: str, least: int) -> None:
    import argparse

    from om_mcp import cli

    def options(parser: argparse.ArgumentParser) -> set[str]:
        found = {o for action in parser._actions for o in action.option_strings}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for nested in action.choices.values():
                    found |= options(nested)
        return found

    (commands,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    shown = 0
    for line in readme_command_lines(page):
        command = line.split()[1]
        if command not in commands.choices:
            continue  # prose ("om-mcp long-term memory ..."); the test above holds the command names
        taken = options(commands.choices[command])
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line):
            shown += 1
            assert flag in taken, f"the README shows `{line.strip()}`, but `om-mcp {command}` has no {flag}"
    assert shown >= least  # the page's flags were found at all


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
    assert (
        model["model_ready"] is False and "claude is installed but not logged in: run `claude login`" in model["reason"]
    )
    doctor = subprocess.run(
        [PYTHON, "-m", "om_mcp", "doctor", "--db", str(hooked)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert doctor.returncode == 0 and "run `claude login`" in doctor.stdout and "warn" in doctor.stdout
