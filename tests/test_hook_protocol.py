"""Hook input, the project a session belongs to, what SessionStart prints, and
the plugin files that register the hooks.

Hook inputs under tests/fixtures/claude_code/hooks/ are what Claude Code
2.1.197 sent to a hook command (paths rewritten to /home/user).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.timeouts import scaled

from om_mcp.engine.recorder.text import MAX_ADDITIONAL_CONTEXT, RECALL_LINE, render_session_context, select_observations
from om_mcp.hosts.claude_code import INGEST_EVENTS, SESSION_START_SOURCES, HookInput, HookInputError, parse_hook_input
from om_mcp.hosts.claude_code.hooks import (
    PreCompactInput,
    SessionEndInput,
    SessionStartInput,
    StopInput,
    SubagentStopInput,
    ToolHookInput,
    UserPromptSubmitInput,
)
from om_mcp.hosts.common import MAX_RESOURCE_ID, find_project, hooks_disabled, session_start_output

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "om_mcp" / "hosts" / "claude_code" / "plugin"
PLUGIN_FILES = (".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json", "hooks/om-mcp-hook")
HOOKS = Path(__file__).parent / "fixtures" / "claude_code" / "hooks"


def load(name: str) -> str:
    return (HOOKS / f"{name}.json").read_text()


# --------------------------------------------------------------------------------------
# Hook input
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls", "field", "value"),
    [
        ("SessionStart-startup", SessionStartInput, "source", "startup"),
        ("SessionStart-resume", SessionStartInput, "source", "resume"),
        ("SessionStart-clear", SessionStartInput, "source", "clear"),
        ("SessionStart-compact", SessionStartInput, "model", "claude-opus-4-8"),
        ("UserPromptSubmit", UserPromptSubmitInput, "prompt", "please run ls for me\n"),
        ("Stop", StopInput, "last_assistant_message", "Tool finished; here is my summary."),
        ("SubagentStop", SubagentStopInput, "agent_type", "general-purpose"),
        ("PreCompact-manual", PreCompactInput, "trigger", "manual"),
        ("SessionEnd-clear", SessionEndInput, "reason", "clear"),
        ("SessionEnd-other", SessionEndInput, "reason", "other"),
        ("PostToolUse-Bash", ToolHookInput, "tool_name", "Bash"),
        (
            "PostToolUseFailure",
            ToolHookInput,
            "error",
            "File does not exist. Note: your current working directory is /home/user/project.",
        ),
    ],
)
def test_real_hook_inputs_parse(name: str, cls: type, field: str, value: object) -> None:
    parsed = parse_hook_input(load(name))
    assert type(parsed) is cls
    assert getattr(parsed, field) == value
    assert parsed.session_id and parsed.cwd == "/home/user/project"
    assert parsed.transcript_path and parsed.transcript_path.endswith(f"{parsed.session_id}.jsonl")


def test_subagent_stop_names_the_subagent_transcript() -> None:
    parsed = parse_hook_input(load("SubagentStop"))
    assert parsed.agent_transcript_path.endswith(f"/subagents/agent-{parsed.agent_id}.jsonl")


def test_every_event_and_source_the_plugin_registers_has_a_real_sample() -> None:
    names = {p.stem for p in HOOKS.glob("*.json")}
    for event in INGEST_EVENTS:
        assert any(n == event or n.startswith(event + "-") for n in names), event
    for source in SESSION_START_SOURCES:
        assert f"SessionStart-{source}" in names


def test_unknown_events_and_fields_are_accepted() -> None:
    parsed = parse_hook_input({"session_id": "s", "hook_event_name": "TeammateIdle", "cwd": "/x", "brand_new": 1})
    assert type(parsed) is HookInput and parsed.model_extra == {"brand_new": 1}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "stdin is empty"),
        ("   \n", "stdin is empty"),
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"hook_event_name": "Stop"}', "session_id"),
        ('{"session_id": "", "hook_event_name": "Stop"}', "session_id"),
        ('{"session_id": "s", "hook_event_name": "Stop", "stop_hook_active": "maybe"}', "stop_hook_active"),
    ],
)
def test_bad_hook_input_is_one_clear_error(raw: str, message: str) -> None:
    with pytest.raises(HookInputError) as caught:
        parse_hook_input(raw)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_hooks_kill_switch() -> None:
    assert hooks_disabled({"OM_MCP_HOOKS": "off"}) and hooks_disabled({"OM_MCP_HOOKS": " OFF "})
    assert hooks_disabled({"OM_MCP_HOOKS": "0"}) and hooks_disabled({"OM_MCP_HOOKS": "false"})
    assert not hooks_disabled({}) and not hooks_disabled({"OM_MCP_HOOKS": "on"})


# --------------------------------------------------------------------------------------
# The project (resource) of a session
# --------------------------------------------------------------------------------------


def test_project_is_the_git_root_of_cwd(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    project = find_project(repo / "src" / "pkg")
    assert project.root == repo and project.is_git and project.resource_id == str(repo)
    hook = parse_hook_input({"session_id": "s", "hook_event_name": "Stop", "cwd": str(repo / "src")})
    assert hook.project().root == repo


def test_without_git_the_project_is_cwd(tmp_path: Path) -> None:
    project = find_project(tmp_path / "plain")
    assert project.root == tmp_path / "plain" and not project.is_git
    with pytest.raises(HookInputError, match="cwd"):
        parse_hook_input({"session_id": "s", "hook_event_name": "Stop"}).project()


def test_a_linked_worktree_belongs_to_its_main_repository(tmp_path: Path) -> None:
    """git's layout, written by hand (tests/test_project_identity.py runs git itself and the attacks)."""
    main = tmp_path / "main"
    admin = main / ".git" / "worktrees" / "feature"
    admin.mkdir(parents=True)
    (main / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    tree = tmp_path / "feature-tree"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {admin}\n")
    (admin / "gitdir").write_text(f"{tree / '.git'}\n")
    (admin / "commondir").write_text("../..\n")
    assert find_project(tree).root == main
    (admin / "gitdir").write_text(f"{tmp_path / 'elsewhere' / '.git'}\n")  # it does not point back
    assert find_project(tree).root == tree
    sub = main / "vendor" / "lib"
    sub.mkdir(parents=True)
    (sub / ".git").write_text("gitdir: ../../.git/modules/lib\n")  # a submodule is its own project
    assert find_project(sub).root == sub


def test_long_paths_fit_the_resource_id_limit(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d" * 40] * 6)
    a, b = find_project(deep), find_project(deep / "other")
    assert len(a.resource_id) <= MAX_RESOURCE_ID and a.resource_id != b.resource_id


# --------------------------------------------------------------------------------------
# SessionStart output
# --------------------------------------------------------------------------------------

LOG = """\
Date: Dec 2, 2025
* 🟡 (09:00) Assistant set up the repository layout
* 🔴 (09:05) User wants all code in Python 3.11
  * -> pyproject pins requires-python >= 3.11
* 🟢 (09:30) Assistant fixed a typo in the README
Date: Dec 3, 2025
* 🟡 (10:00) Assistant added the SQLite store
* 🔴 (10:15) User's deadline is Friday Dec 12
Date: Dec 4, 2025
* 🟡 (14:34) Assistant is fixing the login timeout in auth/session.py
  * -> read session.py: timeout hard-coded to 300 s
* ✅ (14:41) Login timeout fixed; test suite passes (212 tests)"""


def test_context_holds_everything_when_it_fits() -> None:
    text = render_session_context(LOG, "- name: Ada", "Finish the store", "Ask about the deadline")
    assert LOG in text and "<working-memory>\n- name: Ada\n</working-memory>" in text
    assert "<current-task>\nFinish the store\n</current-task>" in text
    assert "<suggested-response>\nAsk about the deadline\n</suggested-response>" in text
    assert text.endswith(RECALL_LINE) and len(text) <= 8000


def test_nothing_to_say_prints_nothing() -> None:
    assert render_session_context("", None, None, None) == ""
    assert render_session_context("  \n", "", "  ", None) == ""
    assert session_start_output("") == ""


def test_cutting_keeps_the_newest_day_and_red_lines_first() -> None:
    body = select_observations(LOG, 450)
    assert "Date: Dec 4, 2025" in body and "Login timeout fixed" in body and "hard-coded to 300 s" in body
    assert "User's deadline is Friday" in body and "all code in Python 3.11" in body
    assert "typo in the README" not in body and "SQLite store" not in body
    assert re.match(r"\[\d+ older observation\(s\) not shown here; `recall` can find them\]", body)
    # kept lines stay in the log's order, each under its own date
    assert body.index("Date: Dec 2") < body.index("Python 3.11") < body.index("Date: Dec 3") < body.index("Date: Dec 4")
    assert len(body) <= 450


def test_tiny_budget_still_keeps_red_lines_before_others() -> None:
    body = select_observations(LOG, 150)
    assert "User's deadline is Friday" in body and "Assistant added the SQLite store" not in body


def test_working_memory_cannot_crowd_out_the_log() -> None:
    text = render_session_context(LOG, "w" * 50_000, None, None, max_chars=3000)
    assert len(text) <= 3000 and "Login timeout fixed" in text and "<working-memory>" in text


@settings(max_examples=150, deadline=None)
@given(
    log=st.lists(
        st.one_of(
            st.builds(lambda d: f"Date: Dec {d}, 2025", st.integers(1, 28)),
            st.builds(
                lambda m, t: f"* {m} (10:00) {t}", st.sampled_from(["🔴", "🟡", "🟢", "✅"]), st.text(max_size=300)
            ),
            st.builds(lambda t: f"  * -> {t}", st.text(max_size=200)),
            st.text(max_size=100),
        ),
        max_size=60,
    ).map("\n".join),
    wm=st.one_of(st.none(), st.text(max_size=3000)),
    task=st.one_of(st.none(), st.text(max_size=3000)),
    reply=st.one_of(st.none(), st.text(max_size=500)),
    max_chars=st.integers(0, 9000),
)
@pytest.mark.slow
def test_context_never_exceeds_max_chars(
    log: str, wm: str | None, task: str | None, reply: str | None, max_chars: int
) -> None:
    assert len(render_session_context(log, wm, task, reply, max_chars=max_chars)) <= max_chars


def test_session_start_output_shape() -> None:
    context = render_session_context(LOG)
    out = json.loads(session_start_output(context))
    assert out == {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}
    assert len(context) <= MAX_ADDITIONAL_CONTEXT


# --------------------------------------------------------------------------------------
# Plugin files and the hook launcher
# --------------------------------------------------------------------------------------


def test_plugin_registers_the_hook_command_for_every_event() -> None:
    plugin = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    assert plugin["name"] == "om-mcp" and market["plugins"][0]["name"] == "om-mcp"
    # The plugin's source is its own folder, not the clone: Claude Code copies the source folder whole.
    assert (REPO / market["plugins"][0]["source"]).resolve() == PLUGIN.resolve()
    assert sorted(str(p.relative_to(PLUGIN)) for p in PLUGIN.rglob("*") if p.is_file()) == sorted(PLUGIN_FILES)
    # The server is declared in .mcp.json at the plugin root, where Claude Code counts it (`mcpServers` in
    # plugin.json counted 0 servers in `claude plugin details`, 2.1.197), and started through the launcher.
    assert "mcpServers" not in plugin
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert servers == {
        "om-mcp": {"command": "sh", "args": ["${CLAUDE_PLUGIN_ROOT}/hooks/om-mcp-hook", "serve", "--hooks"]}
    }
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", *INGEST_EVENTS}
    assert hooks["SessionStart"][0]["matcher"] == "|".join(SESSION_START_SOURCES)
    for groups in hooks.values():
        (hook,) = groups[0]["hooks"]
        assert hook["command"] == 'sh "${CLAUDE_PLUGIN_ROOT}/hooks/om-mcp-hook" hook claude-code'
        assert 0 < hook["timeout"] <= 30
    # a hook whose output matters, or that runs as the session ends, is waited for
    for event in ("SessionStart", "Stop", "PreCompact", "SessionEnd"):
        assert not hooks[event][0]["hooks"][0].get("async")


def test_settings_snippet_matches_the_plugin() -> None:
    plugin = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    snippet = json.loads((REPO / "configs" / "claude-code-settings.json").read_text())["hooks"]
    assert set(snippet) == set(plugin)
    for event, groups in snippet.items():
        (hook,) = groups[0]["hooks"]
        assert hook["command"] == "om-mcp hook claude-code || true"
        assert groups[0].get("matcher") == plugin[event][0].get("matcher")
        assert hook.get("async") == plugin[event][0]["hooks"][0].get("async")


@pytest.mark.skipif(shutil.which("claude") is None, reason="the claude CLI is not installed")
@pytest.mark.slow
def test_claude_plugin_validate_passes(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    for target in (".", str(PLUGIN / ".claude-plugin" / "plugin.json")):
        done = subprocess.run(
            ["claude", "plugin", "validate", "--strict", target],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Validation passed" in done.stdout


def _claude(home: Path, *args: str) -> str:
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    done = subprocess.run(["claude", *args], cwd=home, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _cached(home: Path) -> tuple[list[str], int]:
    """The files Claude Code copied into its plugin cache for om-mcp, and their bytes."""
    (version,) = (home / ".claude" / "plugins" / "cache" / "om-mcp" / "om-mcp").iterdir()
    files = [p for p in version.rglob("*") if p.is_file()]
    return sorted(str(p.relative_to(version)) for p in files), sum(p.stat().st_size for p in files)


@pytest.mark.skipif(shutil.which("claude") is None, reason="the claude CLI is not installed")
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_plugin_from_a_clone_with_a_venv_is_its_own_files_only(tmp_path: Path) -> None:
    """A clone as the README makes it (a `.venv`, build output) installed as a local marketplace (no
    network): Claude Code copies the plugin's folder, a few kilobytes, and counts 1 server and 6 hooks."""
    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, clone / name)
    for junk in (".venv/lib/python3/site-packages/big.bin", "build/lib/om_mcp/big.bin", "dist/om_mcp.whl"):
        (clone / junk).parent.mkdir(parents=True, exist_ok=True)
        (clone / junk).write_bytes(os.urandom(1 << 20))
    home = tmp_path / "home"
    home.mkdir()
    _claude(home, "plugin", "marketplace", "add", str(clone))
    _claude(home, "plugin", "install", "om-mcp@om-mcp")
    files, size = _cached(home)
    assert files == sorted(PLUGIN_FILES) and size < 20_000, (files, size)
    details = _claude(home, "plugin", "details", "om-mcp@om-mcp")
    assert "MCP servers (1)" in details and "Hooks (6)" in details, details


@pytest.mark.skipif(shutil.which("claude") is None, reason="the claude CLI is not installed")
def test_setup_lays_out_the_plugin_for_claude_to_install(tmp_path: Path) -> None:
    """Without a clone (om-mcp from a wheel): `setup claude-code --plugin` writes a local marketplace."""
    from support.processes import clean_env

    home = tmp_path / "home"
    env = {**clean_env(tmp_path), "XDG_CONFIG_HOME": str(home / ".config")}
    done = subprocess.run(
        [sys.executable, "-m", "om_mcp", "setup", "claude-code", "--plugin"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    folder = Path(env["XDG_DATA_HOME"]) / "om-mcp" / "claude-code-plugin"
    assert f"next: claude plugin marketplace add {folder} && claude plugin install om-mcp@om-mcp" in done.stdout
    _claude(home, "plugin", "marketplace", "add", str(folder))
    _claude(home, "plugin", "install", "om-mcp@om-mcp")
    assert _cached(home)[0] == sorted(PLUGIN_FILES)
    details = _claude(home, "plugin", "details", "om-mcp@om-mcp")
    assert "MCP servers (1)" in details and "Hooks (6)" in details, details


def _launcher(
    tmp_path: Path, env: dict[str, str], stdin: str = "{}", args: tuple[str, ...] = ("hook", "claude-code")
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    return subprocess.run(
        ["sh", str(PLUGIN / "hooks" / "om-mcp-hook"), *args],
        input=stdin,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=scaled(30),
    )


def _fake_om_mcp(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "om-mcp"
    script.write_text(
        f"#!{sys.executable}\nimport sys, json\n"
        "data = sys.stdin.read()\n"
        "print(json.dumps({'argv': sys.argv[1:], 'stdin': data, 'me': sys.argv[0]}))\n"
        "sys.exit(3)\n"
    )
    script.chmod(0o755)
    return script


def test_launcher_runs_om_mcp_hook_with_stdin(tmp_path: Path) -> None:
    _fake_om_mcp(tmp_path / "bin")
    done = _launcher(tmp_path, {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}, stdin='{"session_id": "s"}')
    assert done.returncode == 0  # fails open even when om-mcp fails
    ran = json.loads(done.stdout)
    assert (ran["argv"], ran["stdin"]) == (["hook", "claude-code"], '{"session_id": "s"}')


def test_launcher_falls_back_to_uvx_where_no_om_mcp_is_installed(tmp_path: Path) -> None:
    """Nothing recorded, none on PATH or in ~/.local/bin: `uvx om-mcp` (the release on PyPI)."""
    uvx = _fake_om_mcp(tmp_path / "home" / ".local" / "bin").rename(tmp_path / "home" / ".local" / "bin" / "uvx")
    ran = json.loads(_launcher(tmp_path, {}).stdout)
    assert ran["me"] == str(uvx) and ran["argv"] == ["om-mcp", "hook", "claude-code"]
    served = _launcher(tmp_path, {}, args=("serve", "--hooks"))
    assert served.returncode == 3 and json.loads(served.stdout)["argv"] == ["om-mcp", "serve", "--hooks"]


def test_launcher_finds_om_mcp_in_local_bin_or_om_mcp_bin(tmp_path: Path) -> None:
    _fake_om_mcp(tmp_path / "home" / ".local" / "bin")
    assert json.loads(_launcher(tmp_path, {}).stdout)["argv"] == ["hook", "claude-code"]
    other = _fake_om_mcp(tmp_path / "elsewhere")
    (tmp_path / "home" / ".local" / "bin" / "om-mcp").unlink()
    assert json.loads(_launcher(tmp_path, {"OM_MCP_BIN": str(other)}).stdout)["argv"] == ["hook", "claude-code"]


def test_launcher_prefers_what_setup_recorded_then_path(tmp_path: Path) -> None:
    """A clone's venv is found with no PATH at all, as `om-mcp setup claude-code --plugin` recorded it."""
    on_path = _fake_om_mcp(tmp_path / "bin")
    recorded = _fake_om_mcp(tmp_path / "clone" / ".venv" / "bin")
    record = tmp_path / "home" / ".config" / "om-mcp" / "om-mcp-command"
    record.parent.mkdir(parents=True)
    record.write_text(f"{recorded}\n")
    env = {"PATH": f"{on_path.parent}:/usr/bin:/bin", "CLAUDE_PLUGIN_ROOT": str(PLUGIN)}
    for expected in (recorded, on_path):
        served = _launcher(tmp_path, env, args=("serve", "--hooks"))
        assert served.returncode == 3  # the server's own exit code: not a hook, nothing to hide
        ran = json.loads(served.stdout)
        assert (ran["argv"], ran["me"]) == (["serve", "--hooks"], str(expected))
        Path(expected).unlink()
    assert "not found" in _launcher(tmp_path, {"PATH": "/usr/bin:/bin"}, args=("serve",)).stderr


def test_launcher_fails_open_without_om_mcp_and_honours_the_kill_switch(tmp_path: Path) -> None:
    done = _launcher(tmp_path, {})
    assert done.returncode == 0 and done.stdout == "" and "om-mcp not found" in done.stderr
    _fake_om_mcp(tmp_path / "bin")
    done = _launcher(tmp_path, {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "OM_MCP_HOOKS": "off"})
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


def test_what_each_event_does() -> None:
    from om_mcp.hosts.claude_code import HookPlan, plan_for

    for name in ("SessionStart-startup", "SessionStart-resume", "SessionStart-clear", "SessionStart-compact"):
        assert plan_for(parse_hook_input(load(name))) == HookPlan(ingest=True, print_context=True)
    for name in ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact-manual", "SessionEnd-other"):
        assert plan_for(parse_hook_input(load(name))) == HookPlan(ingest=True)
    for name in ("PreToolUse-Bash", "PostToolUse-Bash", "SubagentStart", "PostCompact-manual"):
        assert plan_for(parse_hook_input(load(name))) == HookPlan()
