"""CLI output helpers: data on pipes, decoration only on terminals, rich imported only when drawn."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass

from pydantic import BaseModel

from om_mcp.commands._output import print_json, print_table, progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


ROWS = [
    {"thread": "t-lisbon", "messages": 1234, "title": "Trip\tto Lisbon", "cost": None},
    {"thread": "t-pg", "messages": 7, "title": "Postgres", "cost": 0.0021},
]
COLUMNS = ["thread", ("messages", "msgs"), "title", "cost"]


def test_progress_is_silent_off_a_terminal_and_draws_on_one(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)
    quiet = io.StringIO()
    with progress(3, "importing", stream=quiet) as advance:
        for _ in range(3):
            advance()
    assert quiet.getvalue() == ""
    tty = _Tty()
    with progress(3, "importing", stream=tty) as advance:
        advance(2)
        advance()
    assert "importing" in tty.getvalue() and "3/3" in tty.getvalue()


def test_table_is_tsv_on_a_pipe():
    out = io.StringIO()
    print_table(ROWS, COLUMNS, out=out)
    assert out.getvalue().splitlines() == [
        "thread\tmsgs\ttitle\tcost",
        "t-lisbon\t1234\tTrip to Lisbon\t",
        "t-pg\t7\tPostgres\t0.0021",
    ]


def test_table_on_a_terminal_has_headers_and_readable_numbers(monkeypatch):
    monkeypatch.delenv("TERM", raising=False)

    @dataclass
    class Row:
        thread: str
        messages: int

    out = _Tty()
    print_table([Row("t-lisbon", 1234), ("t-pg", 7)], ["thread", ("messages", "msgs")], out=out)
    text = out.getvalue()
    assert "msgs" in text and "1,234" in text and "t-pg" in text


def test_json_is_plain_on_a_pipe_and_accepts_models():
    class Info(BaseModel):
        id: str
        tokens: int

    out = io.StringIO()
    print_json({"thread": Info(id="t", tokens=3), "list": [Info(id="u", tokens=4)]}, out=out)
    assert json.loads(out.getvalue()) == {"thread": {"id": "t", "tokens": 3}, "list": [{"id": "u", "tokens": 4}]}
    tty = _Tty()
    print_json({"a": 1}, out=tty)
    assert '"a"' in tty.getvalue()


def test_importing_the_helpers_does_not_import_rich():
    code = "import sys, om_mcp.commands._output; print('rich' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
