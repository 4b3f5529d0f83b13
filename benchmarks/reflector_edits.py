"""The Reflector's output in edits mode against rewriting, on the same log, through the engine.

A fixed, realistic log (a coding project over DAYS days: decisions, preferences, tool steps under
finished work, passing remarks, facts that change) is observed by the scripted model, then reflected
once with `reflection.edits = true` and once with it false, on two copies of the same memory. The
scripted Reflector makes the same decisions both times: drop the passing remarks (🟢) and the tool
steps under finished work, merge each day's build notes into one line, let a changed fact supersede
the old one. In edits mode it names those changes over the line labels; rewriting, it writes the
resulting log whole. So both modes end at the same log, and what differs is what the model had to write.

Prints, per mode: the Reflector's output tokens (o200k, the answer's text), the log before and after,
the lines retired (and that recall's search finds each), the remembered line verbatim; then the ratio.
Counts, not times: the same on any machine. Run with `.venv/bin/python benchmarks/reflector_edits.py`.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from om_mcp.config import load_config  # noqa: E402
from om_mcp.engine import Memory  # noqa: E402
from om_mcp.engine.tokens import TokenCounter  # noqa: E402
from om_mcp.testing import ScriptedModel  # noqa: E402

DAYS = 12
REMEMBERED = "Deploys happen on Tuesdays only, never on Fridays"
TOPICS = ["billing service", "search index", "auth tokens", "CI pipeline", "mobile app", "data export"]
PEOPLE = ["Dana", "Ravi", "Mei", "Tomas", "Ines", "Kofi"]


def day_log(day: int) -> str:
    """One day of a realistic log: what was decided, done, said in passing, and changed."""
    topic, person = TOPICS[day % len(TOPICS)], PEOPLE[day % len(PEOPLE)]
    lines = [f"Date: Mar {day + 1}, 2026"]
    lines.append(f"* 🔴 ({9 + day % 3:02d}:05) User wants the {topic} refactor done before the {day + 10}th")
    lines.append(f"* 🟡 (09:20) {person} owns the {topic}; review requests go to {person.lower()}@example.com")
    for step in range(3):
        lines.append(
            f"* 🟡 (10:{10 + step:02d}) Build note for {topic}: step {step + 1} compiled in {30 + day + step} s"
        )
    lines.append(f"* ✅ (11:00) Migration {day + 1} of the {topic} ran; {40 + day} tables updated, tests pass")
    for step in range(4):
        lines.append(f"  * -> ran pytest tests/{topic.replace(' ', '_')}/test_{step}.py: {10 + step} passed")
    lines.append(f"* 🟢 (11:30) User said the coffee machine on floor {day % 4 + 1} is broken again")
    lines.append(f"* 🟢 (11:35) Assistant mentioned the weather in Lisbon is {18 + day % 5} degrees")
    lines.append(f"* 🔴 (12:00) User's staging database is db-{day}.internal")  # changes every day
    lines.append(f"* 🟡 (14:00) Decided to keep version {day + 3}.x of the {topic} client until April")
    return "\n".join(lines)


def observer(messages: list[dict], target: object) -> str:
    """A day of log per message it is shown (messages are `day N`)."""
    shown = messages[-1]["content"]
    text = shown if isinstance(shown, str) else " ".join(p.get("text", "") for p in shown)
    days = sorted({int(n) for n in re.findall(r"\bday (\d+)\b", text)})
    return "<observations>\n" + "\n\n".join(day_log(d) for d in days) + "\n</observations>"


LABEL = re.compile(r" \[(L\d+)\]$")


def decide(log: str) -> tuple[list[str], list[tuple[str, list[str], str]], list[tuple[str, str]], str]:
    """The Reflector's decisions on the log it was shown: (drop, merges, supersedes, the resulting log)."""
    rows = log.splitlines()
    label = {i: m.group(1) for i, r in enumerate(rows) if (m := LABEL.search(r))}
    plain = [LABEL.sub("", r) for r in rows]
    drop, merges, supersedes = [], [], []
    out: list[str] = []
    builds: list[int] = []
    previous_db: int | None = None
    under_done = False
    for i, row in enumerate(plain):
        if row.startswith("* ✅"):
            under_done = True
        elif not row.startswith("  "):
            under_done = False
        if "🟢" in row or (under_done and row.startswith("  * ->")):
            drop.append(i)
            continue
        if "Build note for" in row:
            builds.append(i)
            if len(builds) == 3:
                topic = re.search(r"Build note for (.*?):", row).group(1)
                merged = (
                    f"* 🟡 (10:12) {topic} builds: 3 steps compiled, slowest {max(_secs(plain[b]) for b in builds)} s"
                )
                merges.append((merged, builds, ""))
                out.append(merged)
                builds = []
            continue
        if "staging database is" in row:
            if previous_db is not None:
                supersedes.append((previous_db, i))
                out = [r for r in out if r != plain[previous_db]]
            previous_db = i
        out.append(row)
    edits = [f"drop {' '.join(label[i] for i in drop)}"] if drop and label else []
    for merged, members, _ in merges:
        if label:
            edits.append(f"merge {' '.join(label[m] for m in members)} => {merged}")
    for old, new in supersedes:
        if label:
            edits.append(f"supersede {label[old]} by {label[new]}")
    return edits, merges, supersedes, "\n".join(out)


