"""The archive: when reflection cannot bring the log under its threshold, the oldest part
leaves the active log, and the context lists it as a short catalog.

A reflection that stays at or above `reflection.observation_tokens` at its last compression
level used to leave the log that size (and reflect it again only once it grew). Now the
oldest days of the reflected log retire into the archive, a day (one Date section of a
group) at a time, until the log is at ARCHIVE_SHARE of the threshold. An archived day is a
group of the retired pile (reason "archived"): recall's search finds its words, `recall
cursor=<its id>` reads it whole, `om-mcp restore --line` brings a line back. The user's own
lines (`[user-stated]`) never leave the active log.

The context shows the archive as a catalog of at most CATALOG_TOKENS tokens: one line per
archived day, the most recent first, with its id, its date and its first line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from om_mcp.engine.observation import lines
from om_mcp.neutral import fence, neutralise
from om_mcp.store import Group, NewGroup

ARCHIVE_SHARE = 0.75  # of reflection.observation_tokens: what the log keeps after archiving
CATALOG_TOKENS = 200  # the catalog's share of a context, at most
CATALOG_LINE_CHARS = 70
CATALOG_INTRO = (
    "Older observations, archived out of this view (recall mode=search finds their words;"
    " recall cursor=<id> reads one whole):"
)


def sections(text: str) -> list[list[str]]:
    """A group's text as its Date sections (what comes before the first Date line is one too)."""
    out: list[list[str]] = [[]]
    for row in text.splitlines():
        if lines.is_header(row) and out[-1]:
            out.append([])
        out[-1].append(row)
    return [s for s in out if any(r.strip() for r in s)]


def split(
    groups: Sequence[NewGroup], keep_tokens: int, count: Callable[[str], int]
) -> tuple[list[NewGroup], list[NewGroup]]:
    """(what stays, what is archived): the oldest days go while the log is over `keep_tokens`;
    the newest day always stays, and so does every user-stated line."""
    total = sum(g.tokens for g in groups)
    days = [(gi, day) for gi, g in enumerate(groups) for day in sections(g.text)]
    kept_days: dict[int, list[list[str]]] = {gi: [] for gi in range(len(groups))}
    archived: list[NewGroup] = []
    for position, (gi, day) in enumerate(days):
        newest = position == len(days) - 1
        if total <= keep_tokens or newest:
            kept_days[gi].append(day)
            continue
        header = [r for r in day if lines.is_header(r)][:1]
        stays = [r for r in day if lines.is_user_stated(r)]
        goes = [r for r in day if r not in stays and not lines.is_header(r)]
        if not any(r.strip() for r in goes):
            kept_days[gi].append(day)
            continue
        text = "\n".join(header + goes).strip("\n")
        archived.append(replace(groups[gi], text=text, tokens=count(text), retired_reason="archived"))
        if stays:
            kept_days[gi].append(header + stays)
        total -= count("\n".join(day)) - (count("\n".join(header + stays)) if stays else 0)
    kept: list[NewGroup] = []
    for gi, group in enumerate(groups):
        text = lines.tidy([r for day in kept_days[gi] for r in day])
        if not text.strip():
            continue
        kept.append(group if text == group.text else replace(group, text=text, tokens=count(text)))
    return kept, archived


def catalog(
    archived: Sequence[Group], count: Callable[[str], int], total: int | None = None, budget: int = CATALOG_TOKENS
) -> str:
    """The archive as the agent sees it: one line per archived day, most recent first (of `total`
    days, `archived` the most recent of them), within `budget` tokens."""
    if not archived:
        return ""
    entries = []
    used = count(CATALOG_INTRO) + 8  # the tags around it
    for group in archived:
        entry = f"- {group.id} · {_day(group.text)} · {neutralise(_first_line(group.text))}"
        cost = count(entry) + 1
        if used + cost > budget:
            break
        entries.append(entry)
        used += cost
    more = max(total or 0, len(archived)) - len(entries)
    if more:
        note = f"- and {more} older (recall mode=search finds them)"
        while entries and used + count(note) > budget:
            used -= count(entries.pop()) + 1
            more += 1
            note = f"- and {more} older (recall mode=search finds them)"
        entries.append(note)
    return fence("archive", "\n".join([CATALOG_INTRO, *entries]))


def _day(text: str) -> str:
    header = next((r.strip() for r in text.splitlines() if lines.is_header(r)), "")
    return header.partition(":")[2].strip() or "undated"


def _first_line(text: str) -> str:
    row = next((r for r in text.splitlines() if not lines.is_structural(r)), "")
    flat = " ".join(lines.strip_prefix(row).split())
    return flat if len(flat) <= CATALOG_LINE_CHARS else flat[: CATALOG_LINE_CHARS - 1].rstrip() + "…"
