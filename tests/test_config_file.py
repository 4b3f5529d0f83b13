"""One config file every process reads: `$XDG_CONFIG_HOME/om-mcp/config.toml` (else under HOME), below
$OM_MCP_CONFIG, the `OM_*` variables and the flags; `om-mcp config path|show|set` changes one option in
place (the user's comments and other keys kept, the file checked by the model the server loads, written
atomically). And `om-mcp remember` with no target writes to the project of the current folder.

The promise that matters is held through the real processes: a setting written with `om-mcp config set`
into the default file reaches a hook's SessionStart, whose environment names no config file."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from support.hooks import Box
from support.processes import PYTHON, REPO, run_om
from support.timeouts import scaled

from om_mcp import paths
from om_mcp.config import ConfigError, load_config
from om_mcp.config.file import EditRefused, set_option, value_text

SAMPLE = REPO / "configs" / "om-mcp.toml"


def home_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path), **extra}


def test_the_default_file_is_read_below_the_environment_and_the_flags(tmp_path: Path):
    env = home_env(tmp_path)
    assert paths.config_file(None, env) is None and load_config(env=env).observational_memory.user.enabled is False
    default = tmp_path / ".config" / "om-mcp" / "config.toml"
    assert paths.default_config_file(env) == default
    default.parent.mkdir(parents=True)
    default.write_text("log_level = 'debug'\n[observational_memory.user]\nenabled = true\n")
    assert load_config(env=env).observational_memory.user.enabled is True
    assert load_config(env={**env, "OM_LOG_LEVEL": "error"}).log_level == "error"  # the environment wins
    assert load_config(env=env, overrides={"log_level": "warning"}).log_level == "warning"  # and a flag
    other = tmp_path / "other.toml"
    other.write_text("log_level = 'warning'\n")
    named = load_config(env={**env, "OM_MCP_CONFIG": str(other)})
    assert named.log_level == "warning" and named.observational_memory.user.enabled is False  # instead, not on top
    xdg = home_env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert paths.config_file(None, xdg) is None  # $XDG_CONFIG_HOME moves the default file
    with pytest.raises(ConfigError, match="not found"):  # a named file must exist; the default need not
        load_config(env={**env, "OM_MCP_CONFIG": str(tmp_path / "missing.toml")})


SETS = [
    ("observational_memory.user.enabled", "true"),
    ("observational_memory.observation.message_tokens", "20000"),
    ("log_level", "warning"),  # not TOML: a string
    ("observational_memory.model", "openai/gpt-4o-mini"),  # a key the file has only as a comment
    ("server.http.allowed_hosts", '["mem.example.com"]'),
    ("observational_memory.budget.daily_usd", "0.5"),
]


def test_set_changes_one_line_and_keeps_every_comment():
    text = SAMPLE.read_text()
    for dotted, raw in SETS:
        text = set_option(text, tuple(dotted.split(".")), value_text(raw))
    data = tomllib.loads(text)
    assert data["observational_memory"]["user"]["enabled"] is True and data["log_level"] == "warning"
    assert data["observational_memory"]["model"] == "openai/gpt-4o-mini"
    assert data["server"]["http"]["allowed_hosts"] == ["mem.example.com"]
    before, after = SAMPLE.read_text().splitlines(), text.splitlines()
    assert [line for line in before if line.lstrip().startswith("#")] == [
        line for line in after if line.lstrip().startswith("#")
    ]
    assert len(after) == len(before) + 2  # two keys the file did not set; the other four replaced in place
    assert set_option("x = 1  # why x\n", ("x",), "2") == "x = 2  # why x\n"  # a trailing comment stays
    assert set_option("", ("a", "b"), "1") == "[a]\nb = 1\n"


def test_set_refuses_a_layout_it_cannot_edit_by_text():
    with pytest.raises(EditRefused, match="by hand"):
        set_option("observational_memory = { user = { enabled = false } }\n", ("observational_memory", "scope"), '"x"')
    with pytest.raises(EditRefused, match="not valid TOML"):
        set_option("[a\n", ("a",), "1")


def om(box: Box, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "om_mcp", *args],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env=box.env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )


def session_start(box: Box, session: str) -> str:
    done = box.hook(box.event("SessionStart", None, session, source="startup"), "--no-worker")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"] if done.stdout.strip() else ""


@pytest.mark.slow
def test_a_setting_in_the_default_file_reaches_session_start_and_remember_writes_where_you_are(tmp_path: Path):
    """The first month's two surprises: on a fresh machine (no database, no config file, nothing in the
    environment but HOME) `config set` turns the person layer on, `remember` writes into the project of
    the folder it runs in and `remember --user` into the person layer, and the next SessionStart of that
    project, from a hook whose environment names no config file, shows both; turned off, the next one not."""
    box = Box(tmp_path)
    del box.env["OM_DB_PATH"]  # the database where a fresh machine has it: the data folder
    assert not any(name.startswith("OM_MCP") for name in box.env)
    config_file = tmp_path / "home" / ".config" / "om-mcp" / "config.toml"
    where = om(box, "config", "path")
    assert where.stdout.strip() == str(config_file) and not config_file.exists()

    wrong = om(box, "config", "set", "observational_memory.user.enabeld", "true")
    assert wrong.returncode == 2 and "observational_memory.user.enabeld: unknown option" in wrong.stderr
    bad = om(box, "config", "set", "observational_memory.user.tokens", "lots")
    assert bad.returncode == 2 and "observational_memory.user.tokens" in bad.stderr and not config_file.exists()
    on = om(box, "config", "set", "observational_memory.user.enabled", "true")
    assert on.returncode == 0 and str(config_file) in on.stdout, on.stderr
    shown = om(box, "config", "show")
    assert "observational_memory.user.enabled = true  # file" in shown.stdout, shown.stdout

    database = tmp_path / "xdg-data" / "om-mcp" / "memory.db"
    assert not database.exists()
    person = om(box, "remember", "--user", "Answer me in French")
    assert person.returncode == 0 and "person layer" in person.stdout, person.stderr
    here = om(box, "remember", "Run the tests with make check", cwd=box.project / "src")
    assert here.returncode == 0, here.stderr
    assert f"the project of this folder, {box.project}" in here.stdout and database.exists()

    context = session_start(box, "first")
    assert "Run the tests with make check" in context and "Answer me in French" in context, context
    off = om(box, "config", "set", "observational_memory.user.enabled", "false")
    assert off.returncode == 0, off.stderr
    context = session_start(box, "second")  # the hook's cached settings follow the file
    assert "Run the tests with make check" in context and "Answer me in French" not in context, context


@pytest.mark.slow
def test_setup_says_where_the_config_file_is(tmp_path: Path):
    listed = run_om("setup", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert f"config: {tmp_path / 'home' / '.config' / 'om-mcp' / 'config.toml'}" in listed.stdout