def _secs(row: str) -> int:
    return int(re.search(r"in (\d+) s", row).group(1))


def reflector(messages: list[dict], target: object) -> str:
    log = re.search(r"<memory-log>\n(.*)\n</memory-log>", messages[1]["content"], re.S).group(1)
    edits, _, _, rewritten = decide(log)
    if "HOW TO ANSWER: EDITS" in messages[0]["content"]:
        return "<edits>\n" + "\n".join(edits) + "\n</edits>\n<suggested-response>Carry on.</suggested-response>"
    return f"<observations>\n{rewritten}\n</observations>\n<suggested-response>Carry on.</suggested-response>"


def model(messages: list[dict], target: object) -> str:
    system = messages[0]["content"]
    return (
        reflector(messages, target)
        if system.startswith("You keep the long-term memory")
        else observer(messages, target)
    )


async def run_mode(db: Path, edits: bool, count) -> dict:
    env = {
        "OM_OBSERVATIONAL_MEMORY__SCOPE": "thread",
        "OM_OBSERVATIONAL_MEMORY__MODEL": "default",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__BUFFER_TOKENS": "false",
        "OM_OBSERVATIONAL_MEMORY__OBSERVATION__MESSAGE_TOKENS": "1000000",
        "OM_OBSERVATIONAL_MEMORY__REFLECTION__OBSERVATION_TOKENS": "1000000",
        "OM_OBSERVATIONAL_MEMORY__REFLECTION__EDITS": "true" if edits else "false",
    }
    scripted = ScriptedModel(model)
    mem = await Memory.open(load_config(env=env), db_path=str(db), client=scripted)
    await mem.append_messages("t", [{"role": "user", "content": f"<remember>{REMEMBERED}</remember>"}])
    await mem.append_messages(
        "t",
        [{"id": f"m{d}", "role": "user" if d % 2 == 0 else "assistant", "content": f"day {d}"} for d in range(DAYS)],
    )
    assert (await mem.observe("t")).ran
    before = await mem.observations("t")
    outcome = await mem.reflect("t")
    assert outcome.ran, outcome.error
    answer = scripted.calls[-1]
    reply = await scripted._reply(answer.messages, answer.target)  # the same answer, again: its text
    after = await mem.observations("t")
    retired = await mem.store.retired_groups("thread:t")
    found = 0
    for group in retired:  # recall's search finds each retired line (or its twin of another day), by its words
        hits = await mem.search("t", " ".join(re.findall(r"[A-Za-z0-9.@]{4,}", group.text)[:10]), limit=50)
        found += any(h.retired and h.snippet.strip() == group.text.strip() for h in hits)
    verbatim = any(REMEMBERED in line["text"] for g in after["groups"] for line in g["lines"] if line["id"])
    await mem.close()
    return {
        "answer": count(reply),
        "before": before["tokens"],
        "after": after["tokens"],
        "lines_before": sum(1 for g in before["groups"] for line in g["lines"] if line["id"]),
        "lines_after": sum(1 for g in after["groups"] for line in g["lines"] if line["id"]),
        "retired": len(retired),
        "found": found,
        "verbatim": verbatim,
        "text": after["text"],
        "answered_with": outcome.events[0]["answered_with"],
    }


async def main(days: int) -> None:
    global DAYS
    DAYS = days
    count = TokenCounter().count_text
    with tempfile.TemporaryDirectory() as tmp:
        edits = await run_mode(Path(tmp) / "edits.db", True, count)
        rewrite = await run_mode(Path(tmp) / "rewrite.db", False, count)
    same = _lines(edits["text"]) == _lines(rewrite["text"])
    print(f"log: {days} days, {edits['lines_before']} lines, {edits['before']:,} tokens (o200k)\n")
    print(
        f"{'mode':<10}{'answered with':>15}{'output tokens':>15}{'log after':>11}{'lines':>7}{'retired':>9}"
        f"{'recall finds':>14}{'remembered':>12}"
    )
    for name, r in (("edits", edits), ("rewrite", rewrite)):
        print(
            f"{name:<10}{r['answered_with']:>15}{r['answer']:>15,}{r['after']:>11,}{r['lines_after']:>7}"
            f"{r['retired']:>9}{str(r['found']) + '/' + str(r['retired']):>14}"
            f"{'verbatim' if r['verbatim'] else 'LOST':>12}"
        )
    print(
        f"\nedits / rewrite output tokens: {edits['answer'] / rewrite['answer']:.3f}"
        f"  (the same resulting log: {'yes' if same else 'no'})"
    )


def _lines(text: str) -> list[str]:
    """The log's lines; the remembered one without its time (each mode remembered it at its own minute)."""
    rows = [r.strip() for r in text.splitlines() if r.strip().startswith("*")]
    return [re.sub(r"\(\d\d:\d\d\) ", "", r) if REMEMBERED in r else r for r in rows]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=DAYS, help=f"days of log ({DAYS})")
    anyio.run(main, parser.parse_args().days)
