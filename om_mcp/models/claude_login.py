"""Is the `claude` CLI logged in? Asked of the CLI itself, without a network call.

`claude auth status` (Claude Code 2.1.197) prints `{"loggedIn": false,
"authMethod": "none", ...}` and exits 1 when nobody is logged in, `loggedIn:
true` and exit 0 otherwise. It reads the local credentials only: it answers the
same inside a network namespace with no interfaces (`unshare -n`), in about
0.7 s. Being installed is not enough for `claude-cli/...` to observe: a
`claude -p` run without a login fails on every call.

The answer is cached per binary and per state of the files a login or logout
changes (under $XDG_CACHE_HOME/om-mcp), so a server start pays the 0.7 s once
after each login change, not every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from om_mcp.paths import cache_dir

TIMEOUT_SECONDS = 10.0
NOT_LOGGED_IN = "claude is installed but not logged in: run `claude auth login` (or /login inside Claude Code)"


@dataclass(frozen=True)
class Login:
    logged_in: bool
    detail: str  # how it is logged in, or why it is not known to be


def claude_login(claude: str, env: Mapping[str, str] | None = None) -> Login:
    """What `claude auth status` says for this environment (cached)."""
    env = os.environ if env is None else env
    cache = _cache_file(claude, env)
    if cache is not None:
        try:
            found = json.loads(cache.read_text(encoding="utf-8"))
            return Login(bool(found["logged_in"]), str(found["detail"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    login = _ask(claude, env)
    cache = _cache_file(claude, env)  # the first run creates ~/.claude.json: key on what it left
    if cache is not None and login.detail != "timeout":
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            temporary = cache.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"logged_in": login.logged_in, "detail": login.detail}), encoding="utf-8")
            os.replace(temporary, cache)
        except OSError:
            pass
    return login


def _ask(claude: str, env: Mapping[str, str]) -> Login:
    try:
        done = subprocess.run(
            [claude, "auth", "status", "--json"],
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
            env={**env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Login(False, "timeout")
    except OSError as error:
        return Login(False, f"`{claude} auth status` could not run ({error.strerror or error})")
    try:
        status = json.loads(done.stdout)
    except ValueError:
        status = None
    if not isinstance(status, dict) or "loggedIn" not in status:
        # An old CLI without `auth status`: it cannot say, so it does not count as logged in.
        return Login(False, f"`{claude} auth status` gave no answer (exit {done.returncode}); update Claude Code")
    if status.get("loggedIn") is True:
        return Login(True, str(status.get("authMethod") or "logged in"))
    return Login(False, NOT_LOGGED_IN)


def _cache_file(claude: str, env: Mapping[str, str]) -> Path | None:
    home = env.get("HOME") or str(Path.home())
    config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
    stamps = []
    for path in (claude, os.path.join(config, ".credentials.json"), os.path.join(home, ".claude.json")):
        try:
            info = os.stat(path)
            stamps.append([path, info.st_size, info.st_mtime_ns])
        except OSError:
            stamps.append([path, None])
    if stamps[0][1] is None:
        return None  # no binary there: nothing worth remembering
    # The advice is part of the key: an answer cached with older words is asked again.
    key = json.dumps(
        [os.path.realpath(claude), stamps, env.get("ANTHROPIC_API_KEY") is not None, NOT_LOGGED_IN], sort_keys=True
    )
    return cache_dir(env) / f"claude-login-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"
