"""`om-mcp setup HOST` against a temporary home that already holds a realistic config for the host
(other servers, other hooks, settings of its own): the merge, a second run that changes nothing, the
backup, --dry-run, --uninstall, the check it runs afterwards; and, where the host's CLI is installed,
the host itself reading what was written (skipped, with the reason, where it is not)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.processes import PYTHON, REPO, clean_env
from support.timeouts import scaled

from om_mcp.hosts.setup.entries import is_our_hook
from om_mcp.hosts.setup.files import blank_jsonc
from om_mcp.hosts.setup.launch import om_mcp_command

pytestmark = pytest.mark.slow
OM_MCP = str(Path(PYTHON).parent / "om-mcp")  # the console script of the interpreter running the tests


def setup(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", "setup", *args],
        capture_output=True,
        text=True,
        timeout=scaled(240),
        env=env_for(home),
        cwd=cwd or home,
        stdin=subprocess.DEVNULL,
    )


def env_for(home: Path) -> dict[str, str]:
    env = clean_env(home.parent)
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"), XDG_CONFIG_HOME=str(home / ".config"))
    env.pop("CODEX_HOME", None)
    return env


def write(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2) + "\n")
    return path


USER_HOOK = {"type": "command", "command": "./scripts/lint.sh", "timeout": 5}

# host -> (files: relative path -> existing content, checker of the merged result)
EXISTING: dict[str, dict[str, object]] = {
    "claude-code": {
        ".claude.json": {
            "numStartups": 12,
            "mcpServers": {"github": {"type": "stdio", "command": "gh-mcp", "args": []}},
        },
        ".claude/settings.json": {
            "permissions": {"allow": ["Bash(git status)"]},
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [USER_HOOK]}],
                "Stop": [{"hooks": [USER_HOOK]}],
                # an earlier manual install, from the README's snippet: replaced, not doubled
                "SessionEnd": [{"hooks": [{"type": "command", "command": "om-mcp hook claude-code || true"}]}],
            },
        },
    },
    "claude-desktop": {
        ".config/Claude/claude_desktop_config.json": {"mcpServers": {"files": {"command": "npx", "args": ["fs"]}}}
    },
    "cursor": {
        ".cursor/mcp.json": {"mcpServers": {"linear": {"url": "https://mcp.linear.app/sse"}}},
        ".cursor/hooks.json": {"version": 1, "hooks": {"afterFileEdit": [{"command": "./format.sh"}]}},
    },
    "vscode": {
        # VS Code allows trailing commas (JSONC); without comments the file is rewritten as plain JSON
        ".config/Code/User/mcp.json": '{\n  "servers": {\n    "playwright": {"command": "npx", "args": ["pw"],},\n'
        '  },\n  "inputs": [],\n}\n',
        ".copilot/hooks/security.json": {"hooks": {"PreToolUse": [USER_HOOK]}},
    },
    "codex": {
        ".codex/config.toml": '# my Codex settings\nmodel = "gpt-5-codex"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
        'args = ["--stdio"]  # keep me\n\n[features]\nweb_search = true\n',
        ".codex/hooks.json": {"hooks": {"Stop": [{"hooks": [USER_HOOK]}]}},
    },
    "gemini-cli": {
        ".gemini/settings.json": {
            "ui": {"theme": "GitHub"},
            "mcpServers": {"jira": {"command": "jira-mcp"}},
            "hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [USER_HOOK]}]},
        }
    },
    "copilot-cli": {
        ".copilot/mcp-config.json": {"mcpServers": {"docs": {"type": "local", "command": "docs-mcp", "tools": ["*"]}}},
        ".copilot/settings.json": {"banner": "never", "hooks": {"PreToolUse": [USER_HOOK]}},
    },
}


def test_every_host_is_set_up_over_files_already_there() -> None:
    """The merge test below covers each host setup knows, read from its registry."""
    from om_mcp.hosts.setup import HOSTS

    assert set(EXISTING) == set(HOSTS)


def parsed(path: Path) -> object:
    text = path.read_text()
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(blank_jsonc(text)[0])


def hook_commands(doc: object) -> list[str]:
    """Every hook command line in a config object, whatever its shape."""
    found: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "command" and isinstance(value, str) and " hook " in value:
                found.append(value)
            else:
                found.extend(hook_commands(value))
    elif isinstance(doc, list):
        for item in doc:
            found.extend(hook_commands(item))
    return found


@pytest.mark.parametrize("host", list(EXISTING))
def test_setup_merges_checks_repeats_and_uninstalls(tmp_path: Path, host: str) -> None:
    home = tmp_path / "home"
    originals = {name: write(home / name, content) for name, content in EXISTING[host].items()}
    before = {p: parsed(p) for p in originals.values()}

    dry = setup(home, host, "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "+++ " in dry.stdout and OM_MCP in dry.stdout
    assert {p: parsed(p) for p in originals.values()} == before  # a dry run changes nothing

    done = setup(home, host)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok: the server starts and lists 9 tools" in done.stdout
    if host != "claude-desktop":
        assert "check: ok: the hook command runs on a sample SessionStart and exits 0" in done.stdout
    written = {Path(line.split(": ")[0]) for line in done.stdout.splitlines() if ": wrote the " in line}
    for path in written:
        merged = parsed(path)
        if path in before:  # everyone else's entries are still there
            assert_contains(merged, before[path], path)
            backup = path.with_name(path.name + ".om-mcp.bak")
            assert backup.read_text() == EXISTING[host][str(path.relative_to(home))] or parsed(backup) == before[path]
        commands = [c for c in hook_commands(merged) if is_our_hook({"command": c})]
        assert all(c.startswith(OM_MCP + " hook ") for c in commands), commands  # absolute, not `om-mcp`
    text = "".join(p.read_text() for p in written)
    assert text.count(f'"{OM_MCP}"') >= 1 and '"serve"' in text

    snapshot = {p: p.read_text() for p in written}
    again = setup(home, host, "--no-check")
    assert again.returncode == 0 and ": wrote the " not in again.stdout and "unchanged" in again.stdout
    assert {p: p.read_text() for p in written} == snapshot  # idempotent, byte for byte

    gone = setup(home, host, "--uninstall")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    for path, was in before.items():
        after, expected = parsed(path), without_om_mcp_hooks(was)
        # The check ran the host's own CLI (`claude auth status` when resolving the model), which records
        # its first start in ~/.claude.json: keys of its own, none of them ours.
        own = {k: v for k, v in after.items() if k not in expected} if isinstance(after, dict) else {}
        assert "om-mcp" not in json.dumps(own) and OM_MCP not in json.dumps(own), own
        assert {k: v for k, v in after.items() if k not in own} == expected  # exactly what setup added is removed
    for path in written - set(before):
        assert not path.exists()  # files setup created are gone
    assert not list(home.rglob("*.om-mcp.bak"))  # and so are the backups it made
    assert setup(home, host, "--uninstall").stdout.count("unchanged") == len(written)


def without_om_mcp_hooks(doc: object) -> object:
    """The config as uninstall leaves it: om-mcp's hooks gone, and the lists and tables they leave empty."""
    from om_mcp.hosts.setup.entries import drop_grouped_hooks

    copy = json.loads(json.dumps(doc))
    return drop_grouped_hooks(copy) if isinstance(copy, dict) else copy


