"""Nothing a reflection drops is lost: every line it drops, merges or supersedes is retired with the
generation that retired it; recall's search finds it (marked retired); `om-mcp restore --line`
brings it back; a superseded line is marked in both; the Reflector answers with edits over line
ids, a rewrite being the fallback when they do not parse; and a log reflection cannot shrink
retires its oldest days into an archive the context lists as a short catalog.

Through the MCP tools (recall, get_context, the observations resource) and the commands, with the
scripted model: a Reflector that rewrites and drops lines, one that answers with edits."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from support.backends import location
from support.engine import Memory, Script, config, conversation_of, memory_log_of, stored_events
from support.mcp import call, connect, ok, read_json
from support.processes import run_om

from om_mcp.engine.observation import archive
from om_mcp.engine.tokens import get_token_counter
from om_mcp.server import build_server
from om_mcp.store import EVERY_RESOURCE

pytestmark = pytest.mark.anyio

FACTS = {
    "m0": "User lives in Lisbon, near the Alfama",
    "m1": "User keeps a tortoise called Darwin",
    "m2": "Assistant ran the flaky migration test 3 times",
    "m3": "User moved to Porto in May",
    "m4": "User prefers oat milk in coffee",
    "m5": "User drinks oat milk lattes",
}


def fact_observer(messages: list[dict]) -> str:
    """One line per message it saw, the fact of its id."""
    ids = list(dict.fromkeys(re.findall(r"\bm\d+\b", conversation_of(messages))))
    lines = "\n".join(f"* 🔴 (10:{int(i[1:]):02d}) {FACTS.get(i, 'saw ' + i)}" for i in ids)
    return f"<observations>\nDate: Mar 2, 2026\n{lines}\n</observations>"


def dropping_reflector(messages: list[dict]) -> str:
    """A rewrite that keeps only the tortoise and says it its own way: every other line goes."""
    return "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:01) User has a tortoise, Darwin\n</observations>"


def labels(messages: list[dict]) -> dict[str, str]:
    """The edits mode's labels, by the fact on their line."""
    return {
        text: label
        for text, label in re.findall(r"^\* 🔴 \(\d\d:\d\d\) (.*) \[(L\d+)\]$", memory_log_of(messages), re.M)
    }


def editing_reflector(messages: list[dict]) -> str:
    at = labels(messages)
    return (
        "<edits>\n"
        f"drop {at[FACTS['m2']]}\n"
        f"merge {at[FACTS['m4']]} {at[FACTS['m5']]} => * 🔴 (10:05) User takes oat milk (lattes)\n"
        f"supersede {at[FACTS['m0']]} by {at[FACTS['m3']]}\n"
        f"keep {at[FACTS['m1']]}\n"
        "</edits>\n<suggested-response>carry on</suggested-response>"
    )


async def memory(script: Script, **options) -> Memory:
    return await Memory.open(config(**options), db_path=location(), client=script.model)


async def observed(mem: Memory, n: int = 6) -> None:
    await mem.append_messages("t", [{"id": f"m{i}", "role": "user", "content": f"m{i} something"} for i in range(n)])
    assert (await mem.observe("t")).ran


