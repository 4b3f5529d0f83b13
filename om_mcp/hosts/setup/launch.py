"""The command a host should run to start this very om-mcp, as absolute paths.

GUI apps (Claude Desktop, Cursor, VS Code) do not see the shell's PATH, and a
clone's venv is on nobody's PATH, so `setup` writes where the running om-mcp
is, not the word `om-mcp`:

* run as the console script (`om-mcp setup ...` from a venv, pipx, uv tool, a
  system install): that script's absolute path, not resolved through symlinks
  (pipx's `~/.local/bin/om-mcp` link survives reinstalls; the venv's
  `bin/python` link is what makes it that venv);
* run as `python -m om_mcp`: the console script beside that interpreter if the
  install made one, else the interpreter itself with `-m om_mcp`;
* run by `uvx om-mcp` (an environment in uv's cache, which uv may prune): `uvx om-mcp`.

`setup claude-code --plugin` records the same command in
`$XDG_CONFIG_HOME/om-mcp/om-mcp-command` (one line, an executable path) for the
Claude Code plugin's launcher; for the `python -m` case without a console
script a two-line shim is written beside it and recorded instead.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from om_mcp.paths import config_dir

SCRIPT = "om-mcp"


def om_mcp_command(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """[program, *leading args] that start this om-mcp."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if is_ephemeral(executable):
        # Run by `uvx om-mcp`: its environment lives in uv's cache, which uv may prune; the host runs
        # `uvx om-mcp` itself instead (uvx's absolute path where it can be found: a GUI app has no PATH).
        return [shutil.which("uvx") or "uvx", SCRIPT]
    name = Path(argv0).name
    if name.startswith(SCRIPT) and not name.endswith(".py") and os.path.isfile(argv0) and os.access(argv0, os.X_OK):
        return [os.path.abspath(argv0)]
    beside = Path(os.path.abspath(executable)).parent / (SCRIPT + (".exe" if sys.platform == "win32" else ""))
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [os.path.abspath(executable), "-m", "om_mcp"]


def is_ephemeral(executable: str) -> bool:
    """Is this interpreter one of uvx's throwaway environments (uv's cache, `archive-v0/<hash>/`)?"""
    return any(part.startswith("archive-v") for part in Path(executable).parts[:-1])


def shell_command(command: list[str], *args: str) -> str:
    """The command line a host runs through its shell."""
    return shlex.join([*command, *args])


def record_command(command: list[str], env: Mapping[str, str] | None = None) -> Path:
    """Write where om-mcp is for the plugin's launcher; the record file's path."""
    folder = config_dir(env)
    folder.mkdir(parents=True, exist_ok=True)
    program = command[0]
    if len(command) > 1:
        shim = folder / "om-mcp-shim"
        shim.write_text(f'#!/bin/sh\nexec {shlex.join(command)} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
        program = str(shim)
    record = folder / "om-mcp-command"
    record.write_text(program + "\n", encoding="utf-8")
    return record


def recorded_files(env: Mapping[str, str] | None = None) -> list[Path]:
    """What `record_command` writes: the record, and the shim it may point to."""
    folder = config_dir(env)
    return [folder / "om-mcp-command", folder / "om-mcp-shim"]
