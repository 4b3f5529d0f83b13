"""A memory as the hooks record it when no model is set: for the status page's screenshot of a
model-less memory and its browser test (`python -m om_mcp.testing.status_demo --recorded`).

`fill_recorded(db_path)` writes four Claude Code sessions as Claude Code writes them (a
`.jsonl` transcript per session: prompts, replies, tool calls and their results) and stores
each with `om-mcp ingest`, which builds the rows as the hook does: threads named by their
session UUIDs, no title, nothing observed. Two projects, so two resources, named by their
folders' paths as written.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SHOP = "/home/alice/Projects/TeaShop"
DOTFILES = "/home/alice/Projects/dotfiles"
VERSION = "2.1.197"  # the Claude Code release whose transcript format the fixtures hold
Tool = tuple[str, dict[str, Any], str]  # (name, input, output)
Turn = tuple[str, list[tuple[str, Tool | None]]]  # (prompt, [(reply text, tool call or None)])


def bash(command: str, output: str, description: str = "") -> Tool:
    return "Bash", {"command": command, "description": description}, output


def read(path: str, output: str) -> Tool:
    return "Read", {"file_path": path}, output


def edit(path: str, old: str, new: str) -> Tool:
    return "Edit", {"file_path": path, "old_string": old, "new_string": new}, f"The file {path} has been updated."


def write(path: str, content: str) -> Tool:
    return "Write", {"file_path": path, "content": content}, f"File created successfully at: {path}"


SESSION_PY = "def start_session(user, response):\n    token = new_token()\n    response.set_cookie('sid', token)\n"
CHECKBOX = '<label><input type="checkbox" name="remember"> Remember me</label>\n<button type="submit">'
LOGIN: list[Turn] = [
    (
        "Add a 'remember me' checkbox to the login form; when it is ticked keep the session for 30 days,"
        " otherwise end it when the browser closes.",
        [
            ("I'll look at how sessions are created first.", read("src/auth/session.py", SESSION_PY)),
            (
                "The cookie has no max_age, so it already ends with the browser. I'll add a `remember` flag.",
                edit(
                    "src/auth/session.py",
                    "def start_session(user, response):",
                    "def start_session(user, response, remember=False):",
                ),
            ),
            ("Now the form and the view.", edit("templates/login.html", '<button type="submit">', CHECKBOX)),
            ("Done: with the box ticked the cookie gets `max_age=30 days`; without it, a session cookie.", None),
        ],
    ),
    (
        "Run the auth tests.",
        [
            (
                "",
                bash(
                    "pytest tests/auth -q",
                    "........F.\nFAILED tests/auth/test_login.py::test_session_cookie_expiry"
                    " - AssertionError: max_age is None\n1 failed, 9 passed in 2.31s",
                    "Run the auth tests",
                ),
            ),
            ("One failure: the test posts `remember=on`, and the view reads `remember == 'true'`.", None),
        ],
    ),
    (
        "Browsers send 'on' for a ticked checkbox, accept that.",
        [
            (
                "",
                edit(
                    "src/auth/views.py",
                    "remember = form.get('remember') == 'true'",
                    "remember = form.get('remember') in ('on', 'true', '1')",
                ),
            ),
            ("", bash("pytest tests/auth -q", "..........\n10 passed in 2.18s", "Run the auth tests")),
            ("All 10 auth tests pass now.", None),
        ],
    ),
    (
        "Is 30 days too long for a shop? What do others do?",
        [
            (
                "Common choices are 14 to 30 days for a remembered login; banks use none. For a tea shop with saved"
                " addresses and no stored cards, 30 days is usual, but ask again for the password before changing"
                " the email address or the password.",
                None,
            )
        ],
    ),
    (
        "OK keep 30 days, but require the password again for the account settings page.",
        [
            ("", read("src/account/views.py", "@login_required\ndef settings(request):\n    ...")),
            (
                "",
                edit(
                    "src/account/views.py",
                    "@login_required\ndef settings",
                    "@login_required\n@recent_password(minutes=10)\ndef settings",
                ),
            ),
            ("The settings page now asks for the password when the last one was typed over 10 minutes ago.", None),
        ],
    ),
    (
        "Add a test for that.",
        [
            (
                "",
                write(
                    "tests/account/test_settings.py",
                    "def test_settings_asks_for_the_password_after_ten_minutes(client, clock): ...",
                ),
            ),
            ("", bash("pytest tests/account -q", "....\n4 passed in 1.02s", "Run the account tests")),
            ("Added `test_settings_asks_for_the_password_after_ten_minutes`; the account tests pass.", None),
        ],
    ),
    (
        "Update the changelog and commit.",
        [
            (
                "",
                bash(
                    "git add -A && git commit -m 'Login: remember me for 30 days; settings ask for the password'",
                    "[main 4c1e9a2] Login: remember me for 30 days; settings ask for the password\n"
                    " 6 files changed, 71 insertions(+), 4 deletions(-)",
                    "Commit",
                ),
            ),
            ("Committed as 4c1e9a2.", None),
        ],
    ),
]
# A log pasted into a prompt: longer than a page shows of one part (the rest is one click away).
CI_LOG = (
    "".join(
        f"14:{n // 60:02d}:{n % 60:02d} tests/test_checkout.py::test_case_{n:03d} PASSED [{n // 2:3d}%]\n"
        for n in range(90)
    )
    + "14:01:30 tests/test_checkout.py::test_checkout_total FAILED [ 50%]\n"
)
CI: list[Turn] = [
    (
        "Why does test_checkout_total fail on CI but pass on my machine?",
        [
            (
                "",
                bash(
                    "gh run view --log-failed | tail -20",
                    "FAILED tests/test_checkout.py::test_checkout_total\nAssertionError: assert '12.50 €' == '12,50 €'",
                    "The failed CI log",
                ),
            ),
            (
                "CI formats the price as `12.50 €`, your machine as `12,50 €`: the test depends on the locale."
                " CI runs with `LANG=C.UTF-8`, your shell with `de_DE.UTF-8`.",
                None,
            ),
        ],
    ),
    (
        "Here is the whole CI log, is anything else failing?\n\n" + CI_LOG,
        [("No: only test_checkout_total fails; the other 90 pass.", None)],
    ),
    (
        "Make the formatting independent of the machine's locale.",
        [
            (
                "",
                edit(
                    "src/money.py", "locale.currency(amount)", "format_currency(amount, currency, locale=shop_locale)"
                ),
            ),
            (
                "",
                bash("LANG=C.UTF-8 pytest tests/test_checkout.py -q", "......\n6 passed in 0.84s", "With CI's locale"),
            ),
            (
                "Prices now use the shop's locale (from settings), whatever the server's is; the test passes under"
                " CI's locale too.",
                None,
            ),
        ],
    ),
    (
        "JPY shows 1,200.00 ¥, yen have no decimals.",
        [
            (
                "Babel knows each currency's digits: `format_currency` gives `¥1,200`. The old code forced two.",
                edit("src/money.py", "format='#,##0.00 ¤'", ""),
            ),
            ("Yen now show no decimals; euros keep two.", None),
        ],
    ),
]
DEPLOY: list[Turn] = [
    (
        "Write a migration that adds an index on orders.created_at, without locking the table.",
        [
            (
                "",
                write(
                    "migrations/0042_orders_created_at.sql",
                    "CREATE INDEX CONCURRENTLY orders_created_at ON orders (created_at);",
                ),
            ),
            (
                "`CREATE INDEX CONCURRENTLY` does not block writes; it cannot run inside a transaction, so the"
                " migration is marked `atomic = false`.",
                None,
            ),
        ],
    )
]
ZSH_PROMPT = (
    "autoload -Uz vcs_info\nprecmd() { vcs_info }\nzstyle ':vcs_info:git:*' formats '%F{green}(%b)%f '\n"
    "setopt prompt_subst\nPROMPT='%n@%m %~ ${vcs_info_msg_0_}%# '"
)
ZSH: list[Turn] = [
    (
        "Make my zsh prompt show the git branch in green.",
        [
            ("", read("~/.zshrc", "PROMPT='%n@%m %~ %# '")),
            ("", edit("~/.zshrc", "PROMPT='%n@%m %~ %# '", ZSH_PROMPT)),
            ("Open a new terminal (or `source ~/.zshrc`): in a repository the prompt shows `(main)` in green.", None),
        ],
    )
]
SESSIONS = [  # (project folder, days before now it started, turns), oldest first
    (SHOP, 2.9, DEPLOY),
    (SHOP, 1.9, CI),
    (DOTFILES, 1.4, ZSH),
    (SHOP, 0.1, LOGIN),
]


def transcript(cwd: str, start: datetime, turns: list[Turn], rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """(session id, transcript entries) of one Claude Code session."""
    session = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    entries: list[dict[str, Any]] = []
    now, parent = start, None

    def add(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal now, parent
        now += timedelta(seconds=rng.randint(3, 40))
        ident = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        entries.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "type": kind,
                "message": message,
                "uuid": ident,
                "timestamp": now.isoformat().replace("+00:00", "Z"),
                "userType": "external",
                "cwd": cwd,
                "sessionId": session,
                "version": VERSION,
                **extra,
            }
        )
        parent = ident

    for prompt, steps in turns:
        add("user", {"role": "user", "content": prompt})
        for text, tool in steps:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
            if tool is not None:
                name, arguments, _ = tool
                content.append(
                    {"type": "tool_use", "id": f"toolu_{rng.getrandbits(48):012x}", "name": name, "input": arguments}
                )
            add("assistant", {"role": "assistant", "type": "message", "model": "claude-sonnet-4-5", "content": content})
            if tool is not None:
                result = {
                    "type": "tool_result",
                    "tool_use_id": content[-1]["id"],
                    "content": tool[2],
                    "is_error": False,
                }
                add("user", {"role": "user", "content": [result]})
        now += timedelta(minutes=rng.randint(1, 6))
    return session, entries


def fill_recorded(db_path: str | Path, *, env: Mapping[str, str] | None = None, seed: int = 11) -> list[str]:
    """Store the sessions in `db_path` with `om-mcp ingest` (no model, no worker); their session ids."""
    rng = random.Random(seed)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    folder = Path(db_path).parent
    child = dict(env if env is not None else {k: v for k, v in os.environ.items() if not k.startswith("OM_")})
    sessions = []
    for cwd, days, turns in SESSIONS:  # stored oldest first, as the hooks would have: the newest is listed first
        session, entries = transcript(cwd, now - timedelta(days=days), turns, rng)
        path = folder / f"{session}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
        command = [sys.executable, "-m", "om_mcp", "ingest", str(path), "--db", str(db_path), "--resource", cwd]
        done = subprocess.run(
            [*command, "--no-worker", "--json"], env=child, capture_output=True, text=True, timeout=300
        )
        if done.returncode != 0:
            raise RuntimeError(f"om-mcp ingest exited with {done.returncode}: {done.stderr.strip()[-600:]}")
        sessions.append(session)
    return sessions