def search_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- observation (")]


async def test_every_line_a_rewrite_drops_is_retired_and_recall_finds_it():
    """The figure of the issue: lines retired by a reflection that recall finds (goal: all)."""
    script = Script(observer=fact_observer, reflector=dropping_reflector)
    mem = await memory(script)
    await observed(mem)
    outcome = await mem.reflect("t")
    assert outcome.ran and outcome.events[0]["answered_with"] == "rewrite"
    log = await mem.observations("t")
    assert "Darwin" in log["text"] and "Lisbon" not in log["text"]
    retired = {g["lines"][-1]["text"].split(") ", 1)[1]: g for g in log["retired"]}
    assert set(retired) == set(FACTS.values()), "every line of the old log is retired (the kept one was reworded)"
    assert {g["retired_by"] for g in log["retired"]} == {1}
    assert retired[FACTS["m1"]]["reason"] == "merged"  # most of its words are in the new line
    assert retired[FACTS["m2"]]["reason"] == "dropped" and retired[FACTS["m1"]]["replaced_by"]
    assert outcome.events[0]["retired_lines"] == len(FACTS)
    async with connect(build_server(mem.config, mem)) as client:
        found = 0
        for fact in FACTS.values():
            words = " ".join(w for w in fact.split() if len(w) > 3)[:40]
            text = await call(client, "recall", thread_id="t", mode="search", query=words)
            hits = [line for line in search_lines(text) if fact[:20] in line]
            assert hits and all("retired (" in line for line in hits), (fact, text)
            found += 1
        assert found == len(FACTS)
    await mem.close()


async def test_edits_drop_merge_and_supersede_and_the_context_shows_the_current_fact():
    script = Script(observer=fact_observer, reflector=editing_reflector)
    mem = await memory(script)
    await observed(mem)
    outcome = await mem.reflect("t")
    assert outcome.ran and outcome.events[0]["answered_with"] == "edits"
    # The Reflector saw every line with a label, and the edits instructions.
    assert len(labels(script.reflector_calls[0])) == len(FACTS)
    assert "HOW TO ANSWER: EDITS" in script.reflector_calls[0][0]["content"]
    async with connect(build_server(mem.config, mem)) as client:
        log = await read_json(client, "om://threads/t/observations")
        context = await ok(client, "get_context", thread_id="t")
    text = log["text"]
    for kept in (FACTS["m1"], FACTS["m3"], "User takes oat milk (lattes)"):
        assert kept in text and kept in context["system_text"]
    for gone in (FACTS["m0"], FACTS["m2"], FACTS["m4"], FACTS["m5"]):
        assert gone not in text and gone not in context["system_text"]
    # The groups keep their ranges: an edit changes lines, not where they came from.
    assert [g["range"] for g in log["groups"]] == ["m0:m5"]
    why = {g["lines"][-1]["text"].split(") ", 1)[1]: g for g in log["retired"]}
    assert why[FACTS["m2"]]["reason"] == "dropped"
    assert why[FACTS["m4"]]["reason"] == why[FACTS["m5"]]["reason"] == "merged"
    merged = next(e for g in log["groups"] for e in g["lines"] if e["id"] and "oat milk" in e["text"])
    assert why[FACTS["m4"]]["replaced_by"] == merged["id"].rpartition(".")[2]
    # Superseded: marked in both, the old line naming the new, the new one listing the old.
    old = why[FACTS["m0"]]
    new = next(e for g in log["groups"] for e in g["lines"] if e["id"] and FACTS["m3"] in e["text"])
    assert old["reason"] == "superseded" and old["replaced_by"] == new["id"].rpartition(".")[2]
    assert new["supersedes"] == [old["lines"][-1]["id"]]
    await mem.close()


async def test_edits_that_do_not_parse_fall_back_to_the_rewrite():
    def muddled(messages: list[dict]) -> str:
        return (
            "<edits>\nI think the log is fine, mostly.\n</edits>\n"
            "<observations>\nDate: Mar 2, 2026\n* 🔴 (10:01) User keeps a tortoise called Darwin [L2]\n</observations>"
        )

    script = Script(observer=fact_observer, reflector=muddled)
    mem = await memory(script)
    await observed(mem)
    outcome = await mem.reflect("t")
    assert outcome.ran and outcome.events[0]["answered_with"] == "rewrite"
    log = await mem.observations("t")
    assert "* 🔴 (10:01) User keeps a tortoise called Darwin\n" in log["text"] + "\n"  # its label taken off
    assert "[L2]" not in log["text"] and "I think" not in log["text"]
    assert len(log["retired"]) == len(FACTS) - 1  # the tortoise line was carried word for word
    await mem.close()


async def test_rewriting_only_when_edits_are_off():
    script = Script(observer=fact_observer, reflector=dropping_reflector)
    mem = await memory(script, reflection__edits=False)
    await observed(mem)
    assert (await mem.reflect("t")).ran
    system, user = script.reflector_calls[0]
    assert "HOW TO ANSWER: EDITS" not in system["content"] and "[L1]" not in user["content"]
    assert len((await mem.observations("t"))["retired"]) == len(FACTS)  # retired all the same
    await mem.close()


def om(db: Path, *args: str) -> subprocess.CompletedProcess:
    return run_om(*args, "--db", str(db), home=db.parent, OM_OBSERVATIONAL_MEMORY__SCOPE="thread")


@pytest.mark.slow
async def test_restore_line_brings_a_retired_line_back_and_forget_takes_its_copies(tmp_path: Path):
    db = tmp_path / "om.db"
    script = Script(observer=fact_observer, reflector=editing_reflector)
    mem = await Memory.open(config(), db_path=str(db), client=script.model)
    await observed(mem)
    before = {e["text"]: e["id"] for g in (await mem.observations("t"))["groups"] for e in g["lines"] if e["id"]}
    assert (await mem.reflect("t")).ran
    pile = (await mem.observations("t"))["retired"]
    await mem.close()
    dropped = next(g for g in pile if g["reason"] == "dropped")
    # By the id recall and `show` give for the retired line...
    done = om(db, "restore", "--line", dropped["lines"][-1]["id"], "--json")
    assert done.returncode == 0, done.stderr
    back = json.loads(done.stdout)
    assert back["was"] == "retired (dropped)" and FACTS["m2"] in back["text"]
    # ...or by the id the line had before the reflection.
    lisbon = next(i for t, i in before.items() if "Lisbon" in t)
    assert om(db, "restore", "--line", lisbon).returncode == 0
    again = om(db, "restore", "--line", lisbon)
    assert again.returncode == 2 and "active log already" in again.stderr
    assert om(db, "restore", "--line", "0123456789abcdef.abcdef").returncode == 4
    mem = await Memory.open(config(), db_path=str(db), client=script.model)
    log = await mem.observations("t")
    assert FACTS["m2"] in log["text"] and FACTS["m0"] in log["text"]
    assert all(FACTS["m2"] not in json.dumps(g) for g in log["retired"]), "off the pile once back"
    context = await mem.get_context("t")
    assert FACTS["m2"] in context.system_text
    assert [e["restored_lines"] for e in await stored_events(mem, "t", "data-om-restore")] == [1, 1]
    # Forgetting a line takes its retired copies too: forget is for good.
    tortoise = next(e["id"] for g in log["groups"] for e in g["lines"] if e["id"] and "tortoise" in e["text"])
    await mem.control.forget_observation(tortoise)
    assert (
        await mem.store.find_text("tortoise", EVERY_RESOURCE)
        == type(await mem.store.find_text("tortoise", EVERY_RESOURCE))()
    )
    await mem.close()


def stubborn_reflector(messages: list[dict]) -> str:
    """A rewrite that cannot shrink the log: it answers with every line again, labels off."""
    rows = [re.sub(r" \[L\d+\]$", "", r) for r in memory_log_of(messages).splitlines()]
    return "<observations>\n" + "\n".join(rows) + "\n</observations>"


def varied(seed: int) -> str:
    """Words that differ from line to line (a repeated line would read as a loop)."""
    import hashlib

    digest = hashlib.sha256(str(seed).encode()).hexdigest()
    return " ".join(WORDS[int(digest[i : i + 2], 16) % len(WORDS)] for i in range(0, 24, 2))


WORDS = "apple harbour violin granite meadow lantern copper orbit saffron thistle canyon ember quartz willow".split()


def days_observer(messages: list[dict]) -> str:
    """A day per message, each with long lines (the log outgrows its threshold fast)."""
    out = []
    for n in dict.fromkeys(re.findall(r"\bm(\d+)\b", conversation_of(messages))):
        lines = "\n".join(
            f"* 🟡 (10:{k:02d}) day {n} note {k}: kestrel{n}x{k} {varied(int(n) * 6 + k)}" for k in range(6)
        )
        out.append(f"Date: Mar {int(n) + 1}, 2026\n{lines}")
    return "<observations>\n" + "\n\n".join(out) + "\n</observations>"


async def test_a_log_reflection_cannot_shrink_retires_its_oldest_days_into_a_catalogued_archive():
    script = Script(observer=days_observer, reflector=stubborn_reflector)
    mem = await memory(script, reflection__observation_tokens=1500)
    await mem.append_messages("t", [{"id": "u", "role": "user", "content": "<remember>I am left-handed</remember>"}])
    for n in range(20):
        await mem.append_messages("t", [{"id": f"m{n}", "role": "user", "content": f"m{n} day"}])
    assert (await mem.observe("t")).ran
    big = (await mem.status("t")).windows.active.observations.tokens
    assert big > 1500
    outcome = await mem.reflect("t")
    assert outcome.ran and outcome.events[0]["archived_days"] > 0
    log = await mem.observations("t")
    assert log["tokens"] <= round(1500 * archive.ARCHIVE_SHARE)
    assert "day 19 note" in log["text"] and "day 0 note" not in log["text"]  # the newest stay
    assert "I am left-handed" in log["text"]  # the user's own line never leaves
    archived = [g for g in log["retired"] if g["reason"] == "archived"]
    assert len(archived) == outcome.events[0]["archived_days"]
    count = get_token_counter().count_text
    async with connect(build_server(mem.config, mem)) as client:
        context = await ok(client, "get_context", thread_id="t")
        catalog = re.search(r"<archive>\n.*?\n</archive>", context["system_text"], re.S).group(0)
        assert count(catalog) <= archive.CATALOG_TOKENS
        oldest = next(g for g in archived if "day 0 note" in json.dumps(g))
        assert oldest["id"] in catalog or "older (recall mode=search" in catalog
        shown = catalog.splitlines()[2]
        archive_id = shown.split()[1]
        read = await call(client, "recall", thread_id="t", cursor=archive_id)
        assert read.startswith("Retired observations (archived by generation 1)") and "note 0" in read
        hits = await call(client, "recall", thread_id="t", mode="search", query="kestrel0x3")
        assert any("retired (archived" in line for line in search_lines(hits))
    await mem.close()


async def test_the_catalog_holds_its_budget_however_big_the_archive():
    from om_mcp.store import RETIRED, Group

    count = get_token_counter().count_text
    many = [
        Group(
            f"{n:016x}",
            RETIRED,
            n,
            "observation",
            None,
            0,
            0,
            None,
            None,
            f"Date: Mar {n % 28 + 1}, 2026\n* 🟡 (10:00) note about topic number {n} " + "word " * 20,
            40,
            None,
            "",
            2,
            "archived",
        )
        for n in range(200)
    ]
    text = archive.catalog(many, count, total=500)
    assert count(text) <= archive.CATALOG_TOKENS
    assert "and " in text and "older" in text and text.count("\n- ") >= 3
    assert archive.catalog([], count) == ""


async def test_restoring_a_generation_takes_its_lines_off_the_pile():
    script = Script(observer=fact_observer, reflector=dropping_reflector)
    mem = await memory(script)
    await observed(mem)
    assert (await mem.reflect("t")).ran
    assert len(await mem.store.retired_groups("thread:t")) == len(FACTS)
    done = await mem.control.restore_generation("t", 0)
    assert done.generation == 2
    assert await mem.store.retired_groups("thread:t") == []  # every line is in the log again
    hits = await mem.search("t", "tortoise Darwin")
    assert not any(h.retired for h in hits)
    await mem.close()
