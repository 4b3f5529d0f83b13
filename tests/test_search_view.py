"""`om-mcp search` shows what it found for what it is: observations and messages both in the default
view (the fused ranking puts every message hit of a busy memory above the first observation group, so a
list cut by score alone was messages only), a retired observation marked as retired, and a real id for
every observation, a remembered line's included (it has no message range: it showed `None:None`).

The command as a user runs it, over a memory the scripted model observed and reflected."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.engine import Memory, Script, config, conversation_of
from support.processes import run_om

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def observer(messages: list[dict]) -> str:
    ids = list(dict.fromkeys(re.findall(r"\bm\d+\b", conversation_of(messages))))
    lines = "\n".join(f"* 🟡 (10:00) User saw a kestrel ({i})" for i in ids)
    return f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>"


def reflector(messages: list[dict]) -> str:
    return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:00) User watches kestrels most mornings\n</observations>"


async def test_the_default_view_holds_both_kinds_marks_retired_lines_and_ids_remembered_ones(tmp_path: Path):
    db = tmp_path / "om.db"
    mem = await Memory.open(
        config(scope="resource"), db_path=str(db), client=Script(observer=observer, reflector=reflector).model
    )
    for batch in range(3):  # 60 messages that all say the word, observed in three groups
        await mem.append_messages(
            "t",
            [
                {"id": f"m{n}", "role": "user", "content": f"m{n}: a kestrel again"}
                for n in range(20 * batch, 20 * batch + 20)
            ],
        )
        assert (await mem.observe("t")).ran
    assert (await mem.reflect("t")).ran  # the lines of m0..m59 retired, one line in their place
    await mem.remember("Kestrel nests on the church tower are protected", resource_id="default")
    await mem.close()

    found = run_om("search", "kestrel church tower", "--db", str(db), "--json", home=tmp_path)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert len(hits) == 20
    observations = [h for h in hits if h["source"] == "observation"]
    assert 0 < len(observations) <= 10 and len(hits) - len(observations) >= 10  # both kinds, in their shares
    assert any(h["retired"] == "dropped" and h["retired_by"] == 1 for h in observations)
    remembered = next(h for h in observations if "church tower" in h["snippet"])
    assert re.fullmatch(r"[0-9a-f]{16}", remembered["id"]) and remembered["range"] is None
    assert all(h["id"] and "None" not in (h["range"] or "") for h in observations)

    shown = run_om("show", "t", "--db", str(db), home=tmp_path)  # the thread's view of the resource's log
    assert "None" not in shown.stdout and "church tower" in shown.stdout, shown.stdout + shown.stderr

    table = run_om("search", "kestrel church tower", "--db", str(db), home=tmp_path).stdout
    assert "None:None" not in table
    assert re.search(r"observation, RETIRED \(dropped by generation 1\)\s.*User saw a kestrel", table), table
    row = next(line for line in table.splitlines() if "church tower" in line)
    assert remembered["id"] in row and "RETIRED" not in row
    assert re.search(r"\sm\d+\s+user\s", table)  # and messages, with their ids