def assert_contains(merged: object, original: object, path: Path) -> None:
    if isinstance(original, dict):
        assert isinstance(merged, dict), path
        for key, value in original.items():
            if key == "SessionEnd":  # the old manual om-mcp hook was replaced by the new one
                continue
            assert key in merged, (path, key)
            assert_contains(merged[key], value, path)
    elif isinstance(original, list):
        assert isinstance(merged, list) and all(item in merged for item in original), (path, original)
    else:
        assert merged == original, (path, original)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under `root`."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def on_path(tmp_path: Path) -> dict[str, str]:
    """PATH with this om-mcp on it (as pipx or uv would put it) and nothing of the machine's om-mcp."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (folder / "om-mcp").symlink_to(OM_MCP)
    return {"PATH": os.pathsep.join([str(folder), *[p for p in os.environ["PATH"].split(os.pathsep) if p]])}


def test_setup_with_project_writes_the_project_files(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()
    home.mkdir()
    done = setup(home, "cursor", "--project", "--no-check", cwd=project / "src")
    assert done.returncode == 0, done.stderr
    assert (project / ".cursor" / "mcp.json").exists() and (project / ".cursor" / "hooks.json").exists()
    assert not (home / ".cursor").exists()
    desktop = setup(home, "claude-desktop", "--project", cwd=project)
    assert desktop.returncode == 2 and "no project-level file" in desktop.stderr


@pytest.mark.parametrize("host", ["claude-code", "cursor", "vscode", "codex", "gemini-cli"])
def test_project_files_run_om_mcp_from_path_and_uninstall_leaves_the_tree_as_found(tmp_path: Path, host: str) -> None:
    """Files meant to be committed name `om-mcp`, found on each teammate's PATH, never this machine's venv;
    their check runs that; and `--uninstall` leaves the repository byte for byte as it was."""
    home, project = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    (project / ".git").mkdir(parents=True)
    write(project / ".gitignore", "node_modules/\n")
    write(project / ".vscode" / "settings.json", {"editor.tabSize": 2})  # a folder setup shares with the user
    before = tree(project)
    env = {**env_for(home), **on_path(tmp_path)}
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "setup", host, "--project"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok: the server starts" in done.stdout and "check: ok: the hook command runs" in done.stdout
    written = [p for p in tree(project) if p not in before and (project / p).is_file()]
    assert written
    for name in written:
        text = (project / name).read_text()
        assert str(Path(OM_MCP).parent) not in text and str(tmp_path) not in text, (name, text)
        assert "om-mcp hook " in text or '"om-mcp"' in text, (name, text)
    assert not (home / ".codex" / "config.toml").exists()  # a project's Codex hooks are each person's to trust
    gone = subprocess.run(
        [PYTHON, "-m", "om_mcp", "setup", host, "--project", "--uninstall"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=240,
    )
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert tree(project) == before  # no backup, no empty folder, nothing else


def test_without_om_mcp_on_path_project_setup_says_how_teammates_get_it(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "repo"
    home.mkdir()
    (project / ".git").mkdir(parents=True)
    env = {**env_for(home), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [PYTHON, "-m", "om_mcp", "setup", "cursor", "--project", "--no-check"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: `om-mcp` is not on PATH here: the project's files run it from PATH" in done.stdout


@pytest.mark.parametrize("host", list(EXISTING))
def test_a_dry_run_writes_nothing_anywhere(tmp_path: Path, host: str) -> None:
    home = tmp_path / "home"
    for name, content in EXISTING[host].items():
        write(home / name, content)
    env_for(home)  # the folders a test's environment makes
    before = tree(tmp_path)
    done = setup(home, host, "--dry-run")
    assert done.returncode == 0 and "+++ " in done.stdout, done.stdout + done.stderr
    assert tree(tmp_path) == before
    if host == "claude-code":
        plugin = setup(home, host, "--plugin", "--dry-run")
        assert plugin.returncode == 0 and "would record" in plugin.stdout and "would lay out" in plugin.stdout
        assert tree(tmp_path) == before  # not even the record for the plugin's launcher


def test_a_refused_file_means_no_file_is_written(tmp_path: Path) -> None:
    home = tmp_path / "home"
    commented = write(home / ".cursor" / "mcp.json", '{\n  // mine\n  "mcpServers": {"a": {"command": "x"}}\n}\n')
    env_for(home)
    before = tree(tmp_path)
    done = setup(home, "cursor", "--no-check")
    assert done.returncode == 1 and tree(tmp_path) == before  # not the hooks either
    assert "has comments" in done.stdout and f'"command": "{OM_MCP}"' in done.stdout
    assert f"nothing written (not {home / '.cursor' / 'hooks.json'} either)" in done.stdout
    commented.write_text(
        commented.read_text().replace(
            '"a": {"command": "x"}',
            f'"a": {{"command": "x"}}, "om-mcp": {{"command": "{OM_MCP}", "args": ["serve", "--hooks"]}}',
        )
    )
    again = setup(home, "cursor", "--no-check")  # added by hand: the rest is written now
    assert again.returncode == 0, again.stdout + again.stderr
    assert "hooks.json: wrote the hooks" in again.stdout and "mcp.json: MCP server already in place" in again.stdout


def test_a_file_that_cannot_be_written_undoes_the_ones_before(tmp_path: Path, monkeypatch) -> None:
    from om_mcp.hosts.setup import files
    from om_mcp.hosts.setup.files import Change, ConfigProblem, write_all

    first, second = tmp_path / "a" / "one.json", tmp_path / "b" / "two.json"
    write(first, {"x": 1})
    blocked = write(tmp_path / "c", "a file where a folder should be")
    changes = [Change(first, first.read_text(), '{"x": 2}\n', "hooks"), Change(blocked / "x.json", None, "{}", "x")]
    with pytest.raises(ConfigProblem, match="is not a folder"):
        write_all(changes)  # refused before anything is written
    assert json.loads(first.read_text()) == {"x": 1}

    real = files.apply

    def failing(change: Change, *, backup: bool = True) -> Path | None:
        if change.path == second:
            raise ConfigProblem(f"{second}: cannot be written (disk full); nothing changed")
        return real(change, backup=backup)

    monkeypatch.setattr(files, "apply", failing)
    changes = [Change(first, first.read_text(), '{"x": 2}\n', "hooks"), Change(second, None, "{}\n", "hooks")]
    with pytest.raises(ConfigProblem, match="disk full"):
        write_all(changes)
    assert json.loads(first.read_text()) == {"x": 1} and not first.with_name("one.json.om-mcp.bak").exists()


def test_a_file_that_does_not_parse_or_has_comments_is_left_untouched(tmp_path: Path) -> None:
    home = tmp_path / "home"
    broken = write(home / ".cursor" / "mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x"\n  }\n')
    done = setup(home, "cursor", "--no-check")
    assert done.returncode == 1 and broken.read_text().startswith('{\n  "mcpServers"')
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"om-mcp setup: {broken}:5: not valid JSON")
    commented = write(
        home / ".config" / "Code" / "User" / "mcp.json", '{\n  // my servers\n  "servers": {"a": {"command": "x"}}\n}\n'
    )
    kept = commented.read_text()
    done = setup(home, "vscode", "--no-check")
    assert done.returncode == 1 and commented.read_text() == kept
    assert "has comments" in done.stdout and f'"command": "{OM_MCP}"' in done.stdout  # what to paste by hand


def test_setup_with_no_host_lists_what_each_would_get(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    done = setup(home)
    assert done.returncode == 0, done.stderr
    rows = {line.split("\t")[0]: line.split("\t") for line in done.stdout.splitlines() if "\t" in line}
    assert set(rows) >= {"claude-code", "claude-desktop", "cursor", "vscode", "codex", "gemini-cli"}
    assert rows["cursor"][1].endswith(".cursor exists") and rows["cursor"][2] == "MCP server and hooks"
    assert rows["claude-desktop"][2] == "MCP server" and OM_MCP in done.stdout


def test_the_command_written_is_the_running_om_mcp(tmp_path: Path) -> None:
    script = tmp_path / "venv" / "bin" / "om-mcp"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    python = tmp_path / "venv" / "bin" / "python"
    assert om_mcp_command(str(script), str(python)) == [str(script)]  # the console script (venv, pipx, uv)
    assert om_mcp_command("/x/om_mcp/__main__.py", str(python)) == [str(script)]  # python -m, script beside
    bare = tmp_path / "bare" / "python3"
    assert om_mcp_command("/x/om_mcp/__main__.py", str(bare)) == [str(bare), "-m", "om_mcp"]
    # Run by `uvx om-mcp`: the environment is uv's cache, which uv may prune, so hosts run uvx itself.
    cached = tmp_path / ".cache" / "uv" / "archive-v0" / "Xy12" / "bin"
    cached.mkdir(parents=True)
    (cached / "om-mcp").write_text("#!/bin/sh\n")
    (cached / "om-mcp").chmod(0o755)
    command = om_mcp_command(str(cached / "om-mcp"), str(cached / "python"))
    assert command[-1] == "om-mcp" and Path(command[0]).name == "uvx"


# --------------------------------------------------------------------------------------
# The hosts' own CLIs read what setup wrote (each needs no login and no network for this)
# --------------------------------------------------------------------------------------


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = env_for(home)
    env["PATH"] = os.pathsep.join([str(Path(PYTHON).parent), env["PATH"]])
    # How long `claude mcp list` gives a server to start (30 s by default; it honours up to 60): a loaded
    # machine's start takes longer.
    env["MCP_TIMEOUT"] = str(int(min(scaled(30.0), 60.0) * 1000))
    return subprocess.run(
        args, capture_output=True, text=True, timeout=scaled(180), env=env, cwd=home, stdin=subprocess.DEVNULL
    )


@pytest.mark.skipif(
    shutil.which("claude") is None, reason="the claude CLI is not installed (npm @anthropic-ai/claude-code)"
)
def test_claude_mcp_list_shows_om_mcp_connected(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert setup(home, "claude-code", "--no-check").returncode == 0
    listed = cli(home, "claude", "mcp", "list")  # it starts every server to report its health
    assert listed.returncode == 0, listed.stdout + listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("om-mcp:"))
    assert f"{OM_MCP} serve --hooks" in line and "Connected" in line, listed.stdout
    # its probe session ends without a transcript: the hook stores nothing and logs nothing for it
    log = home / ".local" / "share" / "om-mcp" / "hook.log"
    assert not log.exists() or log.read_text() == "", log.read_text()


@pytest.mark.skipif(shutil.which("codex") is None, reason="the codex CLI is not installed (npm @openai/codex)")
def test_codex_mcp_get_reads_the_server_entry(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / ".codex" / "config.toml", EXISTING["codex"][".codex/config.toml"])
    assert setup(home, "codex", "--no-check").returncode == 0
    got = cli(home, "codex", "mcp", "get", "om-mcp", "--json")
    assert got.returncode == 0, got.stdout + got.stderr
    entry = json.loads(got.stdout)
    assert entry["transport"]["command"] == OM_MCP and entry["transport"]["args"] == ["serve", "--hooks"]
    listed = cli(home, "codex", "mcp", "list")
    assert "docs" in listed.stdout and "om-mcp" in listed.stdout  # the user's server is still there


@pytest.mark.skipif(shutil.which("codex") is None, reason="the codex CLI is not installed (npm @openai/codex)")
def test_codex_trusts_the_hooks_setup_wrote_and_uninstall_takes_the_trust_back(tmp_path: Path) -> None:
    """Codex runs no untrusted hook: setup has Codex trust its own (none of the user's), Codex lists them
    trusted, doctor agrees, and --uninstall leaves config.toml byte for byte as it was."""
    from om_mcp.hosts.setup.codex_trust import list_hooks

    home = tmp_path / "home"
    config = write(home / ".codex" / "config.toml", EXISTING["codex"][".codex/config.toml"])
    write(home / ".codex" / "hooks.json", EXISTING["codex"][".codex/hooks.json"])
    original = config.read_bytes()
    done = setup(home, "codex", "--no-check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hooks: Codex trusts the 4 hooks" in done.stdout
    hooks = list_hooks(shutil.which("codex") or "codex", home, env_for(home))
    trust = {h.command: h.trust for h in hooks}
    assert trust.pop(USER_HOOK["command"]) == "untrusted"  # the user's own hook is theirs to trust
    assert set(trust.values()) == {"trusted"} and len(trust) == 1 and len(hooks) == 5
    doctor = subprocess.run(
        [PYTHON, "-m", "om_mcp", "doctor"], capture_output=True, text=True, env=env_for(home), timeout=240
    )
    assert "Codex trusts om-mcp's 4 hooks" in doctor.stdout, doctor.stdout
    gone = setup(home, "codex", "--uninstall")
    assert gone.returncode == 0 and "removed Codex's trust in 4 hooks" in gone.stdout, gone.stdout + gone.stderr
    assert config.read_bytes() == original


@pytest.mark.skipif(shutil.which("codex") is None, reason="the codex CLI is not installed (npm @openai/codex)")
def test_doctor_reports_codex_hooks_that_are_not_trusted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"{OM_MCP} hook codex || true"}]}]}}
    write(home / ".codex" / "hooks.json", hooks)  # as a manual install, or a setup from before trust existed
    doctor = subprocess.run(
        [PYTHON, "-m", "om_mcp", "doctor", "--json"], capture_output=True, text=True, env=env_for(home), timeout=240
    )
    (check,) = [c for c in json.loads(doctor.stdout)["checks"] if c["check"] == "codex hooks"]
    assert (
        check["result"] == "warn" and "Codex skips 1 of om-mcp's hooks until they are trusted (stop)" in check["detail"]
    )
    assert "run `om-mcp setup codex` again" in check["detail"]


@pytest.mark.skipif(shutil.which("gemini") is None, reason="the gemini CLI is not installed (npm @google/gemini-cli)")
def test_gemini_mcp_list_reads_the_server_entry(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / ".gemini" / "settings.json", EXISTING["gemini-cli"][".gemini/settings.json"])
    assert setup(home, "gemini-cli", "--no-check").returncode == 0
    listed = cli(home, "gemini", "mcp", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    said = listed.stdout + listed.stderr  # 0.61.0 prints the list on stderr
    assert f"om-mcp: {OM_MCP} serve --hooks (stdio)" in said and "jira" in said


def test_setup_answers_help_and_needs_no_claude(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = env_for(home)
    env["PATH"] = "/nonexistent"  # no claude, codex, node or anything else
    done = subprocess.run(
        [sys.executable, "-m", "om_mcp", "setup", "claude-code"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=scaled(240),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: ok" in done.stdout


def test_setup_for_the_plugin_records_where_om_mcp_is_and_lays_the_plugin_out(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env_for(home)
    before = tree(tmp_path)
    done = setup(home, "claude-code", "--plugin")
    assert done.returncode == 0, done.stderr
    record = home / ".config" / "om-mcp" / "om-mcp-command"
    assert record.read_text() == OM_MCP + "\n"  # what the plugin's launcher runs, before PATH
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()
    folder = home / ".local" / "share" / "om-mcp" / "claude-code-plugin"
    laid = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert laid == [
        ".claude-plugin/marketplace.json",
        "om-mcp/.claude-plugin/plugin.json",
        "om-mcp/.mcp.json",
        "om-mcp/hooks/hooks.json",
        "om-mcp/hooks/om-mcp-hook",
    ]
    assert os.access(folder / "om-mcp" / "hooks" / "om-mcp-hook", os.X_OK)
    gone = setup(home, "claude-code", "--plugin", "--uninstall")
    assert gone.returncode == 0, gone.stderr
    assert {k: v for k, v in tree(tmp_path).items() if ".config" not in k and ".local" not in k} == before


def test_plain_setup_writes_nothing_for_the_plugin(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert setup(home, "claude-code", "--no-check").returncode == 0
    assert not (home / ".config" / "om-mcp").exists()
