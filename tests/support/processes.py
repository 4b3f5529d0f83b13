"""Child processes for tests: a clean environment, the server's command line, a command run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment for a child server: tmp HOME/XDG_DATA_HOME (so its config file is
    HOME/.config/om-mcp/config.toml), no OM_ variables, no model keys."""
    if Path(tmp_path).resolve().is_relative_to(REPO):
        raise AssertionError(f"clean_env({tmp_path}): a child's HOME must not be made inside the checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OM_") and not k.endswith("_API_KEY")}
    # The config and cache folders follow the child's own HOME (its config.toml is the test's to write).
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("XDG_CACHE_HOME", None)
    home = tmp_path / "home"
    data = tmp_path / "xdg-data"
    home.mkdir(exist_ok=True)
    data.mkdir(exist_ok=True)
    env.update(
        HOME=str(home),
        XDG_DATA_HOME=str(data),
        PYTHONUNBUFFERED="1",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_OFFLINE_MODE="true",
        PATH=os.environ.get("PATH", ""),
    )
    env.update(extra)
    return env


def use_clean_env(monkeypatch, tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment made `clean_env`'s, for a command run in process through `om_mcp.cli.main`:
    no OM_ variable of the caller's (CI exports OM_TEST_POSTGRES, which the configuration refuses as an
    unknown option), no keys, and a HOME of the test's own (no config file of the machine's is read)."""
    env = clean_env(tmp_path, **extra)
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


def server_command(*args: str) -> list[str]:
    return [PYTHON, "-m", "om_mcp", "serve", *args]


def run_om(
    *args: str, home: Path, timeout: float = 180, cwd: Path = REPO, **env: str
) -> subprocess.CompletedProcess[str]:
    """`om-mcp ARGS` as a user runs it, in `cwd` (the checkout unless given): HOME and XDG folders under
    `home`, no stdin, `env` (OM_... settings) on top of a clean environment; `timeout` is scaled by the machine."""
    from support.timeouts import scaled

    return subprocess.run(
        [PYTHON, "-m", "om_mcp", *args],
        capture_output=True,
        text=True,
        timeout=scaled(timeout),
        env={**clean_env(home), **env},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
